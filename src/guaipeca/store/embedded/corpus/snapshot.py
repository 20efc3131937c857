"""The readers' snapshot (``slot -> chunk``, live slots, sign bits): loaded at open, reloaded
when another process commits, swapped by a writer after each commit."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guaipeca.errors import IndexCorruptError
from guaipeca.store.embedded.binary import Signs, pack_signs
from guaipeca.store.embedded.corpus.recovery import OpenedSlots, Recovery
from guaipeca.store.embedded.vectors import FileVectors

F32 = npt.NDArray[np.float32]


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


class Snapshots(Recovery):
    """The snapshot readers use, and how writers swap it."""

    _snap: _Snapshot
    _snap_lock: threading.Lock

    def _load_snapshot(self, opened: OpenedSlots | None = None) -> _Snapshot:
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
