"""The SQLite catalog of one corpus: the source of truth.

Documents with their canonical text, chunks (offsets, heading path, section, pages,
vector slot, hash of what was embedded), metadata, the free-slot list and the generation
counter. The vector file and the lexical index are derived from it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.errors import IndexCorruptError
from guaipeca.store.contract import ChunkRow, DocRow
from guaipeca.store.embedded.migrations import migrate
from guaipeca.store.filters import compile_where

__all__ = ["Catalog", "ChunkRecord", "WriteTxn"]


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk to insert (its vector slot is chosen by the transaction)."""

    position: int
    start: int
    end: int
    heading_path: tuple[str, ...]
    section_id: str
    page_start: int | None
    page_end: int | None
    embed_sha256: str
    # Enrichment JSON (SPEC §8) and its (kind, term) pairs for find_related.
    enrichment: str | None = None
    terms: tuple[tuple[str, str], ...] = ()
    heading_trail: tuple[str, ...] = ()
    table_header: str | None = None


_CHUNK_SELECT = """
    SELECT c.chunk_pk, d.doc_id, c.position, c.start, c."end", c.heading_path, c.section_id,
           c.page_start, c.page_end, c.slot, substr(d.text, c.start + 1, c."end" - c.start),
           d.source_path, d.metadata,
           c.chunk_pk NOT IN (SELECT chunk_pk FROM pending_vectors),
           c.heading_trail, c.table_header
    FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk
"""
# Chunks whose vector is written (not waiting in pending_vectors).
_EMBEDDED = "chunk_pk NOT IN (SELECT chunk_pk FROM pending_vectors)"


def _chunk_row(r: Sequence[Any]) -> ChunkRow:
    if len(r[10]) != r[4] - r[3]:  # the document's text no longer covers the chunk's span
        raise IndexCorruptError(
            f"catalog is damaged: chunk {r[0]} of document {r[1]!r:.80} lies outside its "
            "text; re-index the corpus with 'guaipeca index --force'"
        )
    return ChunkRow(
        chunk_pk=r[0],
        doc_id=r[1],
        position=r[2],
        start=r[3],
        end=r[4],
        heading_path=tuple(json.loads(r[5])),
        section_id=r[6],
        page_start=r[7],
        page_end=r[8],
        slot=r[9],
        text=r[10],
        source_path=r[11],
        metadata=json.loads(r[12]),
        embedded=bool(r[13]),
        heading_trail=tuple(json.loads(r[14])) if r[14] is not None else tuple(json.loads(r[5])),
        table_header=r[15],
    )


def _connect(target: str) -> sqlite3.Connection:
    db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30.0)
    db.execute("PRAGMA foreign_keys = ON")
    return db


#: Columns of the vector_identity table, as the fields of embed/identity.py's EmbedderIdentity.
_IDENTITY = ("provider", "model", "dimension", "query_prefix", "passage_prefix", "weights_sha256")


