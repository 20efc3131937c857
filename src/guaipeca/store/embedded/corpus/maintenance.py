"""Whole-corpus rewrites: compaction and switching to re-embedded vectors."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from guaipeca.store.embedded.corpus.writes import Writes
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import FileVectors, MemoryVectors, write_vector_file

F32 = npt.NDArray[np.float32]


class Maintenance(Writes):
    """Compaction, re-embedded vectors swapped in, and the write lock for long work."""

    def write_locked(self) -> WriteLock:
        """The corpus's write lock (re-entrant), for work spanning many steps (reembed)."""
        return self._lock

    def swap_vectors(
        self, work: FileVectors | MemoryVectors, hashes: Sequence[tuple[int, str]]
    ) -> None:
        """Switch to re-embedded vectors in one catalog commit: the vector file, each chunk's
        embedding hash (``(chunk_pk, hash)``) and the identity change together, so a crash
        leaves the old vectors or the new ones, never a mix. Call with the write lock held."""
        path = self._state_path()
        old = self.catalog.generation()
        try:
            state = json.loads(path.read_text()) if path is not None else {}
            clean = state.get("clean") is True and state.get("generation") == old
        except (OSError, ValueError, AttributeError):
            clean = False
        work.flush()
        with self.catalog.write() as txn:
            name = f"vectors.{txn.generation}.f32"
            if self.folder is not None:
                assert isinstance(work, FileVectors)
                final = self.folder / name
                final.unlink(missing_ok=True)
                # A link, not a rename: until the commit, the work file stays resumable.
                os.link(work.path, final)
            txn.execute_many(
                "UPDATE chunks SET embed_sha256 = ? WHERE chunk_pk = ?",
                [(h, pk) for pk, h in hashes],
            )
            txn.set_meta("vectors_file", name)
            txn.set_vector_identity(dataclasses.asdict(self.identity))
            # Chunks still waiting for a vector (progressive indexing) have one now.
            txn.execute_many("DELETE FROM pending_vectors", [()])
            generation = txn.generation
        if clean:
            self._write_state(generation, clean=True)
        retired = self._vectors
        if self.folder is not None:
            self._vectors = FileVectors(self.folder / name, self.identity.dimension)
            assert isinstance(retired, FileVectors)
            retired.close()
            retired.path.unlink(missing_ok=True)
            work.close()
        else:
            self._vectors = work
        self._check_identity(fill=False)
        with self._snap_lock:
            self._snap = self._load_snapshot()
        self.write_backup()

    def vector_rows(self) -> F32:
        """The vector rows by slot (read-only use: the integrity check)."""
        return self._vectors.rows()

    def compact(self) -> None:
        """Renumber slots densely, drop free space, rebuild BM25 statistics, VACUUM."""
        with self._lock:
            self._fresh()
            order = self.catalog.all_slots_in_order()
            rows = self._vectors.rows()
            slots = np.asarray([s for _, s in order], dtype=np.int64)
            packed = (
                np.array(rows[slots], dtype=np.float32)
                if len(slots)
                else np.zeros((0, self.dim), np.float32)
            )
            moves = [(pk, i) for i, (pk, _) in enumerate(order)]
            with self.catalog.write() as txn:
                name = f"vectors.{txn.generation}.f32"
                if self.folder is not None:
                    write_vector_file(self.folder / name, packed)
                txn.reassign_slots(moves, high_water=len(order))
                txn.set_meta("vectors_file", name)
                generation = txn.generation
            old_vectors = self._vectors
            if self.folder is not None:
                self._vectors = FileVectors(self.folder / name, self.dim)
                assert isinstance(old_vectors, FileVectors)
                old_vectors.close()
                if old_vectors.path.name != name:
                    old_vectors.path.unlink(missing_ok=True)
            else:
                fresh = MemoryVectors(self.dim)
                fresh.write(np.arange(len(packed), dtype=np.int64), packed)
                self._vectors = fresh
            self._rebuild_lexical(generation)
            self.catalog.vacuum()
            with self._snap_lock:
                self._snap = self._load_snapshot()
            self.write_backup()
