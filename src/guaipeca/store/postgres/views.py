"""Read views over a PostgreSQL corpus: the document-level catalog reads and the document
frequencies the reranker asks for (on the read server, like searches)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from guaipeca.store import ChunkRow, DocRow
from guaipeca.store.postgres.filters import compile_pg_where

__all__ = ["CHUNK_FIELDS", "PostgresCatalog", "PostgresLexical", "Tables", "chunk_row"]

T = TypeVar("T")

#: The columns :func:`chunk_row` reads, from ``chunks c JOIN documents d``.
CHUNK_FIELDS = (
    'c.chunk_pk, d.doc_id, c.position, c.start, c."end", c.heading_path, c.section_id, '
    "c.page_start, c.page_end, c.text, d.source_path, d.metadata, c.heading_trail, "
    "c.table_header"
)


def chunk_row(r: tuple[Any, ...]) -> ChunkRow:
    heading = tuple(json.loads(r[5]))
    return ChunkRow(
        chunk_pk=int(r[0]),
        doc_id=str(r[1]),
        position=int(r[2]),
        start=int(r[3]),
        end=int(r[4]),
        heading_path=heading,
        section_id=str(r[6]),
        page_start=r[7],
        page_end=r[8],
        slot=int(r[0]),
        text=str(r[9]),
        source_path=r[10],
        metadata=dict(r[11] or {}),
        heading_trail=tuple(json.loads(r[12])) if r[12] else heading,
        table_header=r[13],
    )


class Tables(Protocol):
    """What the views need from :class:`~guaipeca.store.postgres.corpus.PostgresCorpus`."""

    name: str

    def q(self, text: str) -> str: ...

    def read(self, work: Callable[[Any], T], *, primary: bool = False) -> T: ...


class PostgresLexical:
    """Document frequencies for the reranker, from the postings."""

    def __init__(self, corpus: Tables) -> None:
        self._c = corpus

    def doc_freqs(self, tokens: Iterable[str]) -> tuple[int, dict[str, int]]:
        terms = sorted(set(tokens))

        def work(conn: Any) -> tuple[int, dict[str, int]]:
            total = conn.execute(self._c.q("SELECT chunks FROM S.totals")).fetchone()[0]
            rows = conn.execute(
                self._c.q(
                    "SELECT term, count(*) FROM S.postings WHERE term = ANY(%s) GROUP BY term"
                ),
                (terms,),
            ).fetchall()
            return int(total), {t: 0 for t in terms} | {t: int(n) for t, n in rows}

        return self._c.read(work)


class PostgresCatalog:
    """Document-level reads; satisfies :class:`~guaipeca.store.contract.CatalogReader`."""

    def __init__(self, corpus: Tables) -> None:
        self._c = corpus

    def _one(self, statement: str, params: tuple[Any, ...]) -> Any:
        return self._c.read(lambda conn: conn.execute(self._c.q(statement), params).fetchone())

    def document(self, doc_id: str) -> DocRow | None:
        r = self._one(
            "SELECT doc_pk, doc_id, source_path, text, metadata, chunk_count FROM S.documents "
            "WHERE doc_id = %s",
            (doc_id,),
        )
        return None if r is None else DocRow(r[0], r[1], r[2], r[3], dict(r[4]), r[5])

    def document_part(self, doc_id: str, offset: int, limit: int) -> tuple[DocRow, int] | None:
        r = self._one(
            "SELECT doc_pk, doc_id, source_path, substr(text, %s, %s), metadata, chunk_count, "
            "char_length(text) FROM S.documents WHERE doc_id = %s",
            (max(0, offset) + 1, max(0, limit), doc_id),
        )
        if r is None:
            return None
        return DocRow(r[0], r[1], r[2], r[3], dict(r[4]), r[5]), int(r[6])

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]:
        statement = self._c.q(
            f"SELECT {CHUNK_FIELDS} FROM S.chunks c JOIN S.documents d ON d.doc_pk = c.doc_pk "
            "WHERE d.doc_id = %s AND c.position >= %s AND c.position <= %s ORDER BY c.position"
        )
        hi = 2**31 - 1 if last is None else last
        rows = self._c.read(lambda conn: conn.execute(statement, (doc_id, first, hi)).fetchall())
        return [chunk_row(r) for r in rows]

    def page_span(self, doc_id: str) -> tuple[int | None, int | None]:
        # One aggregate, no chunk text read (a 300-chunk document's rows cost 0.3 s).
        statement = self._c.q(
            "SELECT least(min(c.page_start), min(c.page_end)), "
            "greatest(max(c.page_start), max(c.page_end)) "
            "FROM S.chunks c JOIN S.documents d ON d.doc_pk = c.doc_pk WHERE d.doc_id = %s"
        )
        row = self._c.read(lambda conn: conn.execute(statement, (doc_id,)).fetchone())
        return (row[0], row[1]) if row else (None, None)

    def list_documents(
        self, *, where: Mapping[str, Any] | None, corpus: str, limit: int, offset: int
    ) -> list[tuple[str, str | None, int, int, dict[str, Any]]]:
        head = (
            "SELECT d.doc_id, d.source_path, char_length(d.text), d.chunk_count, d.metadata "
            "FROM S.documents d"
        )
        params: list[Any] = []
        if where:
            # A document matches when any of its chunks does (page filters are per chunk).
            cond, params = compile_pg_where(where, corpus=corpus)
            head += f" WHERE EXISTS (SELECT 1 FROM S.chunks c WHERE c.doc_pk = d.doc_pk AND {cond})"
        statement = self._c.q(head + ' ORDER BY d.doc_id COLLATE "C" LIMIT %s OFFSET %s')
        rows = self._c.read(
            lambda conn: conn.execute(statement, (*params, limit, offset)).fetchall()
        )
        return [(r[0], r[1], int(r[2]), int(r[3]), dict(r[4])) for r in rows]

    def source_states(self) -> list[tuple[str, str | None, str | None, int | None, int | None]]:
        statement = self._c.q(
            "SELECT doc_id, source_path, source_sha256, source_size, source_mtime_ns "
            'FROM S.documents ORDER BY doc_id COLLATE "C"'
        )
        # The writer compares these with the files: always the primary's current state.
        rows = self._c.read(lambda conn: conn.execute(statement).fetchall(), primary=True)
        return [tuple(r) for r in rows]
