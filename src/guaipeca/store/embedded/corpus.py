"""One corpus on disk or in memory: its catalog, vector slots and lexical index kept in step.

This is our storage layout and write protocol (hand-written on purpose). A write is:
vectors into slots nobody references → flush; lexical deletes/adds → commit; catalog
commit last. A marker file says whether the lexical index is known to match a catalog
generation; if a crash leaves it dirty or behind, it is rebuilt from the catalog on open
(chunk text lives in the catalog, so no re-conversion or re-embedding is needed).
Readers use an immutable snapshot (``slot -> chunk``) that a writer swaps after commit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.errors import ConfigError, IndexCorruptError
from guaipeca.lexical import Analyzer, LexicalIndex
from guaipeca.store.contract import ChunkRow, DenseScan, PreparedDocument, valid_corpus_name
from guaipeca.store.embedded.binary import (
    BINARY_MIN_CHUNKS,
    Signs,
    candidate_count,
    pack_signs,
    prefilter,
)
from guaipeca.store.embedded.catalog import Catalog, ChunkRecord
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import (
    FileVectors,
    MemoryVectors,
    VectorSlots,
    backup_rows,
    damaged_rows,
    read_backup,
    write_backup,
    write_vector_file,
)
from guaipeca.store.embedded.vectors import scores as vector_scores
from guaipeca.types import ChunkSpan, CorpusStats

__all__ = ["BACKUP_NAME", "Corpus", "count_damaged"]

log = logging.getLogger("guaipeca")

F32 = npt.NDArray[np.float32]
# Given the catalog and embedding-input hashes, the vectors it can reproduce by embedding the
# chunks again (the Index knows the model and how inputs are built).
Reembed = Callable[[Catalog, Sequence[str]], dict[str, F32]]
BACKUP_NAME = "vectors.backup"
_BACKUP_MIN_PENDING = 64


#: (catalog generation, slot -> chunk_pk, high-water mark) as read when the vectors were checked.
_OpenedSlots = tuple[int, npt.NDArray[np.int64], int]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    generation: int
    slot_to_pk: npt.NDArray[np.int64]  # -1 where the slot is free
    # Sign bits of every slot's vector for the binary prefilter (store/embedded/binary.py); built on
    # the first binary scan, then kept up to date by this process's writes.
    signs: Signs | None = None
    # Which slots hold a chunk, and how many: every dense scan needs them, so once per
    # snapshot instead of once per search (~0.5 ms at 100k chunks).
    live: npt.NDArray[np.bool_] = dataclasses.field(init=False, repr=False, compare=False)
    live_count: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        live = self.slot_to_pk >= 0
        object.__setattr__(self, "live", live)
        object.__setattr__(self, "live_count", int(np.count_nonzero(live)))


class Corpus:
    """Storage and retrieval for one named corpus."""

    def __init__(
        self,
        name: str,
        folder: Path | None,
        *,
        language: str | None,
        model: str,
        dim: int,
        reembed: Reembed | None = None,
        identity: EmbedderIdentity | None = None,
    ) -> None:
        self.name = valid_corpus_name(name)
        #: Why the vectors cannot serve the configured model (another identity), or None.
        #: Such a corpus still answers keyword searches and reads; ``guaipeca reembed`` fixes it.
        self.mismatch: str | None = None
        self.identity = identity or EmbedderIdentity("custom", model, dim)
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            _refuse_lost_catalog(self.name, folder)
        self.catalog = Catalog(folder / "catalog.sqlite" if folder else None)
        self._lock = WriteLock(folder / "write.lock" if folder else None)
        self.model = model
        self.dim = dim
        with self._lock:
            self.language = self._check_meta(language, model, dim)
        self._model_reembed = reembed
        self.analyzer = Analyzer(self.language)
        with self._lock:
            self._vectors: FileVectors | MemoryVectors
            self._vectors, opened = self._open_vectors()
            self.lexical = self._open_lexical()
            self._reconcile_lexical()
        self._snap = self._load_snapshot(opened)
        self._snap_lock = threading.Lock()

    # -- opening -----------------------------------------------------------------------
    def _check_meta(self, language: str | None, model: str, dim: int) -> str:
        stored = {k: self.catalog.get_meta(k) for k in ("corpus", "language", "model", "dimension")}
        if stored["model"] is None:
            lang = language or "english"
            self.catalog.set_meta(
                {
                    "corpus": self.name,
                    "language": lang,
                    "vectors_file": "vectors.f32",
                }
            )
            with self.catalog.write(derived=False) as txn:
                txn.set_vector_identity(dataclasses.asdict(self.identity))
            return lang
        self._check_identity()
        lang = stored["language"] or "english"
        if language is not None and language != lang:
            raise ConfigError(
                f"corpus {self.name!r} was indexed in language {lang!r}, not {language!r}; "
                "re-index it with 'guaipeca index --force' to change its language"
            )
        return lang

    @property
    def _reembed(self) -> Reembed | None:
        # Re-embedding damaged rows with the configured model would mix two models' vectors.
        return self._model_reembed if self.mismatch is None else None

    def _check_identity(self, *, fill: bool = True) -> None:
        """Compare the recorded identity with the configured model's: on a mismatch the
        corpus serves keyword search only, with the stored dimension; on a match, fields an
        older Guaipeca did not record are filled in (``fill``: the write lock is held)."""
        recorded = self.catalog.vector_identity() or {}
        ours = dataclasses.asdict(self.identity)
        known = {k: v for k, v in recorded.items() if v is not None}
        self.dim, self.mismatch = self.identity.dimension, None
        if any(ours[k] != v for k, v in known.items()):
            was = EmbedderIdentity.from_record(known)
            self.dim = int(known.get("dimension", self.dim))
            self.mismatch = (
                f"corpus {self.name!r} holds vectors of {was.describe()}, but the configured "
                f"model is {self.identity.describe()}; run 'guaipeca reembed {self.name}' "
                "(keyword search works meanwhile) or set the corpus's embedding back"
            )
        elif fill and known.keys() != ours.keys():
            with self.catalog.write(derived=False) as txn:
                txn.set_vector_identity(ours)

    def _open_vectors(self) -> tuple[FileVectors | MemoryVectors, _OpenedSlots | None]:
        """The vector file, checked; a damaged one is restored (backup, then re-embedding).

        With it, the slot map the check read and the generation it belongs to, for the first
        snapshot (None when it must read its own)."""
        if self.folder is None:
            return MemoryVectors(self.dim), None
        current = self.catalog.get_meta("vectors_file") or "vectors.f32"
        # A compaction that crashed before its catalog commit leaves a file nobody names.
        for stray in self.folder.glob("vectors*.f32*"):
            if stray.name != current:
                stray.unlink(missing_ok=True)
        (self.folder / f"{BACKUP_NAME}.tmp").unlink(missing_ok=True)
        # The slots alone are enough to check the vectors; the hashes (a slow query at 1M
        # chunks) are read only when something needs restoring.
        generation = self.catalog.generation()
        slot_to_pk, high_water = self.catalog.slot_map()
        slots = np.flatnonzero(slot_to_pk >= 0).astype(np.int64)
        path = self.folder / current
        problem = None
        if not path.exists() and len(slots):
            problem = f"vector file {current} is missing"
        else:
            try:
                vectors = FileVectors(path, self.dim, create=True)
            except IndexCorruptError as exc:
                problem = str(exc)
            else:
                # Read block by block: nothing of the file stays resident after the check.
                problem = self._damage(vectors.rows(), slots, high_water, vectors)
                if problem is None:
                    return vectors, (generation, slot_to_pk, high_water)
                vectors.close()
        # Restoring changes the generation: the first snapshot reads afresh.
        return self._restore_vectors(path, self.catalog.live_hashes(), high_water, problem), None

    def _damage(
        self, rows: F32, slots: npt.NDArray[np.int64], high_water: int, source: FileVectors
    ) -> str | None:
        """Why these rows cannot serve the catalog's chunks, or None when they can."""
        if high_water > len(rows):
            return f"vector file holds {len(rows)} rows, the catalog needs {high_water}"
        bad = count_damaged(rows, slots, self.catalog, self._reembed, strict=False, source=source)
        if bad:
            return f"{bad} of {len(slots)} vectors are damaged"
        return None

    def _restore_vectors(
        self, path: Path, live: list[tuple[int, str]], high_water: int, problem: str
    ) -> FileVectors:
        """primary → backup → re-embedding from the catalog; refuses if vectors stay missing."""
        assert self.folder is not None
        log.warning("corpus %s: %s; restoring the vectors", self.name, problem)
        needed = {h for _, h in live}
        found: dict[str, F32] = {}
        try:
            if needed:
                backup = read_backup(self.folder / BACKUP_NAME, self.dim)
                found = {h: backup[h] for h in needed if h in backup}
        except IndexCorruptError as exc:
            log.warning("corpus %s: %s; re-embedding from the catalog instead", self.name, exc)
        bad, _ = damaged_rows(
            np.vstack(list(found.values())) if found else np.zeros((0, self.dim), np.float32),
            np.arange(len(found), dtype=np.int64),
        )
        if len(bad):  # the checksum passed, but never trust a vector blindly
            found = {}
        from_backup = len(found)
        missing = sorted(needed - found.keys())
        if missing and self._reembed is not None:
            found.update(self._reembed(self.catalog, missing))
        lost = needed - found.keys()
        if lost:
            raise IndexCorruptError(
                f"corpus {self.name!r}: {problem}, and {len(lost)} vectors are neither in the "
                "backup nor reproducible from the catalog; re-index it with "
                "'guaipeca index --force'"
            )
        rows = np.zeros((high_water, self.dim), dtype=np.float32)
        for slot, h in live:
            rows[slot] = found[h]
        write_vector_file(path, rows)
        slots = np.asarray([slot for slot, _ in live], dtype=np.int64)
        write_backup(self.folder / BACKUP_NAME, [h for _, h in live], rows, slots)
        self._bump_generation()
        log.warning(
            "corpus %s: vectors restored (%d from the backup, %d embedded again)",
            self.name,
            from_backup,
            len(needed) - from_backup,
        )
        self.catalog.set_meta({"vectors_since_backup": "0"})
        return FileVectors(path, self.dim)

    def _bump_generation(self) -> None:
        """A new generation, so other processes reopen the restored vector file."""
        path = self._state_path()
        old = self.catalog.generation()
        try:
            state = json.loads(path.read_text()) if path is not None else {}
            clean = state.get("clean") is True and state.get("generation") == old
        except (OSError, ValueError, AttributeError):
            clean = False
        with self.catalog.write() as txn:
            generation = txn.generation
        if clean:
            self._write_state(generation, clean=True)

    def _open_lexical(self) -> LexicalIndex:
        folder = self.folder / "lexical" if self.folder else None
        try:
            return LexicalIndex(folder, self.analyzer)
        except IndexCorruptError as exc:
            assert folder is not None
            # Derived data: start it afresh; reconciling rebuilds it from the catalog.
            log.warning("corpus %s: %s; rebuilding the lexical index", self.name, exc)
            shutil.rmtree(folder, ignore_errors=True)
            state = self._state_path()
            if state is not None:
                state.unlink(missing_ok=True)
            return LexicalIndex(folder, self.analyzer)

    # -- the vector backup ---------------------------------------------------------------
    def _maybe_backup(self, pending: int) -> None:
        """Refresh the backup once the vectors written since it reach a quarter of it (so
        copying costs O(1) per vector written). Under the write lock."""
        if self.folder is None:
            return
        held = backup_rows(self.folder / BACKUP_NAME)
        if held is None or pending >= max(_BACKUP_MIN_PENDING, held // 4):
            self.write_backup()

    def write_backup(self) -> None:
        """Copy the live vectors to ``vectors.backup`` now (``compact`` and writes do it)."""
        if self.folder is None:
            return
        with self._lock:
            live = self.catalog.live_hashes()
            slots = np.asarray([s for s, _ in live], dtype=np.int64)
            write_backup(
                self.folder / BACKUP_NAME,
                [h for _, h in live],
                self._vectors.rows(),
                slots,
                release=self._vectors.release,
            )
            self.catalog.set_meta({"vectors_since_backup": "0"})

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

    def _state_path(self) -> Path | None:
        return self.folder / "lexical.state" if self.folder else None

    def _write_state(self, generation: int, clean: bool, same_as: int | None = None) -> None:
        path = self._state_path()
        if path is None:
            return
        tmp = path.with_suffix(".tmp")
        state: dict[str, Any] = {"generation": generation, "clean": clean}
        if same_as is not None:
            state["same_as"] = same_as
        tmp.write_text(json.dumps(state))
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def _reconcile_lexical(self) -> None:
        path = self._state_path()
        if path is None:
            return
        generation = self.catalog.generation()
        try:
            state = json.loads(path.read_text())
            # "same_as": a vector-only commit (the embedding phase) moved the catalog from
            # that generation to "generation" without touching the lexical index.
            ok = state.get("clean") is True and generation in (
                state.get("generation"),
                state.get("same_as"),
            )
            # A lexical folder lost or replaced behind the marker's back holds the wrong count.
            ok = ok and self.lexical.count() == self.catalog.counts()[1]
        except (OSError, ValueError, AttributeError):
            ok = False
        if not ok:
            if path.exists() or self.catalog.counts()[1]:
                log.warning(
                    "corpus %s: lexical index does not match the catalog; rebuilding it", self.name
                )
            self._rebuild_lexical(generation)

    def _rebuild_lexical(self, generation: int) -> None:
        self._write_state(generation, clean=False)
        self.lexical.clear()
        for batch in self.catalog.iter_chunk_texts():
            self.lexical.add(batch)
        self.lexical.commit()
        self._release_lexical()
        self._write_state(generation, clean=True)

    def _release_lexical(self) -> None:
        # tantivy's writer holds a folder lock for as long as it lives: drop it after every
        # write so another process can take its turn under our file lock. Waiting for its
        # merges also makes the segment layout (and so BM25 statistics, which count deleted
        # documents until a merge) depend only on the writes, not on thread timing — in
        # memory as on disk, which keeps their rankings identical.
        self.lexical.release_writer()

    def _load_snapshot(self, opened: _OpenedSlots | None = None) -> _Snapshot:
        if opened is not None and self.catalog.generation() == opened[0]:
            # Nothing committed since the vectors were checked: their slot map is current
            # (saves a second read of every chunk row at open).
            generation, slot_to_pk, high_water = opened
        else:
            generation = self.catalog.generation()
            slot_to_pk, high_water = self.catalog.slot_map()
        if high_water > len(self._vectors.rows()):
            raise IndexCorruptError(
                f"vector file of corpus {self.name!r} is shorter than the catalog needs; "
                "reopen the index to restore it, or re-index with 'guaipeca index --force'"
            )
        return _Snapshot(generation, slot_to_pk)

    def _fresh(self) -> _Snapshot:
        """The current snapshot, reloaded if another process committed since we last looked."""
        snap = self._snap
        if self.folder is None or self.catalog.generation() == snap.generation:
            return snap
        with self._snap_lock:
            if self.catalog.generation() != self._snap.generation:
                self._check_identity(fill=False)  # another process may have re-embedded
                name = self.catalog.get_meta("vectors_file") or "vectors.f32"
                assert isinstance(self._vectors, FileVectors)
                self._vectors = FileVectors(self.folder / name, self.dim)
                self.lexical.reload()
                self._snap = self._load_snapshot()
            return self._snap

    # -- writes ------------------------------------------------------------------------
    def known_vectors(self, hashes: Iterable[str]) -> dict[str, F32]:
        """Vectors already stored for these embedding-input hashes (to skip re-embedding)."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        self._fresh()
        found = self.catalog.slots_for_hashes(wanted)
        if not found:
            return {}
        rows = self._vectors.rows()
        return {h: np.array(rows[s], dtype=np.float32) for h, s in found.items()}

    def stored_signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        """``(text_sha256, metadata, source_path)`` of a stored document, or None."""
        return self.catalog.signature(doc_id)

    def write(self, docs: Sequence[PreparedDocument]) -> None:
        """Insert or replace documents in one atomic write."""
        if not docs:
            return
        with self._lock:
            self._fresh()
            lexical_touched = False
            pending = int(self.catalog.get_meta("vectors_since_backup") or 0)
            try:
                with self.catalog.write() as txn:
                    self._write_state(txn.generation - 1, clean=False)
                    deletes: list[int] = []
                    adds: list[tuple[int, str]] = []
                    vec_slots: list[int] = []
                    vec_rows: list[F32] = []
                    for doc in docs:
                        slots = self._place(txn, doc, deletes, vec_slots, vec_rows)
                        pks = txn.insert_document(
                            doc_id=doc.doc_id,
                            text=doc.text,
                            text_sha256=doc.text_sha256,
                            metadata=doc.metadata,
                            source_path=doc.source_path,
                            modified=doc.modified,
                            chunks=_enriched(
                                [
                                    _record(c, h)
                                    for c, h in zip(doc.chunks, doc.embed_hashes, strict=True)
                                ],
                                doc.enrichments,
                            ),
                            slots=slots,
                            source_state=doc.source_state,
                            pending=doc.pending,
                        )
                        adds.extend(zip(pks, (c.text for c in doc.chunks), strict=True))
                    if vec_slots:
                        self._vectors.write(
                            np.asarray(vec_slots, dtype=np.int64), np.vstack(vec_rows)
                        )
                        self._vectors.flush()
                        reserved = sum(1 for d in docs for x in d.pending if x is not None)
                        pending += len(vec_slots) - reserved
                        txn.set_meta("vectors_since_backup", str(pending))
                    lexical_touched = True
                    if deletes:
                        # Replaced chunks are deleted in a commit of their own: tantivy (0.27)
                        # throws away a merge when a segment it merges lost all its documents
                        # in the same commit (a replaced one-chunk document), so merges never
                        # landed and segments piled up. The state marker stays dirty until
                        # both commits are done, so a crash between them means a rebuild.
                        self.lexical.delete(deletes)
                        self.lexical.commit()
                        self.lexical.release_writer()
                    self.lexical.add(adds)
                    self.lexical.commit()
                    generation = txn.generation
                    freed, added, high_water = (
                        list(txn.freed_slots),
                        list(txn.added),
                        txn.high_water,
                    )
            except BaseException:
                self._recover_lexical(lexical_touched)
                raise
            finally:
                self._release_lexical()
            self._write_state(generation, clean=True)
            self._publish(
                generation,
                freed,
                added,
                high_water,
                signs=self._signs_after(vec_slots, vec_rows, high_water),
            )
            self._maybe_backup(pending)

    def _place(
        self,
        txn: Any,
        doc: PreparedDocument,
        deletes: list[int],
        vec_slots: list[int],
        vec_rows: list[F32],
    ) -> list[int]:
        """Choose a slot per chunk: keep the old slot when the same text was embedded before."""
        keep: dict[int, int] = {}  # chunk index -> reused slot
        old = txn.find_document(doc.doc_id)
        if old is not None:
            reusable = txn.reusable_vectors(old[0])
            for i, h in enumerate(doc.embed_hashes):
                if doc.pending and doc.pending[i] is not None:
                    continue  # a reserved slot of its own, filled by the embedding phase
                slot = reusable.pop(h, None)
                if slot is not None:
                    keep[i] = slot
            deletes.extend(txn.delete_document(old[0], keep_slots=keep.values()))
        fresh = iter(txn.allocate_slots(len(doc.chunks) - len(keep)))
        slots: list[int] = []
        for i in range(len(doc.chunks)):
            if i in keep:
                slots.append(keep[i])
            else:
                slot = next(fresh)
                slots.append(slot)
                vec_slots.append(slot)
                if doc.pending and doc.pending[i] is not None:
                    # A zero row: the file covers the slot; no reader trusts it yet.
                    vec_rows.append(np.zeros((1, self.dim), dtype=np.float32))
                else:
                    vec_rows.append(doc.vectors[i : i + 1])
        return slots

    def _recover_lexical(self, touched: bool) -> None:
        """After a failed write: the catalog rolled back, so the lexical index must too."""
        if not touched:
            self.lexical.rollback()
            self._write_state(self.catalog.generation(), clean=True)
            return
        try:
            self._rebuild_lexical(self.catalog.generation())
        except Exception:  # pragma: no cover - the marker stays dirty; next open rebuilds
            log.exception("corpus %s: lexical rebuild after a failed write failed", self.name)

    def _signs_after(self, slots: list[int], rows: list[F32], high_water: int) -> Signs | None:
        """The snapshot's sign bits with ``slots`` rewritten, as a new array (readers keep
        the old one); None when they were never built (the next binary scan builds them)."""
        old = self._snap.signs
        if old is None:
            return None
        new = np.zeros((max(high_water, len(old)), old.shape[1]), dtype=np.uint8)
        new[: len(old)] = old
        if slots:
            new[np.asarray(slots, dtype=np.int64)] = pack_signs(np.vstack(rows))
        return new

    def _publish(
        self,
        generation: int,
        freed: list[int],
        added: list[tuple[int, int]],
        high_water: int,
        signs: Signs | None = None,
    ) -> None:
        """Swap in the snapshot after a commit. ``signs``: sign bits covering every slot
        rewritten by the commit; without them a write that placed no vectors keeps the old."""
        if signs is None and not added:
            signs = self._snap.signs
        old = self._snap.slot_to_pk
        new = np.full(high_water, -1, dtype=np.int64)
        new[: len(old)] = old
        if freed:
            new[np.asarray(freed, dtype=np.int64)] = -1
        if added:
            arr = np.asarray(added, dtype=np.int64)
            new[arr[:, 0]] = arr[:, 1]
        with self._snap_lock:
            self._snap = _Snapshot(generation, new, signs)

    # -- the embedding phase (progressive indexing) ---------------------------------------
    def pending_count(self) -> int:
        """Chunks searchable by keyword that still wait for their vector."""
        return self.catalog.pending_count()

    def pending_work(self, limit: int) -> list[tuple[int, str, str]]:
        """The oldest pending chunks: ``(chunk_pk, embedding-input hash, input)``."""
        return self.catalog.pending_work(limit)

    def fill_pending(self, vectors: Mapping[int, F32]) -> int:
        """Write the vectors of pending chunks (by chunk_pk) into their reserved slots, in
        one commit; chunks deleted or replaced meanwhile are skipped. Returns how many.

        A reserved slot holds no vector the committed catalog trusts, so writing it before
        the commit is safe; the lexical index does not change, and its marker says so
        before the commit (a crash at any point needs no lexical rebuild)."""
        if not vectors:
            return 0
        with self._lock:
            self._fresh()
            backup_pending = int(self.catalog.get_meta("vectors_since_backup") or 0)
            with self.catalog.write() as txn:
                taken = txn.take_pending(list(vectors))
                slots = [slot for slot, _ in taken.values()]
                rows = [np.asarray(vectors[pk], dtype=np.float32)[None, :] for pk in taken]
                if taken:
                    self._vectors.write(np.asarray(slots, dtype=np.int64), np.vstack(rows))
                    self._vectors.flush()
                    backup_pending += len(taken)
                    txn.set_meta("vectors_since_backup", str(backup_pending))
                generation, added, high_water = txn.generation, list(txn.added), txn.high_water
                if self._lexical_clean_at(generation - 1):
                    self._write_state(generation, clean=True, same_as=generation - 1)
            self._publish(
                generation, [], added, high_water, signs=self._signs_after(slots, rows, high_water)
            )
            if taken:
                self._maybe_backup(backup_pending)
            return len(taken)

    def _lexical_clean_at(self, generation: int) -> bool:
        path = self._state_path()
        if path is None:
            return False
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        return (
            isinstance(state, dict)
            and state.get("clean") is True
            and generation
            in (
                state.get("generation"),
                state.get("same_as"),
            )
        )

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents (their slots become free for the next write). Returns how many."""
        with self._lock:
            self._fresh()
            touched = False
            try:
                with self.catalog.write() as txn:
                    self._write_state(txn.generation - 1, clean=False)
                    removed: list[int] = []
                    count = 0
                    for doc_id in doc_ids:
                        old = txn.find_document(doc_id)
                        if old is not None:
                            removed.extend(txn.delete_document(old[0]))
                            count += 1
                    touched = True
                    self.lexical.delete(removed)
                    self.lexical.commit()
                    generation, freed, hw = txn.generation, list(txn.freed_slots), txn.high_water
            except BaseException:
                self._recover_lexical(touched)
                raise
            finally:
                self._release_lexical()
            self._write_state(generation, clean=True)
            self._publish(generation, freed, [], hw)
            return count

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool:
        """Record a source file's new hash/size/mtime when its content did not change."""
        with self._lock, self.catalog.write(derived=False) as txn:
            return txn.set_source_state(doc_id, state, modified)

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        """Replace a document's metadata (no re-embedding, no lexical change)."""
        with self._lock, self.catalog.write(derived=False) as txn:
            return txn.update_metadata(doc_id, metadata)

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

    # -- reads -------------------------------------------------------------------------
    def dense(
        self,
        query: F32,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        scan: DenseScan = "exact",
    ) -> list[tuple[int, float]]:
        """Cosine top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk.

        ``scan="exact"`` scores every live vector. ``"binary"`` first keeps the slots nearest
        by sign-bit Hamming distance (store/embedded/binary.py) and scores only those exactly: the
        scores are exact, a true top-``n`` item is rarely missed (recall measured in bench/).
        ``"auto"`` is binary from ``BINARY_MIN_CHUNKS`` live chunks. Filtered scans are exact.
        """
        if n <= 0:
            return []
        snap = self._fresh()
        rows = self._vectors.rows()
        high_water = len(snap.slot_to_pk)
        if not where and scan != "exact":
            count = snap.live_count
            if scan == "binary" or count >= BINARY_MIN_CHUNKS:
                if count == 0:
                    return []
                slots = prefilter(self._signs(snap, rows), query, snap.live, candidate_count(n))
                scores = self._vectors.gather(slots) @ query
                return _top(snap.slot_to_pk[slots], np.asarray(scores, dtype=np.float64), n)
        if where:
            pks, slots = self.catalog.filtered_slots(where, corpus=self.name, embedded_only=True)
            if len(pks) == 0:
                return []
            scores = vector_scores(self._vectors, query, high_water, np.asarray(slots))
        else:
            live = snap.live
            if snap.live_count == 0:
                return []
            # Block by block, released as it goes when the file is large (embedded/vectors.py).
            scores = vector_scores(self._vectors, query, high_water)
            pks = snap.slot_to_pk
            scores = np.where(live, scores, -np.inf)
        return _top(pks, np.asarray(scores, dtype=np.float64), n)

    def _signs(self, snap: _Snapshot, rows: F32) -> Signs:
        """The snapshot's sign bits, built now if this snapshot has none yet."""
        high_water = len(snap.slot_to_pk)
        if snap.signs is not None and len(snap.signs) >= high_water:
            return snap.signs
        # Read block by block: the prefilter needs few rows, none should stay resident.
        signs = pack_signs(rows[:high_water], self._vectors.blocks(high_water))
        with self._snap_lock:
            if self._snap is snap:
                self._snap = dataclasses.replace(snap, signs=signs)
        return signs

    def keyword(
        self, query: str, n: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float]]:
        """BM25 top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk."""
        if n <= 0:
            return []
        self._fresh()
        allowed: list[int] | None = None
        if where:
            pks, _ = self.catalog.filtered_slots(where, corpus=self.name)
            if len(pks) == 0:
                return []
            allowed = pks.tolist()
        return self.lexical.search(query, n, allowed=allowed)

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        return self.catalog.chunks(chunk_pks)

    def stats(self) -> CorpusStats:
        docs, chunks, free = self.catalog.counts()
        pending = self.catalog.pending_count()
        # chunks/s of the last embedding round (any process): the estimate of time left.
        rate = float(self.catalog.get_meta("embed_rate") or 0) if pending else 0.0
        return CorpusStats(
            name=self.name,
            language=self.language,
            documents=docs,
            chunks=chunks,
            deleted_slots=free,
            vector_bytes=self._vectors.size_bytes(),
            catalog_bytes=self.catalog.size_bytes(),
            lexical_bytes=self.lexical.size_bytes(),
            pending_chunks=pending,
            pending_seconds=round(pending / rate, 1) if rate > 0 else (None if pending else 0.0),
            model=self.stored_identity().describe(),
            model_mismatch=self.mismatch,
        )

    def stored_identity(self) -> EmbedderIdentity:
        """What the stored vectors are (fields not recorded read '?')."""
        if self.mismatch is None:
            return self.identity
        return EmbedderIdentity.from_record(self.catalog.vector_identity() or {})

    def release_memory(self) -> None:
        """Unmap the vector pages read so far (they stay in the OS page cache)."""
        self._vectors.release()

    def close(self) -> None:
        self.lexical.close()
        self._vectors.close()
        self.catalog.close()


