"""The catalog's write transaction: generations, slot allocation that never reuses a slot
freed in the same transaction, and rollback on error."""

from __future__ import annotations

import pytest

from guaipeca.store.embedded import Catalog
from guaipeca.types import ChunkSpan


def _chunks(n: int) -> list[ChunkSpan]:
    return [
        ChunkSpan(
            start=i * 10,
            end=i * 10 + 5,
            text="x" * 5,
            position=i,
            heading_path=("T",),
            section_id="s:x",
        )
        for i in range(n)
    ]


def _insert(catalog: Catalog, doc_id: str, n: int) -> list[int]:
    with catalog.write() as txn:
        old = txn.find_document(doc_id)
        if old:
            txn.delete_document(old[0])
        slots = txn.allocate_slots(n)
        txn.insert_document(
            doc_id=doc_id,
            text="x" * (10 * n),
            text_sha256="sha",
            metadata={},
            source_path=None,
            modified=None,
            chunks=_chunks(n),
            embed_hashes=[f"h{i}" for i in range(n)],
            slots=slots,
        )
    return slots


def test_slots_freed_in_a_write_are_reused_only_by_a_later_write() -> None:
    catalog = Catalog(None)
    assert _insert(catalog, "a", 3) == [0, 1, 2]
    # Replacing "a" frees 0..2 in this transaction: the new chunks must not take them.
    assert _insert(catalog, "a", 2) == [3, 4]
    assert _insert(catalog, "b", 4) == [0, 1, 2, 5]
    assert catalog.generation() == 3
    slot_to_pk, high_water = catalog.slot_map()
    assert high_water == 6 and (slot_to_pk >= 0).sum() == 6


def test_a_failed_write_rolls_back_completely() -> None:
    catalog = Catalog(None)
    _insert(catalog, "a", 2)
    with pytest.raises(RuntimeError), catalog.write() as txn:
        txn.allocate_slots(5)
        txn.update_metadata("a", {"changed": True})
        raise RuntimeError("boom")
    assert catalog.generation() == 1
    assert catalog.document("a") is not None and catalog.document("a").metadata == {}
    assert catalog.slot_map()[1] == 2
