"""What the catalog's reads and its write transaction share: opening a connection, telling a
damaged database from a busy one, and the SQL fragments both sides use."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guaipeca.errors import DiskFullError, IndexCorruptError, disk_full, free_bytes
from guaipeca.store.contract import ChunkRow

__all__ = ["CHUNK_SELECT", "EMBEDDED", "IDENTITY", "chunk_row", "connect", "damaged"]

CHUNK_SELECT = """
    SELECT c.chunk_pk, d.doc_id, c.position, c.start, c."end", c.heading_path, c.section_id,
           c.page_start, c.page_end, c.slot, substr(d.text, c.start + 1, c."end" - c.start),
           d.source_path, d.metadata,
           c.chunk_pk NOT IN (SELECT chunk_pk FROM pending_vectors),
           c.heading_trail, c.table_header
    FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk
"""
# Chunks whose vector is written (not waiting in pending_vectors).
EMBEDDED = "chunk_pk NOT IN (SELECT chunk_pk FROM pending_vectors)"


def chunk_row(r: Sequence[Any]) -> ChunkRow:
    if len(r[10]) != r[4] - r[3]:  # the document's text no longer covers the chunk's span
        raise IndexCorruptError(
            f"catalog is damaged: chunk {r[0]} of document {r[1]!r:.80} lies outside its "
            "text; re-index the corpus with 'guaipeca index --force'"
        )
    return ChunkRow(
        chunk_pk=r[0],
        doc_id=r[1],
        position=r[2],
        start=r[3],
        end=r[4],
        heading_path=tuple(json.loads(r[5])),
        section_id=r[6],
        page_start=r[7],
        page_end=r[8],
        slot=r[9],
        text=r[10],
        source_path=r[11],
        metadata=json.loads(r[12]),
        embedded=bool(r[13]),
        heading_trail=tuple(json.loads(r[14])) if r[14] is not None else tuple(json.loads(r[5])),
        table_header=r[15],
    )


def connect(target: str) -> sqlite3.Connection:
    db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30.0)
    db.execute("PRAGMA foreign_keys = ON")
    return db


#: Columns of the vector_identity table, as the fields of embed/identity.py's EmbedderIdentity.
IDENTITY = ("provider", "model", "dimension", "query_prefix", "passage_prefix", "weights_sha256")


# Below this much free space, a "disk I/O error" is taken for a full disk: SQLite reports
# some failed writes (of the WAL index, of a checkpoint) as I/O errors, not SQLITE_FULL.
_NEARLY_FULL = 1 << 20


def damaged(path: Path | None, exc: sqlite3.DatabaseError) -> Exception:
    """A damaged database file is a clear error, and a full disk another (the catalog is
    not damaged: the failed transaction rolled back); a busy or locked one stays what it is."""
    text = str(exc).lower()
    if path is not None:
        full = disk_full(exc, path.parent)
        free = free_bytes(path.parent)
        if full is None and "disk i/o" in text and free is not None and free < _NEARLY_FULL:
            full = DiskFullError(path.parent)
        if full is not None:
            return full
    if isinstance(exc, sqlite3.OperationalError) and not any(
        word in text
        for word in ("malformed", "not a database", "disk i/o", "corrupt", "could not decode")
    ):
        return exc
    return IndexCorruptError(
        f"catalog {path.name if path else '(memory)'} is damaged ({exc}); the catalog is the "
        "index's source of truth: re-index the corpus with 'guaipeca index --force' "
        "(source files are read again)"
    )
