"""Dense vectors in slots: a memory-mapped file on disk, or a numpy array in memory.

Hand-written because the layout is ours: a fixed 64-byte header then ``capacity`` rows of
float32. Rows are addressed by slot; which slots are live is the catalog's business. The
file only grows while open (an mmap of the old size stays valid for readers that still hold
it); ``compact`` writes a new file and the catalog switches to it in its commit.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
import numpy.typing as npt

from guaipeca.errors import IndexCorruptError

__all__ = [
    "FileVectors",
    "MemoryVectors",
    "VectorSlots",
    "backup_rows",
    "damaged_rows",
    "read_backup",
    "scores",
    "write_backup",
    "write_vector_file",
]

_MAGIC = b"GUAIPVEC"
_HEADER = struct.Struct("<8sII48x")  # magic, format version, dimension; padded to 64 bytes
_FORMAT = 1
_MIN_ROWS = 1024

F32 = npt.NDArray[np.float32]
#: Drops the pages of rows ``[start, stop)`` from this process's mapping (see release()).
Release = Callable[[int, int], None]

#: Rows per block in passes over many rows (24 MB of 384-d float32).
PASS_ROWS = 16_384
#: A vector file larger than this is read with pread (blocks() for whole passes, gather()
#: for scattered rows) instead of through the mapping, so resident memory holds what a
#: search needs instead of the whole file (1.5 GB at 1M chunks); smaller files are read
#: through the mapping, whose pages are cheap to keep and fastest to read.
KEEP_MAPPED_BYTES = 256 * 1024 * 1024


class VectorSlots(Protocol):
    dim: int
    #: Above this many bytes, whole passes and scattered reads avoid the mapping.
    keep_mapped_bytes: int

    def rows(self) -> F32: ...
    def write(self, slots: npt.NDArray[np.int64], vectors: F32) -> None: ...
    def flush(self) -> None: ...
    def release(self, start: int = 0, stop: int | None = None) -> None: ...
    def gather(self, slots: npt.NDArray[np.int64]) -> F32: ...
    def blocks(self, stop: int) -> Iterator[tuple[int, F32]]: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


def scores(
    vectors: VectorSlots, query: F32, stop: int, slots: npt.NDArray[np.int64] | None = None
) -> F32:
    """``rows[:stop] @ query``, or ``rows[slots] @ query``, without the rows staying resident.

    A scan of more than ``KEEP_MAPPED_BYTES`` reads the file block by block into one buffer
    (:meth:`FileVectors.blocks`) instead of mapping it, so an exact scan at 1M chunks holds
    24 MB, not the 1.5 GB file; smaller files are scanned through the mapping, whose pages
    are cheap to keep. Gathered rows (``slots``) go through :meth:`FileVectors.gather`.
    """
    if slots is not None:
        out = np.empty(len(slots), dtype=np.float32)
        for start in range(0, len(slots), PASS_ROWS):
            out[start : start + PASS_ROWS] = (
                vectors.gather(slots[start : start + PASS_ROWS]) @ query
            )
        return out
    if stop * 4 * vectors.dim <= vectors.keep_mapped_bytes:
        result: F32 = vectors.rows()[:stop] @ query
        return result
    out = np.empty(stop, dtype=np.float32)
    for start, block in vectors.blocks(stop):
        # einsum, not BLAS: one call per block, and BLAS's threads cost more to wake than a
        # 16k-row product takes (measured 2-4x slower on a loaded 2-core machine).
        out[start : start + len(block)] = np.einsum("ij,j->i", block, query)
    return out


def _grown(capacity: int, needed: int) -> int:
    new = max(capacity, _MIN_ROWS)
    while new < needed:
        new *= 2
    return new


class MemoryVectors:
    """The in-memory twin of :class:`FileVectors`: same growth rule, same arithmetic."""

    def __init__(self, dim: int, *, keep_mapped_bytes: int = KEEP_MAPPED_BYTES) -> None:
        self.dim = dim
        # Nothing is mapped; the same threshold picks the same arithmetic in scores().
        self.keep_mapped_bytes = keep_mapped_bytes
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

    def release(self, start: int = 0, stop: int | None = None) -> None:
        return None  # nothing mapped: the rows are the process's own memory

    def gather(self, slots: npt.NDArray[np.int64]) -> F32:
        return self._data[slots]

    def blocks(self, stop: int) -> Iterator[tuple[int, F32]]:
        for start in range(0, stop, PASS_ROWS):
            yield start, self._data[start : min(start + PASS_ROWS, stop)]

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        return None


class FileVectors:
    """Vectors in ``path``, memory-mapped so cold pages can be evicted by the OS."""

    def __init__(
        self,
        path: Path,
        dim: int,
        *,
        create: bool = False,
        keep_mapped_bytes: int = KEEP_MAPPED_BYTES,
    ) -> None:
        self.path = path
        self.dim = dim
        self.keep_mapped_bytes = keep_mapped_bytes
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

    def release(self, start: int = 0, stop: int | None = None) -> None:
        """Drop this process's mapping of the pages of rows ``[start, stop)`` (default: all);
        they stay in the OS page cache, so the next read is a minor fault, not disk I/O.

        Called after passes over many rows (the damage check at open, packing the sign bits,
        exact scans of a large file), which would otherwise leave every row counted in the
        process's resident memory (146 MB at 100k chunks, 1.5 GB at 1M) although a
        binary-prefiltered search touches only a few thousand rows.
        """
        with self._lock:
            raw = getattr(self._map, "_mmap", None)  # numpy.memmap keeps its mmap.mmap here
            if raw is None or not hasattr(mmap, "MADV_DONTNEED"):
                return
            # A shared file mapping: written rows are already in the page cache, so dropping
            # the mapping loses nothing. The mmap starts at the header's page; the range is
            # widened to whole pages (a neighbour row's page is dropped too: harmless).
            length = len(raw)
            row_bytes = 4 * self.dim
            base = _HEADER.size % mmap.ALLOCATIONGRANULARITY
            begin = 0 if start <= 0 else base + start * row_bytes
            end = length if stop is None else min(length, base + stop * row_bytes)
            begin -= begin % mmap.PAGESIZE
            end += -end % mmap.PAGESIZE
            if end > begin:
                raw.madvise(mmap.MADV_DONTNEED, begin, min(end, length) - begin)

    def gather(self, slots: npt.NDArray[np.int64]) -> F32:
        """``rows[slots]`` (a copy). From a file over ``KEEP_MAPPED_BYTES`` each row is read
        with its own ``pread`` instead of through the mapping: on Linux with large page-cache
        folios (ext4, kernel 6.x) one row read through a mapping maps its whole folio, so
        the 2,000 rows a binary-prefiltered search rescores mapped 508 MB of a 614 MB file
        (measured, 400k rows), and a search at 1M chunks would map nearly all 1.5 GB.
        """
        if self._map.nbytes <= self.keep_mapped_bytes:
            small: F32 = self._map[slots]
            return small
        row_bytes = 4 * self.dim
        out = np.empty((len(slots), self.dim), dtype=np.float32)
        view = out.data.cast("B")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for j, slot in enumerate(slots.tolist()):
                part = view[j * row_bytes : (j + 1) * row_bytes]
                if os.preadv(fd, [part], _HEADER.size + slot * row_bytes) != row_bytes:
                    raise IndexCorruptError(f"vector file {self.path.name} is truncated")
        finally:
            os.close(fd)
        return out

    def blocks(self, stop: int) -> Iterator[tuple[int, F32]]:
        """``(start, rows[start:start + n])`` for rows ``[0, stop)``, read from the file into
        one reused buffer: nothing of the file becomes resident in this process (the OS page
        cache serves the reads). Each block is valid until the next is yielded."""
        row_bytes = 4 * self.dim
        buffer = np.empty((min(PASS_ROWS, max(stop, 1)), self.dim), dtype=np.float32)
        with self.path.open("rb", buffering=0) as fh:
            for start in range(0, stop, PASS_ROWS):
                n = min(PASS_ROWS, stop - start)
                view = buffer[:n].data.cast("B")
                got = os.preadv(fh.fileno(), [view], _HEADER.size + start * row_bytes)
                if got != n * row_bytes:
                    raise IndexCorruptError(f"vector file {self.path.name} is truncated")
                yield start, buffer[:n]

    def write(self, slots: npt.NDArray[np.int64], vectors: F32) -> None:
        if len(slots) == 0:
            return
        with self._lock:
            needed = int(slots.max()) + 1
            if needed > len(self._map):
                rows = _grown(len(self._map), needed)
                with self.path.open("r+b") as fh:
                    old = os.fstat(fh.fileno()).st_size
                    fh.truncate(_HEADER.size + rows * 4 * self.dim)
                    try:
                        _allocate(fh.fileno(), old, _HEADER.size + rows * 4 * self.dim)
                    except OSError:
                        fh.truncate(old)
                        raise
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
    try:
        with tmp.open("wb") as fh:
            fh.write(_HEADER.pack(_MAGIC, _FORMAT, dim))
            fh.write(vectors.tobytes())
            fh.truncate(_HEADER.size + capacity * 4 * dim)
            fh.flush()
            _allocate(fh.fileno(), _HEADER.size + rows * 4 * dim, _HEADER.size + capacity * 4 * dim)
            os.fsync(fh.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _allocate(fd: int, start: int, end: int) -> None:
    """Give the file's bytes ``[start, end)`` real disk blocks now. A file grown by
    ``truncate`` is sparse: a full disk would show only when a write through the memory map
    touches a hole, as a SIGBUS that kills the process; here it is an OSError (ENOSPC).

    Raises:
        OSError: the disk is full (or another error of the file system).
    """
    if end <= start:
        return
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here: sparse
            raise


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- damage detection and the backup --------------------------------------------------------
# Every embedder returns L2-normalised rows, so a stored row whose norm is not 1 (NaN,
# garbage bytes, a block of zeros left by a crash of the file system) is damage.
_NORM_TOLERANCE = 1e-4


def damaged_rows(
    rows: F32,
    slots: npt.NDArray[np.int64],
    *,
    batch: int = PASS_ROWS,
    source: VectorSlots | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(bad, zero)``: slots whose row is not a unit vector, and slots whose row is all zeros.

    Zero rows are reported apart: a test embedder may return the zero vector for a text with
    no words, so only re-embedding can tell such a row from a zeroed block. With ``source``
    (the store ``rows`` belong to) the rows are read with its :meth:`~FileVectors.blocks`,
    which leaves nothing of a file resident.
    """
    inside = slots[(slots >= 0) & (slots < len(rows))]
    outside = slots[(slots < 0) | (slots >= len(rows))]
    # Every row up to the last live one is read in order, free slots included: a sequential
    # pass over the map is ~3x faster than gathering the live rows into float64 copies
    # (1M rows: 0.5 s against 1.5 s, page cache warm); einsum sums in float64 all the same.
    top = int(inside.max()) + 1 if len(inside) else 0
    squares = np.empty(top, dtype=np.float64)
    with np.errstate(all="ignore"):
        blocks = (
            source.blocks(top)
            if source is not None
            else ((i, rows[i : min(i + batch, top)]) for i in range(0, top, batch))
        )
        for i, block in blocks:
            squares[i : i + len(block)] = np.einsum("ij,ij->i", block, block, dtype=np.float64)
        norms = np.sqrt(squares[inside])
    is_zero = norms == 0
    broken = ~np.isfinite(norms) | (~is_zero & (np.abs(norms - 1.0) > _NORM_TOLERANCE))
    return np.concatenate([outside, inside[broken]]), inside[is_zero]


