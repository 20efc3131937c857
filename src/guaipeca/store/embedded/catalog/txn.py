"""The catalog's write transaction and the chunk records it inserts."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from guaipeca.store.contract import ChunkEnrichment
from guaipeca.store.embedded.catalog.sql import EMBEDDED, IDENTITY
from guaipeca.types import ChunkLocation

__all__ = ["WriteTxn"]


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
        values = [identity[k] for k in IDENTITY]
        self._db.execute(
            f"INSERT OR REPLACE INTO vector_identity (id, {', '.join(IDENTITY)}) "
            f"VALUES (1, {', '.join('?' * len(IDENTITY))})",
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
                f"SELECT embed_sha256, slot FROM chunks WHERE doc_pk = ? AND {EMBEDDED}",
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
        chunks: Sequence[ChunkLocation],
        embed_hashes: Sequence[str],
        slots: Sequence[int],
        enrichments: Sequence[ChunkEnrichment] = (),
        source_state: tuple[str | None, int | None, int | None] = (None, None, None),
        pending: Sequence[str | None] = (),
    ) -> list[int]:
        """Insert a document and its chunks; returns the new chunk_pks in position order.

        Per chunk: ``embed_hashes`` (what was embedded), ``slots`` (its vector's row) and
        ``enrichments`` (JSON and (kind, term) pairs; empty: none). ``pending``: per chunk,
        the input still to embed (its slot holds no vector yet), or None for a chunk whose
        vector is written in this transaction; empty: none pending.
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
        extras = enrichments or [(None, ())] * len(chunks)
        for chunk, sha, slot, (enrichment, terms) in zip(
            chunks, embed_hashes, slots, extras, strict=True
        ):
            pk = self._insert_chunk(doc_pk, chunk, slot, sha, enrichment)
            if terms:
                self._db.executemany(
                    "INSERT OR IGNORE INTO chunk_terms(term, kind, chunk_pk) VALUES (?,?,?)",
                    [(term, kind, pk) for kind, term in terms],
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

    def _insert_chunk(
        self, doc_pk: int, chunk: ChunkLocation, slot: int, sha: str, enrichment: str | None
    ) -> int:
        cur = self._db.execute(
            'INSERT INTO chunks(doc_pk, position, start, "end", heading_path, section_id, '
            "page_start, page_end, slot, embed_sha256, enrichment, heading_trail, "
            "table_header) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc_pk,
                chunk.position,
                chunk.start,
                chunk.end,
                json.dumps(list(chunk.heading_path), ensure_ascii=False),
                chunk.section_id,
                chunk.page_start,
                chunk.page_end,
                slot,
                sha,
                enrichment,
                json.dumps(list(chunk.heading_trail or chunk.heading_path), ensure_ascii=False),
                chunk.table_header,
            ),
        )
        return int(cur.lastrowid or 0)

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