def _record(chunk: ChunkSpan, embed_sha256: str) -> ChunkRecord:
    return ChunkRecord(
        position=chunk.position,
        start=chunk.start,
        end=chunk.end,
        heading_path=chunk.heading_path,
        section_id=chunk.section_id,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        embed_sha256=embed_sha256,
        heading_trail=chunk.heading_trail,
        table_header=chunk.table_header,
    )


def _enriched(
    records: list[ChunkRecord],
    enrichments: Sequence[tuple[str | None, tuple[tuple[str, str], ...]]],
) -> list[ChunkRecord]:
    if not enrichments:
        return records
    return [
        dataclasses.replace(r, enrichment=data, terms=terms)
        for r, (data, terms) in zip(records, enrichments, strict=True)
    ]


def _top(
    ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], n: int
) -> list[tuple[int, float]]:
    finite = np.isfinite(scores)
    count = int(finite.sum())
    if count == 0:
        return []
    n = min(n, count)
    if n < len(scores):
        part = np.argpartition(-scores, n - 1)[:n]
        # Include every item tied with the cut-off so tie-breaking by id is exact.
        cut = scores[part].min()
        part = np.flatnonzero(scores >= cut)
    else:
        part = np.flatnonzero(finite)
    order = sorted(part.tolist(), key=lambda i: (-float(scores[i]), int(ids[i])))[:n]
    return [(int(ids[i]), float(scores[i])) for i in order]


