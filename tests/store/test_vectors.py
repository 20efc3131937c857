"""Vector slots on disk and in memory: same growth, same values, durable, checked header."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guaipeca.errors import IndexCorruptError
from guaipeca.store import FileVectors, MemoryVectors, write_vector_file


def _vecs(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_file_and_memory_slots_hold_the_same_rows(tmp_path: Path) -> None:
    disk = FileVectors(tmp_path / "v.f32", 8, create=True)
    memory = MemoryVectors(8)
    for store in (disk, memory):
        store.write(np.arange(5, dtype=np.int64), _vecs(5))
        store.write(np.array([2000, 3], dtype=np.int64), _vecs(2, seed=1))  # grows past 1024
        store.flush()
    assert disk.rows().shape == memory.rows().shape == (2048, 8)
    np.testing.assert_array_equal(np.asarray(disk.rows()), memory.rows())
    reopened = FileVectors(tmp_path / "v.f32", 8)
    np.testing.assert_array_equal(np.asarray(reopened.rows()), memory.rows())


def test_damaged_files_are_refused_with_a_repair_hint(tmp_path: Path) -> None:
    path = tmp_path / "v.f32"
    write_vector_file(path, _vecs(3))
    with pytest.raises(IndexCorruptError, match="dimension"):
        FileVectors(path, 16)
    with path.open("r+b") as fh:
        fh.truncate(64 + 10)
    with pytest.raises(IndexCorruptError, match="mid-row"):
        FileVectors(path, 8)
    path.write_bytes(b"garbage" * 20)
    with pytest.raises(IndexCorruptError, match="header"):
        FileVectors(path, 8)
    path.write_bytes(b"x")
    with pytest.raises(IndexCorruptError, match="truncated"):
        FileVectors(path, 8)
    with pytest.raises(IndexCorruptError, match="missing"):
        FileVectors(tmp_path / "none.f32", 8)


def test_write_vector_file_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "v.f32"
    write_vector_file(path, _vecs(4))
    assert not list(tmp_path.glob("*.tmp"))
    np.testing.assert_array_equal(np.asarray(FileVectors(path, 8).rows()[:4]), _vecs(4))