_BACKUP_MAGIC = b"GUAIPBAK"
_BACKUP_HEADER = struct.Struct("<8sIIQ40x")  # magic, version, dimension, rows; 64 bytes
_DIGEST = 32


def write_backup(
    path: Path,
    hashes: list[str],
    rows: F32,
    slots: npt.NDArray[np.int64],
    *,
    batch: int = 8192,
    release: Release | None = None,
) -> None:
    """A self-checking copy of the live vectors (``rows[slots]``), keyed by what was embedded
    (each chunk's embedding-input hash), so it stays usable whatever slots later writes
    use. Written atomically in batches (bounded memory; ``release`` drops each batch's rows
    from the mapping once copied); a SHA-256 of the whole content at the end detects any
    damage."""
    if len(hashes) != len(slots):
        raise ValueError("one hash per slot")
    digest = hashlib.sha256()
    tmp = path.with_name(path.name + ".tmp")

    def put(fh: BinaryIO, data: bytes) -> None:
        digest.update(data)
        fh.write(data)

    with tmp.open("wb") as fh:
        put(fh, _BACKUP_HEADER.pack(_BACKUP_MAGIC, _FORMAT, rows.shape[1], len(slots)))
        put(fh, b"".join(bytes.fromhex(h) for h in hashes))
        for i in range(0, len(slots), batch):
            part = slots[i : i + batch]
            put(fh, np.ascontiguousarray(rows[part], dtype=np.float32).tobytes())
            if release is not None and len(part):
                release(int(part.min()), int(part.max()) + 1)
        fh.write(digest.digest())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_backup(path: Path, dim: int) -> dict[str, F32]:
    """``embedding-input hash -> vector`` from a backup written by :func:`write_backup`.

    Raises:
        IndexCorruptError: the file is missing, truncated, of another dimension or damaged.
    """
    try:
        data = path.read_bytes()
    except OSError:
        raise IndexCorruptError(f"vector backup {path.name} cannot be read") from None
    if len(data) < _BACKUP_HEADER.size + _DIGEST:
        raise IndexCorruptError(f"vector backup {path.name} is truncated")
    magic, version, stored_dim, count = _BACKUP_HEADER.unpack_from(data)
    if magic != _BACKUP_MAGIC or version != _FORMAT or stored_dim != dim:
        raise IndexCorruptError(f"vector backup {path.name} has an unknown header")
    body_end = _BACKUP_HEADER.size + count * (_DIGEST + 4 * dim)
    if len(data) != body_end + _DIGEST:
        raise IndexCorruptError(f"vector backup {path.name} has the wrong size (truncated?)")
    if hashlib.sha256(data[:body_end]).digest() != data[body_end:]:
        raise IndexCorruptError(f"vector backup {path.name} fails its checksum")
    start = _BACKUP_HEADER.size
    digests = data[start : start + count * _DIGEST]
    rows = np.frombuffer(
        data, dtype=np.float32, count=count * dim, offset=start + count * _DIGEST
    ).reshape(count, dim)
    return {digests[i * _DIGEST : (i + 1) * _DIGEST].hex(): rows[i] for i in range(count)}


def backup_rows(path: Path) -> int | None:
    """How many vectors a backup holds (from its header), or None if it cannot be read."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_BACKUP_HEADER.size)
    except OSError:
        return None
    if len(head) < _BACKUP_HEADER.size:
        return None
    magic, _, _, count = _BACKUP_HEADER.unpack(head)
    return int(count) if magic == _BACKUP_MAGIC else None
