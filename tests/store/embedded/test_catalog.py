"""The catalog: migrations, generations, slot allocation that never reuses a slot freed in
the same transaction, and rollback on error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from guaipeca.errors import IndexCorruptError
from guaipeca.store.embedded import Catalog, ChunkRecord
from guaipeca.store.embedded.migrations import SCHEMA_VERSION, migrate


def _chunks(n: int) -> list[ChunkRecord]:
    return [
        ChunkRecord(i, i * 10, i * 10 + 5, ("T",), "s:x", None, None, f"h{i}") for i in range(n)
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
            slots=slots,
        )
    return slots


def test_a_new_catalog_is_at_the_newest_schema_and_migrations_run_once(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    assert catalog.get_meta("schema_version") == str(SCHEMA_VERSION)
    catalog.close()
    db = sqlite3.connect(tmp_path / "c.sqlite", isolation_level=None)
    assert migrate(db) == SCHEMA_VERSION
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(IndexCorruptError, match="newer"):
        migrate(db)


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


def test_a_file_that_is_not_sqlite_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(IndexCorruptError, match="re-index"):
        Catalog(path)
