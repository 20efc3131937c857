"""One corpus in PostgreSQL (tables in :mod:`guaipeca.store.postgres.schema`).

Dense search: ``ORDER BY embedding <#> query`` (pgvector's negative inner product; the
vectors are unit length, so its negation is the cosine the embedded backend computes).
``vector_index: exact`` sorts on ``(distance, chunk_pk)``, which no index can serve, so it
is an exact scan with the embedded backend's tie order; ``hnsw`` (and ``auto`` once the
corpus has ``hnsw_threshold`` chunks) builds an HNSW index and asks it for the top ``n``
(pgvector's iterative scan keeps filtered searches full).

BM25 is tantivy's as the embedded backend computes it (k1=1.2, b=0.75, lengths rounded to
tantivy's one-byte norms, IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``) over the ``postings``
of the product's own analyzer; N, n and the average length are read at query time, so they
are exact after every write. Word positions are not kept: ``phrase_weight`` is unused.

A write is one transaction that first locks the ``totals`` row: one writer per corpus at a
time, and a writer killed mid-batch leaves nothing of the batch behind.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from guaipeca.errors import ConfigError, ModelError
from guaipeca.lexical import Analyzer
from guaipeca.lexical.sparse import BM25_B, BM25_K1, fieldnorm
from guaipeca.store import ChunkRow
from guaipeca.store.contract import DenseScan, PreparedDocument, valid_corpus_name
from guaipeca.store.postgres.connection import Conn, Connection
from guaipeca.store.postgres.filters import compile_pg_where
from guaipeca.store.postgres.live import read_live
from guaipeca.store.postgres.schema import migrate
from guaipeca.store.postgres.shards import any_shard_rows, create_shard_tables, shard_rows
from guaipeca.store.postgres.views import CHUNK_FIELDS, PostgresCatalog, PostgresLexical, chunk_row
from guaipeca.types import ChunkSpan, CorpusStats, location_of

__all__ = ["PostgresCorpus", "vector_text"]

log = logging.getLogger("guaipeca")
F32 = npt.NDArray[np.float32]
T = TypeVar("T")
#: Seconds between checks for an HNSW index another process may have built.
HNSW_RECHECK: Final = 30.0


def vector_text(vec: npt.ArrayLike) -> str:
    """pgvector's text form; repr of each float32 as a double parses back to the same float."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vec, dtype=np.float32)) + "]"


def parse_vector(text: str) -> F32:
    return np.array(text[1:-1].split(","), dtype=np.float32)