def _refuse_lost_catalog(name: str, folder: Path) -> None:
    """SQLite takes an empty file for a new database: a catalog truncated to nothing (or
    deleted) next to an existing index would silently open as an empty corpus."""
    catalog = folder / "catalog.sqlite"
    empty = not catalog.exists() or catalog.stat().st_size == 0
    if empty and ((folder / "lexical.state").exists() or (folder / BACKUP_NAME).exists()):
        raise IndexCorruptError(
            f"catalog of corpus {name!r} is missing or empty, but its folder holds an index; "
            "the catalog is the source of truth: re-index the corpus with "
            "'guaipeca index --force' (source files are read again)"
        )


def count_damaged(
    rows: F32,
    slots: npt.NDArray[np.int64],
    catalog: Catalog,
    reembed: Reembed | None,
    *,
    strict: bool,
    source: VectorSlots | None = None,
) -> int:
    """How many of the vectors at ``slots`` are damaged (not unit vectors).

    A zero row is damage unless the model really gives zero for that chunk, which only
    re-embedding it can tell. When it cannot be told (no model, or the chunk's input does not
    rebuild to its stored hash), ``strict`` counts the row as damage (``guaipeca check``) and
    lenient mode trusts it (opening an index, which must not refuse what it cannot judge).
    """
    bad, zero = damaged_rows(rows, slots, source=source)
    if not len(zero):
        return len(bad)
    if reembed is None:
        return len(bad) + (len(zero) if strict else 0)
    by_slot = catalog.hashes_at(zero)
    hashes = [by_slot[int(s)] for s in zero]
    fresh = reembed(catalog, hashes)
    judged = sum(1 for h in hashes if h in fresh and np.any(fresh[h]))
    unknown = sum(1 for h in hashes if h not in fresh)
    return len(bad) + judged + (unknown if strict else 0)
