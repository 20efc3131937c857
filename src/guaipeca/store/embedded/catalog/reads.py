"""The catalog's read queries: chunks and documents, slots and pending vectors, enrichment
terms and the LLM answer cache."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.errors import IndexCorruptError
from guaipeca.store.contract import ChunkRow, DocRow
from guaipeca.store.embedded.catalog.connection import CatalogConnection
from guaipeca.store.embedded.catalog.sql import CHUNK_SELECT, EMBEDDED, chunk_row
from guaipeca.store.filters import compile_where

__all__ = ["Catalog", "text_part"]


# Bytes of a document's text read at a time by :meth:`Catalog.document_part`.
_PIECE = 1 << 18


def text_part(blob: sqlite3.Blob, offset: int, limit: int) -> tuple[str, int]:
    """``(text[offset:offset + limit], len(text))`` of the UTF-8 text in ``blob``, reading
    it in pieces of ``_PIECE`` bytes, each cut before its last character's first byte so
    no character is split."""
    size, pos, chars = len(blob), 0, 0
    parts: list[str] = []
    while pos < size:
        blob.seek(pos)
        raw = blob.read(_PIECE)
        cut = len(raw)
        if pos + cut < size:  # back off to the start of the last character
            cut -= 1
            while cut > 0 and raw[cut] & 0xC0 == 0x80:
                cut -= 1
        piece = raw[:cut].decode("utf-8")
        lo, hi = max(offset - chars, 0), min(offset + limit - chars, len(piece))
        if lo < hi:
            parts.append(piece[lo:hi])
        chars += len(piece)
        pos += cut
    return "".join(parts), chars


class Catalog(CatalogConnection):
    """One corpus's catalog. ``path=None`` keeps it in memory (same schema, same SQL)."""

    # -- reads -------------------------------------------------------------------------
    def slot_map(self) -> tuple[npt.NDArray[np.int64], int]:
        """``slot -> chunk_pk`` (-1 where free), and the high-water mark of used slots."""
        with self._reading() as db:
            # Pending chunks hold a reserved slot with no vector yet: not live for readers.
            rows = db.execute(f"SELECT slot, chunk_pk FROM chunks WHERE {EMBEDDED}").fetchall()
            hw_row = db.execute("SELECT value FROM meta WHERE key = 'high_water'").fetchone()
        high_water = int(hw_row[0]) if hw_row else 0
        mapping = np.full(high_water, -1, dtype=np.int64)
        if rows:
            arr = np.asarray(rows, dtype=np.int64)
            if int(arr[:, 0].max()) >= high_water:
                raise IndexCorruptError("catalog slot beyond its high-water mark")
            mapping[arr[:, 0]] = arr[:, 1]
        return mapping, high_water

    def chunks(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        out: dict[int, ChunkRow] = {}
        with self._reading() as db:
            for i in range(0, len(chunk_pks), 500):
                part = list(chunk_pks[i : i + 500])
                marks = ",".join("?" * len(part))
                for r in db.execute(f"{CHUNK_SELECT} WHERE c.chunk_pk IN ({marks})", part):
                    row = chunk_row(r)
                    out[row.chunk_pk] = row
        return out

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]:
        """Chunks of one document with ``first <= position <= last``, in order."""
        hi = last if last is not None else 2**62
        with self._reading() as db:
            rows = db.execute(
                f"{CHUNK_SELECT} WHERE d.doc_id = ? AND c.position BETWEEN ? AND ? "
                "ORDER BY c.position",
                (doc_id, first, hi),
            ).fetchall()
        return [chunk_row(r) for r in rows]

    def page_span(self, doc_id: str) -> tuple[int | None, int | None]:
        """The first and last page of the document's chunks, by one aggregate query: a
        documents-mode search read every chunk of each document for this (0.3 s for a
        document of 300 chunks, issue 38)."""
        with self._reading() as db:
            low, high = db.execute(
                "SELECT min(p), max(p) FROM (SELECT c.page_start AS p FROM chunks c JOIN "
                "documents d ON d.doc_pk = c.doc_pk WHERE d.doc_id = ?1 UNION ALL SELECT "
                "c.page_end FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk "
                "WHERE d.doc_id = ?1)",
                (doc_id,),
            ).fetchone()
        return (None if low is None else int(low)), (None if high is None else int(high))

    def document(self, doc_id: str) -> DocRow | None:
        with self._reading() as db:
            r = db.execute(
                "SELECT doc_pk, doc_id, source_path, text, metadata, chunk_count "
                "FROM documents WHERE doc_id = ?",
                (doc_id,),
            ).fetchone()
        if r is None:
            return None
        return DocRow(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5])

    def document_part(self, doc_id: str, offset: int, limit: int) -> tuple[DocRow, int] | None:
        """The document with ``text[offset:offset + limit]`` as its text, and the whole
        text's length in characters. The text is read through SQLite's incremental blob
        I/O a piece at a time (``substr`` and ``length`` would load all of it into memory),
        so a reader of a 20-million-character document holds the part asked for, not the
        document. One read transaction: a writer meanwhile changes nothing seen here."""
        with self._reading() as db:
            db.execute("BEGIN")
            try:
                r = db.execute(
                    "SELECT doc_pk, doc_id, source_path, metadata, chunk_count "
                    "FROM documents WHERE doc_id = ?",
                    (doc_id,),
                ).fetchone()
                if r is None:
                    return None
                with db.blobopen("documents", "text", r[0], readonly=True) as blob:
                    text, chars = text_part(blob, offset, limit)
            finally:
                db.execute("COMMIT")
        return DocRow(r[0], r[1], r[2], text, json.loads(r[3]), r[4]), chars

    def signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        """``(text_sha256, metadata, source_path)`` of a stored document."""
        with self._reading() as db:
            r = db.execute(
                "SELECT text_sha256, metadata, source_path FROM documents WHERE doc_id = ?",
                (doc_id,),
            ).fetchone()
        return None if r is None else (str(r[0]), dict(json.loads(r[1])), r[2])

    def source_states(self) -> list[tuple[str, str | None, str | None, int | None, int | None]]:
        """``(doc_id, source_path, sha256, size, mtime_ns)`` of every document."""
        with self._reading() as db:
            return [
                (str(r[0]), r[1], r[2], r[3], r[4])
                for r in db.execute(
                    "SELECT doc_id, source_path, source_sha256, source_size, source_mtime_ns "
                    "FROM documents ORDER BY doc_id"
                )
            ]

    def slots_for_hashes(self, hashes: Sequence[str]) -> dict[str, int]:
        """One stored slot for each embedding-input hash that is already in the corpus."""
        out: dict[str, int] = {}
        with self._reading() as db:
            for i in range(0, len(hashes), 500):
                part = list(hashes[i : i + 500])
                marks = ",".join("?" * len(part))
                for h, slot in db.execute(
                    f"SELECT embed_sha256, min(slot) FROM chunks WHERE embed_sha256 IN ({marks}) "
                    f"AND {EMBEDDED} GROUP BY embed_sha256",
                    part,
                ):
                    out[str(h)] = int(slot)
        return out

    def list_documents(
        self, *, where: Mapping[str, Any] | None, corpus: str, limit: int, offset: int
    ) -> list[tuple[str, str | None, int, int, dict[str, Any]]]:
        """``(doc_id, source_path, chars, chunk_count, metadata)`` ordered by doc_id."""
        if not where:
            query = (
                "SELECT d.doc_id, d.source_path, length(d.text), d.chunk_count, d.metadata "
                "FROM documents d ORDER BY d.doc_id LIMIT ? OFFSET ?"
            )
            params: list[Any] = []
        else:
            # A document matches when any of its chunks does (page filters are per chunk).
            sql_where, params = compile_where(where, corpus=corpus)
            query = (
                "SELECT d.doc_id, d.source_path, length(d.text), d.chunk_count, d.metadata "
                "FROM documents d WHERE EXISTS (SELECT 1 FROM chunks c "
                f"WHERE c.doc_pk = d.doc_pk AND ({sql_where})) ORDER BY d.doc_id LIMIT ? OFFSET ?"
            )
        with self._reading() as db:
            rows = db.execute(query, [*params, limit, offset]).fetchall()
        return [(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]

    def filtered_slots(
        self, where: Mapping[str, Any] | None, *, corpus: str, embedded_only: bool = False
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(chunk_pks, slots)`` of the chunks that match ``where`` (``embedded_only``: only
        those with a vector, for dense scans; keyword search sees every committed chunk)."""
        sql_where, params = compile_where(where, corpus=corpus)
        if embedded_only:
            sql_where = f"({sql_where}) AND c.{EMBEDDED}"
        with self._reading() as db:
            rows = db.execute(
                "SELECT c.chunk_pk, c.slot FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk "
                f"WHERE {sql_where}",
                params,
            ).fetchall()
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        arr = np.asarray(rows, dtype=np.int64)
        return arr[:, 0], arr[:, 1]

    def iter_chunk_texts(self, batch: int = 2000) -> Iterator[list[tuple[int, str]]]:
        """All ``(chunk_pk, text)`` in batches, for rebuilding the lexical index."""
        last = -1
        while True:
            with self._reading() as db:
                rows = db.execute(
                    'SELECT c.chunk_pk, substr(d.text, c.start + 1, c."end" - c.start) '
                    "FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk "
                    "WHERE c.chunk_pk > ? ORDER BY c.chunk_pk LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not rows:
                return
            yield [(int(r[0]), str(r[1])) for r in rows]
            last = int(rows[-1][0])

    # -- enrichment (SPEC §8) ------------------------------------------------------------
    def enrichments(self, chunk_pks: Sequence[int]) -> dict[int, str | None]:
        """``chunk_pk -> enrichment JSON`` (None when the chunk was stored without it)."""
        out: dict[int, str | None] = {}
        with self._reading() as db:
            for i in range(0, len(chunk_pks), 500):
                part = list(chunk_pks[i : i + 500])
                marks = ",".join("?" * len(part))
                for pk, data in db.execute(
                    f"SELECT chunk_pk, enrichment FROM chunks WHERE chunk_pk IN ({marks})", part
                ):
                    out[int(pk)] = data
        return out

    def term_frequencies(self, terms: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """How many chunks carry each ``(kind, term)``."""
        out: dict[tuple[str, str], int] = {}
        with self._reading() as db:
            for kind, term in terms:
                row = db.execute(
                    "SELECT count(*) FROM chunk_terms WHERE term = ? AND kind = ?", (term, kind)
                ).fetchone()
                out[(kind, term)] = int(row[0])
        return out

    def chunks_with_terms(
        self, terms: Sequence[tuple[str, str]], *, limit: int
    ) -> list[tuple[int, str, str]]:
        """``(chunk_pk, kind, term)`` for chunks carrying any of ``terms`` (at most ``limit``
        rows per term, so one very common term cannot flood the result)."""
        out: list[tuple[int, str, str]] = []
        with self._reading() as db:
            for kind, term in terms:
                out.extend(
                    (int(pk), kind, term)
                    for (pk,) in db.execute(
                        "SELECT chunk_pk FROM chunk_terms WHERE term = ? AND kind = ? "
                        "ORDER BY chunk_pk LIMIT ?",
                        (term, kind, limit),
                    )
                )
        return out

    def cache_get(self, keys: Sequence[str]) -> dict[str, str]:
        """Cached LLM answers by key."""
        out: dict[str, str] = {}
        with self._reading() as db:
            for i in range(0, len(keys), 500):
                part = list(keys[i : i + 500])
                marks = ",".join("?" * len(part))
                for k, v in db.execute(
                    f"SELECT key, value FROM llm_cache WHERE key IN ({marks})", part
                ):
                    out[str(k)] = str(v)
        return out

    def cache_put(self, items: Mapping[str, str]) -> None:
        """Store LLM answers (a write that changes nothing derived: no new generation)."""
        if not items:
            return
        now = time.time()
        with self.write(derived=False) as txn:
            txn.execute_many(
                "INSERT OR REPLACE INTO llm_cache(key, value, created) VALUES (?,?,?)",
                [(k, v, now) for k, v in items.items()],
            )

    def counts(self) -> tuple[int, int, int]:
        """``(documents, chunks, free slots)``."""
        with self._reading() as db:
            docs = db.execute("SELECT count(*) FROM documents").fetchone()[0]
            chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            free = db.execute("SELECT count(*) FROM free_slots").fetchone()[0]
        return int(docs), int(chunks), int(free)

    def all_slots_in_order(self) -> list[tuple[int, int]]:
        """``(chunk_pk, slot)`` for every chunk ordered by chunk_pk (for compaction)."""
        with self._reading() as db:
            return [
                (int(a), int(b))
                for a, b in db.execute("SELECT chunk_pk, slot FROM chunks ORDER BY chunk_pk")
            ]

    def live_hashes(self) -> list[tuple[int, str]]:
        """``(slot, embedding-input hash)`` of every chunk with a vector, by slot (for the
        vector backup)."""
        sql = f"SELECT slot, embed_sha256 FROM chunks WHERE {EMBEDDED} ORDER BY slot"
        return [(int(a), str(b)) for a, b in self.read_sql(sql)]

    def pending_count(self) -> int:
        """Chunks committed by the keyword phase that still wait for their vector."""
        return int(self.read_sql("SELECT count(*) FROM pending_vectors")[0][0])

    def pending_slots(self) -> list[int]:
        """The slots reserved for pending chunks (for the integrity check)."""
        sql = "SELECT c.slot FROM pending_vectors p JOIN chunks c ON c.chunk_pk = p.chunk_pk"
        return [int(r[0]) for r in self.read_sql(sql)]

    def pending_work(self, limit: int) -> list[tuple[int, str, str]]:
        """``limit`` pending chunks, shortest input first (the model pads each batch to its
        longest input): ``(chunk_pk, embedding-input hash, input)``."""
        sql = (
            "SELECT p.chunk_pk, c.embed_sha256, p.input FROM pending_vectors p "
            "JOIN chunks c ON c.chunk_pk = p.chunk_pk "
            "ORDER BY length(p.input), p.chunk_pk LIMIT ?"
        )
        return [(int(a), str(b), str(c)) for a, b, c in self.read_sql(sql, (limit,))]

    def hashes_at(self, slots: Iterable[int]) -> dict[int, str]:
        """``slot -> embedding-input hash`` of the chunks in these slots."""
        wanted = [int(s) for s in slots]
        out: dict[int, str] = {}
        with self._reading() as db:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                sql = f"SELECT slot, embed_sha256 FROM chunks WHERE slot IN ({marks})"
                out.update((int(a), str(b)) for a, b in db.execute(sql, part))
        return out

    def hash_positions(self, hashes: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
        """``hash -> [(doc_id, position)]`` of the chunks that embedded these inputs."""
        wanted = sorted(set(hashes))
        out: dict[str, list[tuple[str, int]]] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ",".join("?" * len(part))
            for h, doc_id, pos in self.read_sql(
                "SELECT c.embed_sha256, d.doc_id, c.position FROM chunks c "
                f"JOIN documents d ON d.doc_pk = c.doc_pk WHERE c.embed_sha256 IN ({marks})",
                part,
            ):
                out.setdefault(str(h), []).append((str(doc_id), int(pos)))
        return out