class PostgresCorpus:
    """One corpus in its own PostgreSQL schema; satisfies :class:`~.contract.CorpusStore`."""

    def __init__(
        self, backend: Connection, name: str, *, language: str | None, model: str, dim: int
    ) -> None:
        from psycopg import sql

        self.name = valid_corpus_name(name)
        self.backend = backend
        self.schema = backend.schema(name)
        self.model = model
        self.dim = dim
        self.s = sql.Identifier(self.schema).as_string(None)
        self._hnsw: bool | None = None  # whether the HNSW index exists (None: not asked yet)
        self._hnsw_asked = -HNSW_RECHECK
        self.language = self._open(language)
        self.analyzer = Analyzer(self.language)
        self._catalog = PostgresCatalog(self)

    @property
    def catalog(self) -> PostgresCatalog:
        return self._catalog

    @property
    def lexical(self) -> PostgresLexical:
        return PostgresLexical(self)

    def read(self, work: Callable[[Conn], T], *, primary: bool = False) -> T:
        """``work(conn)`` on the read server (the replica when set), or on the primary.

        On the read server, a search may answer without a shard that does not answer
        (``partial_results``; :mod:`~guaipeca.store.postgres.live`)."""
        if primary:
            return self.backend.run(work)
        return read_live(self.backend, self.s, work)

    def q(self, text: str) -> str:
        """``text`` with ``S.`` naming this corpus's schema (a quoted identifier)."""
        return text.replace("S.", self.s + ".")

    # -- schema ---------------------------------------------------------------------------
    def _open(self, language: str | None) -> str:
        def setup(conn: Conn) -> dict[str, Any]:
            # One process at a time creates or migrates a corpus's schema.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.schema,))
            sharded = bool(self.backend.shards)
            created = migrate(conn, self.schema, self.dim, sharded) == 0
            if created and sharded:
                create_shard_tables(self.backend, conn, self.schema, self.dim)
            rows = conn.execute(self.q("SELECT key, value FROM S.meta")).fetchall()
            meta = {k: v for k, v in rows}
            if "model" not in meta:
                lang = language or "english"
                for key, value in (
                    ("model", self.model),
                    ("dimension", self.dim),
                    ("language", lang),
                    ("corpus", self.name),
                ):
                    conn.execute(
                        self.q("INSERT INTO S.meta VALUES (%s, %s::jsonb)"),
                        (key, json.dumps(value)),
                    )
                meta.update(model=self.model, dimension=self.dim, language=lang)
            return meta

        meta = self.backend.run(setup)
        if meta.get("model") != self.model or meta.get("dimension") != self.dim:
            raise ModelError(
                f"corpus {self.name!r} was indexed with model {meta.get('model')} "
                f"(dimension {meta.get('dimension')}), not {self.model} (dimension {self.dim}); "
                "re-index it with 'guaipeca index --force'"
            )
        lang = str(meta.get("language") or "english")
        if language is not None and language != lang:
            raise ConfigError(
                f"corpus {self.name!r} was indexed in language {lang!r}, not {language!r}; "
                "re-index it with 'guaipeca index --force' to change its language"
            )
        return lang

    # -- writes ---------------------------------------------------------------------------
    def known_vectors(self, hashes: Iterable[str]) -> dict[str, F32]:
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        rows = self.backend.run(
            lambda conn: conn.execute(
                self.q(
                    "SELECT DISTINCT ON (embed_sha256) embed_sha256, embedding::text "
                    "FROM S.chunks WHERE embed_sha256 = ANY(%s) AND embedding IS NOT NULL"
                ),
                (wanted,),
            ).fetchall()
        )
        return {h: parse_vector(v) for h, v in rows}

    def stored_signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        row = self.backend.run(
            lambda conn: conn.execute(
                self.q(
                    "SELECT text_sha256, metadata, source_path FROM S.documents WHERE doc_id = %s"
                ),
                (doc_id,),
            ).fetchone()
        )
        return None if row is None else (row[0], dict(row[1]), row[2])

    def write(
        self, docs: Sequence[PreparedDocument], *, keys: Sequence[Sequence[int]] | None = None
    ) -> None:
        """Insert or replace documents in one transaction; ``keys`` gives each document's
        chunk ids (a migration keeps them), by default new ids are allocated."""
        if not docs:
            return
        tokens = [[self.analyzer.tokens(c.text) for c in d.chunks] for d in docs]
        self.backend.run(lambda conn: self._write(conn, docs, tokens, keys))
        self._maybe_index()

    def _write(
        self,
        conn: Conn,
        docs: Sequence[PreparedDocument],
        tokens: list[list[list[str]]],
        keys: Sequence[Sequence[int]] | None,
    ) -> None:
        conn.execute(self.q("SELECT 1 FROM S.totals WHERE id = 1 FOR UPDATE"))
        removed = self._remove(conn, [d.doc_id for d in docs])
        count = sum(len(d.chunks) for d in docs)
        if keys is None:
            pks = [
                r[0]
                for r in conn.execute(
                    self.q("SELECT nextval('S.chunk_pk_seq') FROM generate_series(1, %s)"),
                    (count,),
                ).fetchall()
            ]
        else:
            pks = [int(k) for ks in keys for k in ks]
            if pks:
                conn.execute(
                    self.q(
                        "SELECT setval('S.chunk_pk_seq', "
                        "greatest(%s, (SELECT last_value FROM S.chunk_pk_seq)))"
                    ),
                    (max(pks),),
                )
        doc_pks = [
            r[0]
            for r in conn.execute(
                self.q("SELECT nextval('S.doc_pk_seq') FROM generate_series(1, %s)"), (len(docs),)
            ).fetchall()
        ]
        added_tokens = sum(len(t) for ts in tokens for t in ts)
        self._insert(conn, docs, tokens, pks, doc_pks)
        conn.execute(
            self.q("UPDATE S.totals SET chunks = chunks + %s, tokens = tokens + %s WHERE id = 1"),
            (count - removed[0], added_tokens - removed[1]),
        )

    def _insert(
        self,
        conn: Conn,
        docs: Sequence[PreparedDocument],
        tokens: list[list[list[str]]],
        pks: list[int],
        doc_pks: list[int],
    ) -> None:
        cur = conn.cursor()
        rows = (
            row
            for doc, toks, doc_pk, first in zip(docs, tokens, doc_pks, _starts(docs), strict=True)
            for row in _chunk_rows(doc, toks, doc_pk, pks[first : first + len(doc.chunks)])
        )
        with cur.copy(self.q(f"COPY S.chunks ({_CHUNK_COPY}) FROM STDIN")) as copy:
            for row in rows:
                copy.write_row(row)
        chunk_tokens = (t for toks in tokens for t in toks)
        with cur.copy(self.q("COPY S.postings (term, chunk_pk, tf, norm) FROM STDIN")) as copy:
            for pk, toks in zip(pks, chunk_tokens, strict=True):
                norm = fieldnorm(len(toks))
                for term, tf in Counter(toks).items():
                    copy.write_row((term, pk, tf, norm))
        cur.executemany(
            self.q(
                "INSERT INTO S.documents (doc_pk, doc_id, source_path, filename, extension, "
                "modified, text, text_sha256, metadata, chunk_count, tokens, source_sha256, "
                "source_size, source_mtime_ns) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s)"
            ),
            [
                _doc_values(doc, doc_pk, sum(len(t) for t in toks))
                for doc, toks, doc_pk in zip(docs, tokens, doc_pks, strict=True)
            ],
        )

    def _remove(self, conn: Conn, doc_ids: Sequence[str]) -> tuple[int, int, int]:
        """Delete documents and their chunks: ``(chunks, tokens, documents)`` removed."""
        gone = conn.execute(
            self.q("DELETE FROM S.documents WHERE doc_id = ANY(%s) RETURNING doc_pk"),
            (list(doc_ids),),
        ).fetchall()
        if not gone:
            return 0, 0, 0
        doc_pks = [r[0] for r in gone]
        chunks = conn.execute(
            self.q("DELETE FROM S.chunks WHERE doc_pk = ANY(%s) RETURNING chunk_pk, tokens"),
            (doc_pks,),
        ).fetchall()
        if chunks:
            conn.execute(
                self.q("DELETE FROM S.postings WHERE chunk_pk = ANY(%s)"),
                ([r[0] for r in chunks],),
            )
        return len(chunks), sum(r[1] for r in chunks), len(gone)

    def _maybe_index(self) -> None:
        """Build the HNSW index once the corpus is large enough (``vector_index``)."""
        mode = self.backend.vector_index
        if mode == "exact" or self.has_hnsw_cached():
            return
        if mode == "auto" and self.count() < self.backend.hnsw_threshold:
            return
        self.build_hnsw()

    def has_hnsw(self) -> bool:
        """Whether the HNSW index exists (with shards: on the first shard that answers)."""
        statement = "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = 'chunks_hnsw'"
        if self.backend.shards:
            return bool(any_shard_rows(self.backend, statement, (self.schema,)))
        return bool(
            self.backend.run(lambda conn: conn.execute(statement, (self.schema,)).fetchone())
        )

    def build_hnsw(self) -> None:
        """Build the HNSW index (on every shard, each over its own chunks)."""
        log.info("corpus %s: building the HNSW index", self.name)
        statement = self.q(
            "CREATE INDEX IF NOT EXISTS chunks_hnsw ON S.chunks "
            "USING hnsw (embedding vector_ip_ops)"
        )
        if self.backend.shards:
            for dsn in self.backend.shards:
                shard_rows(dsn, statement, ())
        else:
            self.backend.run(lambda conn: conn.execute(statement))
        self._hnsw = True

    # -- migration ------------------------------------------------------------------------
    def first_chunk_ids(self) -> dict[str, int]:
        """Each document's first chunk id (0 for a document without chunks)."""
        rows = self.read(
            lambda conn: conn.execute(
                self.q(
                    "SELECT d.doc_id, COALESCE(min(c.chunk_pk), 0) FROM S.documents d "
                    "LEFT JOIN S.chunks c ON c.doc_pk = d.doc_pk GROUP BY d.doc_id"
                )
            ).fetchall(),
            primary=True,
        )
        return {str(d): int(pk) for d, pk in rows}

    def export_documents(self, doc_ids: Sequence[str]) -> list[tuple[PreparedDocument, list[int]]]:
        """Documents as stored, with their chunks' vectors, hashes and ids (for migration)."""

        def work(conn: Conn) -> tuple[list[Any], list[Any]]:
            docs = conn.execute(
                self.q(
                    "SELECT doc_pk, doc_id, text, text_sha256, metadata, source_path, modified, "
                    "source_sha256, source_size, source_mtime_ns FROM S.documents "
                    "WHERE doc_id = ANY(%s)"
                ),
                (list(doc_ids),),
            ).fetchall()
            chunks = conn.execute(
                self.q(
                    f"SELECT {CHUNK_FIELDS}, c.doc_pk, c.embed_sha256, c.embedding::text, "
                    "c.enrichment::text FROM S.chunks c JOIN S.documents d ON d.doc_pk = c.doc_pk "
                    "WHERE d.doc_id = ANY(%s) ORDER BY c.doc_pk, c.position"
                ),
                (list(doc_ids),),
            ).fetchall()
            return docs, chunks

        docs, chunks = self.read(work, primary=True)
        by_doc: dict[int, list[Any]] = {}
        for r in chunks:
            by_doc.setdefault(r[-4], []).append(r)
        order = {d: i for i, d in enumerate(doc_ids)}
        out = []
        for doc in sorted(docs, key=lambda r: order.get(r[1], 0)):
            mine = by_doc.get(doc[0], [])
            rows = [chunk_row(r) for r in mine]
            prepared = PreparedDocument(
                doc_id=doc[1],
                text=doc[2],
                text_sha256=doc[3],
                metadata=dict(doc[4]),
                source_path=doc[5],
                modified=doc[6],
                chunks=[ChunkSpan(**location_of(r)) for r in rows],
                embed_hashes=[r[-3] for r in mine],
                vectors=np.asarray([parse_vector(r[-2]) for r in mine], dtype=np.float32).reshape(
                    len(mine), self.dim
                ),
                source_state=(doc[7], doc[8], doc[9]),
                enrichments=[(r[-1], ()) for r in mine] if any(r[-1] for r in mine) else (),
            )
            out.append((prepared, [r.chunk_pk for r in rows]))
        return out

    def delete(self, doc_ids: Sequence[str]) -> int:
        def work(conn: Conn) -> int:
            conn.execute(self.q("SELECT 1 FROM S.totals WHERE id = 1 FOR UPDATE"))
            chunks, tokens, docs = self._remove(conn, doc_ids)
            conn.execute(
                self.q(
                    "UPDATE S.totals SET chunks = chunks - %s, tokens = tokens - %s WHERE id = 1"
                ),
                (chunks, tokens),
            )
            return docs

        return self.backend.run(work) if doc_ids else 0

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool:
        return self._update(
            "source_sha256 = %s, source_size = %s, source_mtime_ns = %s, modified = %s",
            (*state, modified),
            doc_id,
        )

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        return self._update("metadata = %s::jsonb", (json.dumps(dict(metadata)),), doc_id)

    def _update(self, assignments: str, values: tuple[Any, ...], doc_id: str) -> bool:
        statement = self.q(f"UPDATE S.documents SET {assignments} WHERE doc_id = %s")
        return bool(
            self.backend.run(lambda conn: conn.execute(statement, (*values, doc_id)).rowcount)
        )

    def compact(self) -> None:
        """Recount the totals exactly and refresh the planner's statistics."""

        def work(conn: Conn) -> None:
            conn.execute(self.q("SELECT 1 FROM S.totals WHERE id = 1 FOR UPDATE"))
            conn.execute(
                self.q(
                    "UPDATE S.totals SET chunks = t.n, tokens = t.s FROM "
                    "(SELECT count(*) AS n, COALESCE(sum(tokens), 0) AS s FROM S.chunks) t "
                    "WHERE id = 1"
                )
            )
            for table in ("documents", "chunks", "postings"):
                conn.execute(self.q(f"ANALYZE S.{table}"))

        self.backend.run(work)

    # -- reads ----------------------------------------------------------------------------
    def dense(
        self,
        query: F32,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        scan: DenseScan = "exact",  # the server's index decides (vector_index)
    ) -> list[tuple[int, float]]:
        if n <= 0:
            return []
        cond, params = compile_pg_where(where, corpus=self.name)
        vec = vector_text(query)
        approximate = self.backend.vector_index != "exact" and self.has_hnsw_cached()
        order = "c.embedding <#> %s::vector" + ("" if approximate else ", c.chunk_pk")
        limit = n + 8 if approximate else n
        join = "" if cond == "TRUE" else "JOIN S.documents d ON d.doc_pk = c.doc_pk "
        statement = self.q(
            f"SELECT c.chunk_pk, -(c.embedding <#> %s::vector) FROM S.chunks c {join}"
            f"WHERE c.embedding IS NOT NULL AND {cond} ORDER BY {order} LIMIT %s"
        )

        def work(conn: Conn) -> list[tuple[int, float]]:
            if approximate and where:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            return conn.execute(statement, (vec, *params, vec, limit)).fetchall()  # type: ignore[no-any-return]

        rows = self.read(work)
        ranked = sorted(((int(pk), float(s)) for pk, s in rows), key=lambda t: (-t[1], t[0]))
        return ranked[:n]

    def has_hnsw_cached(self) -> bool:
        """Whether the HNSW index exists: once known, for good; until then asked again at
        most every :data:`HNSW_RECHECK` seconds (another process may build it)."""
        now = time.monotonic()
        if not self._hnsw and now - self._hnsw_asked > HNSW_RECHECK:
            self._hnsw = self.has_hnsw()
            self._hnsw_asked = now
        return bool(self._hnsw)

    def keyword(
        self,
        query: str,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        phrase_weight: float = 0.0,  # no word positions are kept: unused
    ) -> list[tuple[int, float]]:
        if n <= 0:
            return []
        counts = Counter(self.analyzer.tokens(query))
        if not counts:
            return []
        cond, params = compile_pg_where(where, corpus=self.name)
        terms = sorted(counts)
        # Scores first, from the postings alone (each carries its chunk's rounded length);
        # the filter's joins only see the chunks that scored.
        join = (
            ""
            if cond == "TRUE"
            else "JOIN S.chunks c ON c.chunk_pk = s.chunk_pk "
            "JOIN S.documents d ON d.doc_pk = c.doc_pk "
        )
        k1, b = BM25_K1, BM25_B
        statement = self.q(
            "WITH q(term, qtf) AS (SELECT * FROM unnest(%s::text[], %s::int[])), "
            "t AS (SELECT chunks::float8 AS n, GREATEST(tokens::float8 / NULLIF(chunks, 0), 1e-9) "
            "AS avgdl FROM S.totals WHERE id = 1), "
            "df AS (SELECT q.term, q.qtf, count(p.chunk_pk)::float8 AS n FROM q "
            "JOIN S.postings p ON p.term = q.term GROUP BY q.term, q.qtf), "
            "s AS (SELECT p.chunk_pk, sum(df.qtf * ln(1 + (t.n - df.n + 0.5) / (df.n + 0.5)) * "
            f"p.tf * {k1 + 1} / (p.tf + {k1} * ({1 - b} + {b} * p.norm / t.avgdl)) "
            # Summed in term order: the same last bits whatever order the rows come in.
            "ORDER BY df.term) AS score "
            "FROM df JOIN S.postings p ON p.term = df.term CROSS JOIN t GROUP BY p.chunk_pk) "
            f"SELECT s.chunk_pk, s.score FROM s {join}WHERE {cond} "
            "ORDER BY s.score DESC, s.chunk_pk LIMIT %s"
        )
        rows = self.read(
            lambda conn: conn.execute(
                statement, (terms, [counts[t] for t in terms], *params, n)
            ).fetchall()
        )
        return [(int(pk), float(s)) for pk, s in rows if s > 0]

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        wanted = [int(pk) for pk in chunk_pks if int(pk) > 0]
        if not wanted:
            return {}
        statement = self.q(
            f"SELECT {CHUNK_FIELDS} FROM S.chunks c JOIN S.documents d ON d.doc_pk = c.doc_pk "
            "WHERE c.chunk_pk = ANY(%s)"
        )
        found = self.read(lambda conn: conn.execute(statement, (wanted,)).fetchall())
        return {r[0]: chunk_row(r) for r in found}

    def count(self) -> int:
        row = self.backend.run(
            lambda conn: conn.execute(self.q("SELECT chunks FROM S.totals WHERE id = 1")).fetchone()
        )
        return int(row[0])

    def stats(self) -> CorpusStats:
        def work(conn: Conn) -> tuple[int, int, int, int, int]:
            docs = conn.execute(self.q("SELECT count(*) FROM S.documents")).fetchone()[0]
            chunks = conn.execute(self.q("SELECT chunks FROM S.totals")).fetchone()[0]
            sizes = [
                conn.execute(
                    "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')",
                    (self.schema, names),
                ).fetchone()[0]
                for names in (["documents"], ["chunks"], ["postings"])
            ]
            return docs, chunks, *sizes

        docs, chunks, doc_bytes, chunk_bytes, posting_bytes = self.backend.run(work, read=True)
        return CorpusStats(
            name=self.name,
            language=self.language,
            documents=int(docs),
            chunks=int(chunks),
            deleted_slots=0,
            vector_bytes=int(chunks) * self.dim * 4,
            catalog_bytes=int(doc_bytes) + int(chunk_bytes),
            lexical_bytes=int(posting_bytes),
        )

    def release_memory(self) -> None:
        """Nothing mapped here: the vectors live in PostgreSQL."""

    def close(self) -> None:
        """Nothing to release per corpus: the backend owns the connections."""


