"""Opening a corpus and repairing what a crash left: the recorded model identity, the vector
file (checked; restored from the backup, then by re-embedding from the catalog) and the lexical
index (its state marker says whether it matches a catalog generation; rebuilt when not)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.errors import ConfigError, IndexCorruptError, disk_full
from guaipeca.lexical import Analyzer, LexicalIndex
from guaipeca.store.embedded.catalog import Catalog
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import (
    FileVectors,
    MemoryVectors,
    VectorSlots,
    damaged_rows,
    read_backup,
    write_backup,
    write_vector_file,
)

log = logging.getLogger("guaipeca")

F32 = npt.NDArray[np.float32]
# Given the catalog and embedding-input hashes, the vectors it can reproduce by embedding the
# chunks again (the Index knows the model and how inputs are built).
Reembed = Callable[[Catalog, Sequence[str]], dict[str, F32]]
BACKUP_NAME = "vectors.backup"


#: (catalog generation, slot -> chunk_pk, high-water mark) as read when the vectors were checked.
OpenedSlots = tuple[int, npt.NDArray[np.int64], int]


class Recovery:
    """The corpus's state, and its opening and recovery steps (the lowest of the layers
    :class:`~guaipeca.store.embedded.corpus.reads.Corpus` is built from)."""

    name: str
    mismatch: str | None
    identity: EmbedderIdentity
    folder: Path | None
    catalog: Catalog
    model: str
    dim: int
    language: str
    analyzer: Analyzer
    lexical: LexicalIndex
    _lock: WriteLock
    _model_reembed: Reembed | None
    _vectors: FileVectors | MemoryVectors

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

    def _open_vectors(self) -> tuple[FileVectors | MemoryVectors, OpenedSlots | None]:
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

    # -- the lexical index's state marker -----------------------------------------------
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

    def _recover_lexical(self, touched: bool) -> None:
        """After a failed write: the catalog rolled back, so the lexical index must too."""
        if not touched:
            self.lexical.rollback()
            self._write_state(self.catalog.generation(), clean=True)
            return
        try:
            self._rebuild_lexical(self.catalog.generation())
        except Exception as exc:  # the marker stays dirty: the next open rebuilds it
            full = disk_full(exc, self.folder or ".")
            if full is None:  # pragma: no cover - not a full disk: keep the details
                log.exception("corpus %s: lexical rebuild after a failed write failed", self.name)
            else:
                log.warning("corpus %s: keyword index rebuilt at next open: %s", self.name, full)


def refuse_lost_catalog(name: str, folder: Path) -> None:
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
