"""The catalog's connection: migrations run on open, and a file that is not SQLite refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from guaipeca.errors import IndexCorruptError
from guaipeca.store.embedded import Catalog
from guaipeca.store.embedded.migrations import SCHEMA_VERSION, migrate


def test_a_new_catalog_is_at_the_newest_schema_and_migrations_run_once(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    assert catalog.get_meta("schema_version") == str(SCHEMA_VERSION)
    catalog.close()
    db = sqlite3.connect(tmp_path / "c.sqlite", isolation_level=None)
    assert migrate(db) == SCHEMA_VERSION
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(IndexCorruptError, match="newer"):
        migrate(db)


def test_a_file_that_is_not_sqlite_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(IndexCorruptError, match="re-index"):
        Catalog(path)