_CHUNK_COPY = (
    'chunk_pk, doc_pk, position, start, "end", text, heading_path, heading_trail, table_header, '
    "section_id, page_start, page_end, embed_sha256, enrichment, tokens, norm, embedding"
)


def _starts(docs: Sequence[PreparedDocument]) -> list[int]:
    """Where each document's chunks start in the batch's list of chunk ids."""
    out, at = [], 0
    for doc in docs:
        out.append(at)
        at += len(doc.chunks)
    return out


def _chunk_rows(
    doc: PreparedDocument, tokens: list[list[str]], doc_pk: int, pks: Sequence[int]
) -> Iterable[tuple[Any, ...]]:
    """One document's chunk rows, in :data:`_CHUNK_COPY` order."""
    enrichments = doc.enrichments or ()
    for i, chunk in enumerate(doc.chunks):
        heading = list(chunk.heading_path)
        trail = list(chunk.heading_trail or heading)
        enrichment = enrichments[i][0] if i < len(enrichments) and enrichments[i][0] else None
        yield (
            pks[i],
            doc_pk,
            chunk.position,
            chunk.start,
            chunk.end,
            chunk.text,
            json.dumps(heading, ensure_ascii=False),
            json.dumps(trail, ensure_ascii=False),
            chunk.table_header,
            chunk.section_id,
            chunk.page_start,
            chunk.page_end,
            doc.embed_hashes[i],
            enrichment,
            len(tokens[i]),
            fieldnorm(len(tokens[i])),
            vector_text(doc.vectors[i]),
        )


def _doc_values(doc: PreparedDocument, doc_pk: int, tokens: int) -> tuple[Any, ...]:
    filename = extension = None
    if doc.source_path:
        filename = Path(doc.source_path).name
        extension = Path(filename).suffix.lower() or None
    return (
        doc_pk,
        doc.doc_id,
        doc.source_path,
        filename,
        extension,
        doc.modified,
        doc.text,
        doc.text_sha256,
        json.dumps(dict(doc.metadata), ensure_ascii=False),
        len(doc.chunks),
        tokens,
        *doc.source_state,
    )
