"""Numbered schema migrations for a corpus catalog (``m001_…`` style, as in simonw/llm).

Each migration runs once, in order, inside the transaction that bumps ``schema_version``.
Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

# A migration is an SQL script; it runs with the version bump in one transaction.
Migration = Callable[[], str]


def m001_initial() -> str:
    return """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents (
            doc_pk INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL UNIQUE,
            source_path TEXT,
            filename TEXT,
            extension TEXT,
            modified REAL,
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            chunk_count INTEGER NOT NULL,
            created REAL NOT NULL
        );
        CREATE TABLE chunks (
            chunk_pk INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_pk INTEGER NOT NULL REFERENCES documents(doc_pk),
            position INTEGER NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            heading_path TEXT NOT NULL,
            section_id TEXT NOT NULL,
            page_start INTEGER,
            page_end INTEGER,
            slot INTEGER NOT NULL UNIQUE,
            embed_sha256 TEXT NOT NULL
        );
        CREATE INDEX chunks_doc ON chunks(doc_pk, position);
        CREATE INDEX chunks_section ON chunks(section_id);
        CREATE INDEX chunks_embed ON chunks(embed_sha256);
        CREATE INDEX documents_source ON documents(source_path);
        -- Vector slots whose chunk was deleted. A slot freed in generation G may be
        -- overwritten only by a later write, so a crash mid-write never touches a
        -- vector the committed catalog still points at.
        CREATE TABLE free_slots (slot INTEGER PRIMARY KEY, freed_generation INTEGER NOT NULL);
        """


def m002_source_state() -> str:
    # The source file's hash, size and mtime: a folder re-scan skips files whose size and
    # mtime are unchanged, and hashes the others to tell a touch from an edit.
    return """
        ALTER TABLE documents ADD COLUMN source_sha256 TEXT;
        ALTER TABLE documents ADD COLUMN source_size INTEGER;
        ALTER TABLE documents ADD COLUMN source_mtime_ns INTEGER;
        """


def m003_enrichment() -> str:
    # Per-chunk enrichment (SPEC §8): the JSON the filters read (keywords, entities, dates,
    # content types, LLM fields), an inverted list of each chunk's entity keys and keywords
    # for find_related, and the LLM answers keyed by what was sent, so an unchanged chunk is
    # never sent twice. Rows follow their chunk out (ON DELETE CASCADE).
    return """
        ALTER TABLE chunks ADD COLUMN enrichment TEXT;
        CREATE TABLE chunk_terms (
            term TEXT NOT NULL,
            kind TEXT NOT NULL,
            chunk_pk INTEGER NOT NULL REFERENCES chunks(chunk_pk) ON DELETE CASCADE,
            PRIMARY KEY (term, kind, chunk_pk)
        ) WITHOUT ROWID;
        CREATE INDEX chunk_terms_chunk ON chunk_terms(chunk_pk);
        CREATE TABLE llm_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL);
        """


def m004_pending_vectors() -> str:
    # Progressive indexing (SPEC §2.8): a chunk committed by the keyword phase before its
    # vector exists. Its slot is reserved (a zero row) but no reader trusts it until the
    # embedding phase writes the vector and deletes this row in the same commit. The input
    # to embed is kept here, so the work resumes after a crash without rebuilding it.
    return """
        CREATE TABLE pending_vectors (
            chunk_pk INTEGER PRIMARY KEY REFERENCES chunks(chunk_pk) ON DELETE CASCADE,
            input TEXT NOT NULL
        );
        -- The embedding phase takes the shortest inputs first: batches of even length.
        CREATE INDEX pending_length ON pending_vectors(length(input), chunk_pk);
        """


def m005_vector_identity() -> str:
    # What the corpus's vectors were made with (embed/identity.py): one row. A corpus written
    # before this knew only its model's name and dimension; the rest stays NULL ("not
    # recorded"), is not compared, and is filled in by the first open with the same model.
    return """
        CREATE TABLE vector_identity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            provider TEXT,
            model TEXT NOT NULL,
            dimension INTEGER NOT NULL,
            query_prefix TEXT,
            passage_prefix TEXT,
            weights_sha256 TEXT
        );
        INSERT INTO vector_identity (id, provider, model, dimension)
            SELECT 1,
                   CASE WHEN m.value = 'all-MiniLM-L6-v2-int8' THEN 'bundled' END,
                   m.value,
                   CAST(d.value AS INTEGER)
            FROM meta m JOIN meta d ON d.key = 'dimension'
            WHERE m.key = 'model';
        """


def m006_heading_trail() -> str:
    # Every heading level down to each chunk (JSON, like heading_path) and a table chunk's
    # header row (SPEC §3.4b). Rows written before this are filled in by
    # ``backfill_structure`` right after the migration, from the stored document text.
    return """
        ALTER TABLE chunks ADD COLUMN heading_trail TEXT;
        ALTER TABLE chunks ADD COLUMN table_header TEXT;
        """


MIGRATIONS: tuple[Migration, ...] = (
    m001_initial,
    m002_source_state,
    m003_enrichment,
    m004_pending_vectors,
    m005_vector_identity,
    m006_heading_trail,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection) -> int:
    """Bring ``db`` (an autocommit connection) to the newest schema; returns the old version."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    start = int(row[0]) if row else 0
    if start > SCHEMA_VERSION:
        from guaipeca.errors import IndexCorruptError

        raise IndexCorruptError(
            f"this index was written by a newer Guaipeca (schema {start} > {SCHEMA_VERSION}); "
            "upgrade guaipeca to open it"
        )
    for number in range(start, SCHEMA_VERSION):
        # executescript runs in autocommit mode, so the transaction is spelled out.
        db.executescript(
            "BEGIN IMMEDIATE;\n"
            + MIGRATIONS[number]()
            + "\nINSERT OR REPLACE INTO meta(key, value) VALUES "
            + f"('schema_version', '{number + 1}');\nCOMMIT;"
        )
    if 0 < start < 6:  # before m006_heading_trail
        backfill_structure(db)
    return start


def backfill_structure(db: sqlite3.Connection) -> int:
    """Fill in ``heading_trail`` and ``table_header`` of chunks stored without them, from
    their documents' text (one transaction); returns the number of chunks filled in."""
    import json

    from guaipeca.chunk import structure_at

    filled = 0
    db.execute("BEGIN IMMEDIATE")
    try:
        pending = db.execute(
            "SELECT DISTINCT doc_pk FROM chunks WHERE heading_trail IS NULL"
        ).fetchall()
        for (doc_pk,) in pending:
            (text,) = db.execute(
                "SELECT text FROM documents WHERE doc_pk = ?", (doc_pk,)
            ).fetchone()
            rows = db.execute(
                'SELECT chunk_pk, start, "end" FROM chunks WHERE doc_pk = ? ORDER BY position',
                (doc_pk,),
            ).fetchall()
            found = structure_at(text, [(r[1], r[2]) for r in rows])
            db.executemany(
                "UPDATE chunks SET heading_trail = ?, table_header = ? WHERE chunk_pk = ?",
                [
                    (json.dumps(list(trail), ensure_ascii=False), header, r[0])
                    for r, (trail, header) in zip(rows, found, strict=True)
                ],
            )
            filled += len(rows)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return filled
