"""A corpus's tables in PostgreSQL, created and upgraded by numbered migrations.

Each corpus lives in its own schema (``<schema_prefix><corpus>``):

- ``documents``: one row per document (text, JSONB metadata, source state, token count);
- ``chunks``: one row per chunk (span, headings, pages, JSONB enrichment, its token count
  and tantivy-rounded length for BM25, and its ``vector(dim)``);
- ``postings``: ``(term, chunk_pk, tf)`` for every analysed term of every chunk (BM25);
- ``totals``: the corpus's chunk and token counts (one row; writers lock it, so there is
  one writer per corpus at a time and BM25's statistics are exact after every commit);
- ``meta``: model, dimension, language and ``schema_version``.

As for the embedded catalog (``store/embedded/migrations.py``): each migration runs once,
in order, in the transaction that bumps ``schema_version``; never edit a released one.
With shards, ``chunks`` and ``postings`` are hash-partitioned on ``chunk_pk`` and their
partitions are ``postgres_fdw`` foreign tables (:mod:`guaipeca.store.postgres.shards`).
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg import Connection, sql

__all__ = ["CHUNK_COLUMNS", "LATEST", "STEPS", "chunk_table_sql", "migrate"]

#: The chunk columns in table order (the shards' tables repeat them).
CHUNK_COLUMNS = (
    "chunk_pk bigint NOT NULL, doc_pk bigint NOT NULL, position integer NOT NULL, "
    'start integer NOT NULL, "end" integer NOT NULL, text text NOT NULL, '
    "heading_path text NOT NULL, heading_trail text NOT NULL, table_header text, "
    "section_id text NOT NULL, page_start integer, page_end integer, "
    "embed_sha256 text NOT NULL, enrichment jsonb, tokens integer NOT NULL, "
    "norm integer NOT NULL, embedding vector({dim})"
)
#: A posting carries its chunk's rounded length, so BM25 reads the postings alone.
POSTING_COLUMNS = (
    "term text NOT NULL, chunk_pk bigint NOT NULL, tf integer NOT NULL, norm integer NOT NULL"
)


def chunk_table_sql(dim: int) -> tuple[str, str]:
    """The column lists of ``chunks`` and ``postings`` for vectors of ``dim``."""
    return CHUNK_COLUMNS.format(dim=int(dim)), POSTING_COLUMNS


def m001_initial(dim: int, sharded: bool) -> str:
    chunks, postings = chunk_table_sql(dim)
    if sharded:
        tail_c = " PARTITION BY HASH (chunk_pk)"
        tail_p = " PARTITION BY HASH (chunk_pk)"
        keys = ""
    else:
        tail_c = tail_p = ""
        keys = """
            ALTER TABLE chunks ADD PRIMARY KEY (chunk_pk);
            ALTER TABLE postings ADD PRIMARY KEY (term, chunk_pk);
            CREATE INDEX chunks_doc ON chunks (doc_pk, position);
            CREATE INDEX chunks_embed ON chunks (embed_sha256);
            CREATE INDEX postings_chunk ON postings (chunk_pk);
        """
    return f"""
        CREATE TABLE documents (
            doc_pk bigint PRIMARY KEY,
            doc_id text NOT NULL UNIQUE,
            source_path text,
            filename text,
            extension text,
            modified double precision,
            text text NOT NULL,
            text_sha256 text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            chunk_count integer NOT NULL,
            tokens bigint NOT NULL,
            source_sha256 text,
            source_size bigint,
            source_mtime_ns bigint
        );
        CREATE TABLE chunks ({chunks}){tail_c};
        CREATE TABLE postings ({postings}){tail_p};
        {keys}
        CREATE TABLE totals (
            id integer PRIMARY KEY CHECK (id = 1),
            chunks bigint NOT NULL,
            tokens bigint NOT NULL
        );
        INSERT INTO totals VALUES (1, 0, 0);
        CREATE SEQUENCE chunk_pk_seq;
        CREATE SEQUENCE doc_pk_seq;
    """


Migration = Callable[[int, bool], str]
STEPS: tuple[Migration, ...] = (m001_initial,)
LATEST = len(STEPS)


def migrate(conn: Connection[tuple[object, ...]], schema: str, dim: int, sharded: bool) -> int:
    """Bring ``schema`` to :data:`LATEST`; the version it had before (0: created now).

    The caller holds an advisory lock, so two processes never migrate at once.
    """
    ident = sql.Identifier(schema)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.meta (key text PRIMARY KEY, value jsonb NOT NULL)"
        ).format(ident)
    )
    row = conn.execute(
        sql.SQL("SELECT value FROM {}.meta WHERE key = 'schema_version'").format(ident)
    ).fetchone()
    version = int(row[0]) if row else 0  # type: ignore[call-overload]
    conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(ident))
    for number in range(version + 1, LATEST + 1):
        conn.execute(STEPS[number - 1](dim, sharded))
        conn.execute(
            "INSERT INTO meta VALUES ('schema_version', to_jsonb(%s::int)) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (number,),
        )
    return version
