"""Vector slots on disk and in memory: same growth, same values, durable, checked header."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.errors import IndexCorruptError
from guaipeca.store.embedded import FileVectors, MemoryVectors, write_vector_file
from guaipeca.store.embedded.vectors import damaged_rows


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


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=300),
    dim=st.sampled_from([3, 8, 384, 1024]),
    damage=st.lists(
        st.tuples(st.integers(min_value=0, max_value=299), st.sampled_from(["nan", "zero", "x2"])),
        max_size=10,
    ),
    extra=st.lists(st.integers(min_value=-3, max_value=400), max_size=5),
    data=st.data(),
)
def test_damaged_rows_finds_exactly_the_rows_that_are_not_unit_vectors(
    n: int, dim: int, damage: list[tuple[int, str]], extra: list[int], data: st.DataObject
) -> None:
    rows = _vecs(n, dim, seed=n)
    if n:
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    for slot, kind in damage:
        if slot < n:
            rows[slot] = {"nan": np.nan, "zero": 0.0, "x2": 2 * rows[slot]}[kind]
    live = data.draw(st.lists(st.integers(min_value=0, max_value=max(n - 1, 0)), unique=True))
    slots = np.asarray(sorted(live if n else []) + extra, dtype=np.int64)
    bad, zero = damaged_rows(rows, slots, batch=7)  # small batches: the block edges matter
    # The reference: each slot on its own, in float64.
    want_bad, want_zero = set(), set()
    for s in slots.tolist():
        if not 0 <= s < n:
            want_bad.add(s)
            continue
        norm = float(np.sqrt(np.sum(rows[s].astype(np.float64) ** 2)))
        if norm == 0:
            want_zero.add(s)
        elif not np.isfinite(norm) or abs(norm - 1.0) > 1e-4:
            want_bad.add(s)
    assert set(bad.tolist()) == want_bad
    assert set(zero.tolist()) == want_zero


# -- reading a large file without it staying resident ------------------------------------------
def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (from /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's header line
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_large_files_are_read_without_mapping_them(tmp_path: Path) -> None:
    from guaipeca.store.embedded.binary import pack_signs
    from guaipeca.store.embedded.vectors import PASS_ROWS, scores

    dim, n = 64, 3 * PASS_ROWS + 17  # 12.6 MB, several blocks and a ragged last one
    rows = _vecs(n, dim)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    path = tmp_path / "v.f32"
    write_vector_file(path, rows)
    # A 1 MB threshold makes this small file "large", as 1.5 GB is at 1M chunks.
    large = FileVectors(path, dim, keep_mapped_bytes=1 << 20)
    small = FileVectors(path, dim)
    memory = MemoryVectors(dim, keep_mapped_bytes=1 << 20)
    memory.write(np.arange(n, dtype=np.int64), rows)
    query = rows[5]
    slots = np.sort(np.random.default_rng(1).choice(n, 3000, replace=False))

    exact = scores(large, query, n)
    np.testing.assert_allclose(exact, rows @ query, atol=1e-6)
    # Disk and memory take the same path, so the same arithmetic: identical, not close.
    assert np.array_equal(exact, scores(memory, query, n))
    assert np.array_equal(scores(large, query, n, slots), scores(memory, query, n, slots))
    assert np.array_equal(large.gather(slots), rows[slots])
    bad, zero = damaged_rows(large.rows(), np.arange(n, dtype=np.int64), source=large)
    assert len(bad) == len(zero) == 0
    assert np.array_equal(pack_signs(large.rows()[:n], large.blocks(n)), pack_signs(rows))
    # None of it went through the mapping of the "large" file...
    assert _mapped_kb(path) == 0
    # ...while reading the same rows through a mapping does map them (the check can fail).
    np.asarray(small.rows()[slots])
    assert _mapped_kb(path) > 1000