class Catalog:
    """One corpus's catalog. ``path=None`` keeps it in memory (same schema, same SQL)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._local = threading.local()
        try:
            self._db = _connect(str(path) if path else ":memory:")
            if path is not None:
                self._db.execute("PRAGMA journal_mode = WAL")
                # FULL: a commit survives power loss, not just a process crash.
                self._db.execute("PRAGMA synchronous = FULL")
            migrate(self._db)
        except sqlite3.DatabaseError as exc:
            raise _damaged(path, exc) from None

    # -- connections -------------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads. On disk each thread gets its own (WAL readers never block)."""
        if self.path is None:
            with self._lock:
                yield self._db
            return
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        try:
            if db is None:
                db = _connect(str(self.path))
                db.execute("PRAGMA query_only = ON")
                self._local.db = db
            yield db
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._reading() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, values: Mapping[str, str]) -> None:
        with self.write(derived=False) as txn:
            for k, v in values.items():
                txn.set_meta(k, v)

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    def vector_identity(self) -> dict[str, Any] | None:
        """The recorded identity of the vectors (None: nothing recorded yet); fields that
        were not recorded (corpora older than identities) are None."""
        with self._reading() as db:
            row = db.execute(f"SELECT {', '.join(_IDENTITY)} FROM vector_identity").fetchone()
        return None if row is None else dict(zip(_IDENTITY, row, strict=True))

    # -- writes ------------------------------------------------------------------------
    @contextmanager
    def write(self, *, derived: bool = True) -> Iterator[WriteTxn]:
        """One write transaction: BEGIN IMMEDIATE … COMMIT, rolled back on any exception.

        ``derived=False`` marks a write that changes nothing the vectors or the lexical
        index derive from (metadata, file state): it keeps the generation, so derived
        indexes stay in step without any work.
        """
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise _damaged(self.path, exc) from None
            try:
                txn = WriteTxn(self._db, bump=derived)
                yield txn
                txn.finish()
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise _damaged(self.path, exc) from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # -- reads -------------------------------------------------------------------------
    def slot_map(self) -> tuple[npt.NDArray[np.int64], int]:
        """``slot -> chunk_pk`` (-1 where free), and the high-water mark of used slots."""
        with self._reading() as db:
            # Pending chunks hold a reserved slot with no vector yet: not live for readers.
            rows = db.execute(f"SELECT slot, chunk_pk FROM chunks WHERE {_EMBEDDED}").fetchall()
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
                for r in db.execute(f"{_CHUNK_SELECT} WHERE c.chunk_pk IN ({marks})", part):
                    row = _chunk_row(r)
                    out[row.chunk_pk] = row
        return out

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]:
        """Chunks of one document with ``first <= position <= last``, in order."""
        hi = last if last is not None else 2**62
        with self._reading() as db:
            rows = db.execute(
                f"{_CHUNK_SELECT} WHERE d.doc_id = ? AND c.position BETWEEN ? AND ? "
                "ORDER BY c.position",
                (doc_id, first, hi),
            ).fetchall()
        return [_chunk_row(r) for r in rows]

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
                    f"AND {_EMBEDDED} GROUP BY embed_sha256",
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
            sql_where = f"({sql_where}) AND c.{_EMBEDDED}"
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

    def read_sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query (for the integrity check)."""
        with self._reading() as db:
            return [tuple(r) for r in db.execute(sql, list(params))]

    def live_hashes(self) -> list[tuple[int, str]]:
        """``(slot, embedding-input hash)`` of every chunk with a vector, by slot (for the
        vector backup)."""
        sql = f"SELECT slot, embed_sha256 FROM chunks WHERE {_EMBEDDED} ORDER BY slot"
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

    def size_bytes(self) -> int:
        if self.path is None:
            return 0
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def vacuum(self) -> None:
        with self._lock:
            self._db.execute("VACUUM")
            if self.path is not None:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _damaged(path: Path | None, exc: sqlite3.DatabaseError) -> Exception:
    """A damaged database file is a clear error; a busy or locked one stays what it is."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError) and not any(
        word in text
        for word in ("malformed", "not a database", "disk i/o", "corrupt", "could not decode")
    ):
        return exc
    return IndexCorruptError(
        f"catalog {path.name if path else '(memory)'} is damaged ({exc}); the catalog is the "
        "index's source of truth: re-index the corpus with 'guaipeca index --force' "
        "(source files are read again)"
    )


