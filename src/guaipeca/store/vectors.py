"""Dense vectors in slots: a memory-mapped file on disk, or a numpy array in memory.

Hand-written because the layout is ours: a fixed 64-byte header then ``capacity`` rows of
float32. Rows are addressed by slot; which slots are live is the catalog's business. The
file only grows while open (an mmap of the old size stays valid for readers that still hold
it); ``compact`` writes a new file and the catalog switches to it in its commit.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..errors import IndexCorruptError

__all__ = ["FileVectors", "MemoryVectors", "VectorSlots", "write_vector_file"]

_MAGIC = b"GUAIPVEC"
_HEADER = struct.Struct("<8sII48x")  # magic, format version, dimension; padded to 64 bytes
_FORMAT = 1
_MIN_ROWS = 1024

F32 = npt.NDArray[np.float32]


class VectorSlots(Protocol):
    dim: int

    def rows(self) -> F32: ...
    def write(self, slots: npt.NDArray[np.int64], vectors: F32) -> None: ...
    def flush(self) -> None: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


def _grown(capacity: int, needed: int) -> int:
    new = max(capacity, _MIN_ROWS)
    while new < needed:
        new *= 2
    return new


class MemoryVectors:
    """The in-memory twin of :class:`FileVectors`: same growth rule, same arithmetic."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._data: F32 = np.zeros((0, dim), dtype=np.float32)
        self._lock = threading.Lock()

    def rows(self) -> F32:
        return self._data

    def write(self, slots: npt.NDArray[np.int64], vectors: F32) -> None:
        if len(slots) == 0:
            return
        with self._lock:
            needed = int(slots.max()) + 1
            if needed > len(self._data):
                # Readers keep the old array; new rows only become visible through the catalog.
                new = np.zeros((_grown(len(self._data), needed), self.dim), dtype=np.float32)
                new[: len(self._data)] = self._data
                self._data = new
            self._data[slots] = vectors

    def flush(self) -> None:
        return None

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        return None


class FileVectors:
    """Vectors in ``path``, memory-mapped so cold pages can be evicted by the OS."""

    def __init__(self, path: Path, dim: int, *, create: bool = False) -> None:
        self.path = path
        self.dim = dim
        self._lock = threading.Lock()
        if create and not path.exists():
            write_vector_file(path, np.zeros((0, dim), dtype=np.float32))
        self._map = self._open()

    def _open(self) -> F32:
        try:
            size = self.path.stat().st_size
            with self.path.open("rb") as fh:
                head = fh.read(_HEADER.size)
        except FileNotFoundError:
            raise IndexCorruptError(
                f"vector file {self.path.name} is missing; run 'guaipeca index --force' to rebuild"
            ) from None
        if len(head) < _HEADER.size:
            raise IndexCorruptError(f"vector file {self.path.name} is truncated")
        magic, version, dim = _HEADER.unpack(head)
        if magic != _MAGIC or version != _FORMAT:
            raise IndexCorruptError(f"vector file {self.path.name} has an unknown header")
        if dim != self.dim:
            raise IndexCorruptError(
                f"vector file {self.path.name} holds dimension {dim}, catalog says {self.dim}"
            )
        body = size - _HEADER.size
        row_bytes = 4 * dim
        if body % row_bytes:
            raise IndexCorruptError(f"vector file {self.path.name} ends mid-row (truncated?)")
        rows = body // row_bytes
        if rows == 0:
            return np.zeros((0, dim), dtype=np.float32)
        return np.memmap(
            self.path, dtype=np.float32, mode="r+", offset=_HEADER.size, shape=(rows, dim)
        )

    def rows(self) -> F32:
        return self._map

    def capacity(self) -> int:
        return len(self._map)

    def write(self, slots: npt.NDArray[np.int64], vectors: F32) -> None:
        if len(slots) == 0:
            return
        with self._lock:
            needed = int(slots.max()) + 1
            if needed > len(self._map):
                rows = _grown(len(self._map), needed)
                with self.path.open("r+b") as fh:
                    fh.truncate(_HEADER.size + rows * 4 * self.dim)
                self._map = self._open()
            self._map[slots] = vectors

    def flush(self) -> None:
        """Make written rows durable before the catalog commit that points at them."""
        with self._lock:
            if isinstance(self._map, np.memmap):
                self._map.flush()
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        with self._lock:
            self._map = np.zeros((0, self.dim), dtype=np.float32)


def write_vector_file(path: Path, vectors: F32) -> None:
    """Write a complete vector file atomically: temp file, fsync, rename, fsync the folder."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    dim = vectors.shape[1]
    rows = len(vectors)
    capacity = _grown(0, rows) if rows else 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(_HEADER.pack(_MAGIC, _FORMAT, dim))
        fh.write(vectors.tobytes())
        fh.truncate(_HEADER.size + capacity * 4 * dim)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