class WriteTxn:
    """Operations inside one catalog write transaction."""

    def __init__(self, db: sqlite3.Connection, *, bump: bool = True) -> None:
        self._db = db
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        self.generation = (int(row[0]) if row else 0) + int(bump)
        row = db.execute("SELECT value FROM meta WHERE key = 'high_water'").fetchone()
        self.high_water = int(row[0]) if row else 0
        self.freed_slots: list[int] = []
        self.added: list[tuple[int, int]] = []  # (slot, chunk_pk)

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def set_vector_identity(self, identity: Mapping[str, Any]) -> None:
        """Record what the vectors are now (and the model/dimension meta read by older code)."""
        values = [identity[k] for k in _IDENTITY]
        self._db.execute(
            f"INSERT OR REPLACE INTO vector_identity (id, {', '.join(_IDENTITY)}) "
            f"VALUES (1, {', '.join('?' * len(_IDENTITY))})",
            values,
        )
        self.set_meta("model", str(identity["model"]))
        self.set_meta("dimension", str(identity["dimension"]))

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def find_document(self, doc_id: str) -> tuple[int, str] | None:
        """``(doc_pk, text_sha256)`` of a stored document."""
        r = self._db.execute(
            "SELECT doc_pk, text_sha256 FROM documents WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        return None if r is None else (int(r[0]), str(r[1]))

    def document_metadata(self, doc_id: str) -> dict[str, Any] | None:
        r = self._db.execute(
            "SELECT metadata FROM documents WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        return None if r is None else dict(json.loads(r[0]))

    def reusable_vectors(self, doc_pk: int) -> dict[str, int]:
        """``embed_sha256 -> slot`` of a document about to be replaced (to skip re-embedding)."""
        return {
            str(h): int(s)
            for h, s in self._db.execute(
                f"SELECT embed_sha256, slot FROM chunks WHERE doc_pk = ? AND {_EMBEDDED}",
                (doc_pk,),
            )
        }

    def delete_document(self, doc_pk: int, *, keep_slots: Iterable[int] = ()) -> list[int]:
        """Delete a document's rows; returns the removed chunk_pks. Slots not kept are freed."""
        kept = set(keep_slots)
        rows = self._db.execute(
            "SELECT chunk_pk, slot FROM chunks WHERE doc_pk = ?", (doc_pk,)
        ).fetchall()
        self._db.execute("DELETE FROM chunks WHERE doc_pk = ?", (doc_pk,))
        self._db.execute("DELETE FROM documents WHERE doc_pk = ?", (doc_pk,))
        freed = [(int(s), self.generation) for _, s in rows if int(s) not in kept]
        self._db.executemany("INSERT INTO free_slots(slot, freed_generation) VALUES (?, ?)", freed)
        self.freed_slots.extend(s for s, _ in freed)
        return [int(pk) for pk, _ in rows]

    def allocate_slots(self, n: int) -> list[int]:
        """Slots for new vectors: ones freed by earlier generations first, then new ones."""
        if n <= 0:
            return []
        rows = self._db.execute(
            "SELECT slot FROM free_slots WHERE freed_generation < ? ORDER BY slot LIMIT ?",
            (self.generation, n),
        ).fetchall()
        slots = [int(r[0]) for r in rows]
        if slots:
            self._db.executemany("DELETE FROM free_slots WHERE slot = ?", [(s,) for s in slots])
        while len(slots) < n:
            slots.append(self.high_water)
            self.high_water += 1
        return slots

    def insert_document(
        self,
        *,
        doc_id: str,
        text: str,
        text_sha256: str,
        metadata: Mapping[str, Any],
        source_path: str | None,
        modified: float | None,
        chunks: Sequence[ChunkRecord],
        slots: Sequence[int],
        source_state: tuple[str | None, int | None, int | None] = (None, None, None),
        pending: Sequence[str | None] = (),
    ) -> list[int]:
        """Insert a document and its chunks; returns the new chunk_pks in position order.

        ``pending``: per chunk, the input still to embed (its slot holds no vector yet), or
        None for a chunk whose vector is written in this transaction; empty: none pending.
        """
        filename = extension = None
        if source_path:
            name = Path(source_path).name
            filename = name
            extension = Path(name).suffix.lower() or None
        cur = self._db.execute(
            "INSERT INTO documents(doc_id, source_path, filename, extension, modified, text, "
            "text_sha256, metadata, chunk_count, created, source_sha256, source_size, "
            "source_mtime_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc_id,
                source_path,
                filename,
                extension,
                modified,
                text,
                text_sha256,
                json.dumps(dict(metadata), ensure_ascii=False, sort_keys=True),
                len(chunks),
                time.time(),
                *source_state,
            ),
        )
        doc_pk = int(cur.lastrowid or 0)
        pks: list[int] = []
        for rec, slot in zip(chunks, slots, strict=True):
            cur = self._db.execute(
                'INSERT INTO chunks(doc_pk, position, start, "end", heading_path, section_id, '
                "page_start, page_end, slot, embed_sha256, enrichment, heading_trail, "
                "table_header) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    doc_pk,
                    rec.position,
                    rec.start,
                    rec.end,
                    json.dumps(list(rec.heading_path), ensure_ascii=False),
                    rec.section_id,
                    rec.page_start,
                    rec.page_end,
                    slot,
                    rec.embed_sha256,
                    rec.enrichment,
                    json.dumps(list(rec.heading_trail or rec.heading_path), ensure_ascii=False),
                    rec.table_header,
                ),
            )
            pk = int(cur.lastrowid or 0)
            if rec.terms:
                self._db.executemany(
                    "INSERT OR IGNORE INTO chunk_terms(term, kind, chunk_pk) VALUES (?,?,?)",
                    [(term, kind, pk) for kind, term in rec.terms],
                )
            pks.append(pk)
            todo = pending[len(pks) - 1] if pending else None
            if todo is None:
                self.added.append((slot, pk))
            else:
                self._db.execute(
                    "INSERT INTO pending_vectors(chunk_pk, input) VALUES (?, ?)", (pk, todo)
                )
        return pks

    def take_pending(self, chunk_pks: Sequence[int]) -> dict[int, tuple[int, str]]:
        """``chunk_pk -> (slot, hash)`` of the given chunks that are still pending, which
        stop being pending when this transaction commits (their vectors are written in it).
        Chunks deleted or replaced since they were read are left out."""
        out: dict[int, tuple[int, str]] = {}
        for i in range(0, len(chunk_pks), 500):
            part = list(chunk_pks[i : i + 500])
            marks = ",".join("?" * len(part))
            for pk, slot, h in self._db.execute(
                "SELECT c.chunk_pk, c.slot, c.embed_sha256 FROM pending_vectors p "
                f"JOIN chunks c ON c.chunk_pk = p.chunk_pk WHERE p.chunk_pk IN ({marks})",
                part,
            ):
                out[int(pk)] = (int(slot), str(h))
        self._db.executemany(
            "DELETE FROM pending_vectors WHERE chunk_pk = ?", [(pk,) for pk in out]
        )
        self.added.extend((slot, pk) for pk, (slot, _) in out.items())
        return out

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool:
        cur = self._db.execute(
            "UPDATE documents SET source_sha256 = ?, source_size = ?, source_mtime_ns = ?, "
            "modified = ? WHERE doc_id = ?",
            (*state, modified, doc_id),
        )
        return cur.rowcount > 0

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        cur = self._db.execute(
            "UPDATE documents SET metadata = ? WHERE doc_id = ?",
            (json.dumps(dict(metadata), ensure_ascii=False, sort_keys=True), doc_id),
        )
        return cur.rowcount > 0

    def reassign_slots(self, moves: Sequence[tuple[int, int]], high_water: int) -> None:
        """Compaction: ``(chunk_pk, new_slot)`` for every chunk; the free list empties."""
        # Two passes so the UNIQUE(slot) constraint never sees a transient clash.
        self._db.executemany(
            "UPDATE chunks SET slot = -1 - slot WHERE chunk_pk = ?", [(pk,) for pk, _ in moves]
        )
        self._db.executemany(
            "UPDATE chunks SET slot = ? WHERE chunk_pk = ?", [(s, pk) for pk, s in moves]
        )
        self._db.execute("DELETE FROM free_slots")
        self.high_water = high_water

    def finish(self) -> None:
        self.set_meta("generation", str(self.generation))
        self.set_meta("high_water", str(self.high_water))
