"""Shards: a corpus's ``chunks`` and ``postings`` hash-partitioned on ``chunk_pk`` over shard
servers, each partition a ``postgres_fdw`` foreign table on one shard.

The primary keeps ``documents``, ``totals`` and ``meta`` and is the only server clients talk
to: PostgreSQL routes each row to its shard, and a search's ``ORDER BY ... LIMIT`` runs on
every shard and is merged by the primary. Shard ``i`` (0-based, in ``storage.postgres.shards``
order) holds remainder ``i``; the number of shards of a corpus is fixed when it is created.
A write commits on the shards when it commits on the primary (``postgres_fdw`` has no
two-phase commit: a crash between those commits can leave one batch on some shards only; a
re-index repairs it).

A shard that does not answer makes every read and write of the corpus fail with
:class:`~guaipeca.errors.ShardUnavailableError` naming it: never silently partial results.
A search may answer from the other shards when partial results were asked for, and is then
told which shards it misses (:mod:`~guaipeca.store.postgres.live`).
"""

from __future__ import annotations

import re
from typing import Any

from guaipeca.errors import ShardUnavailableError
from guaipeca.store.postgres.connection import Connection
from guaipeca.store.postgres.dsn import describe
from guaipeca.store.postgres.schema import chunk_table_sql

__all__ = [
    "any_shard_rows",
    "create_shard_tables",
    "drop_shard_tables",
    "server_name",
    "shard_error",
    "shard_label",
    "shard_rows",
]

_SERVER = re.compile(r'server "([^"]+)"')


def server_name(backend: Connection, i: int) -> str:
    """The foreign server of shard ``i`` on the primary."""
    return f"{backend.prefix}shard{i}"


def _shard_sql(dsn: str, statements: list[str]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for statement in statements:
            conn.execute(statement)  # our DDL, identifiers quoted


def shard_rows(dsn: str, statement: str, params: tuple[Any, ...]) -> list[Any]:
    """One statement run directly on a shard (its own indexes), autocommit."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        cur = conn.execute(statement, params)  # our statements
        return cur.fetchall() if cur.description else []


def any_shard_rows(backend: Connection, statement: str, params: tuple[Any, ...]) -> list[Any]:
    """One statement run on the first shard that answers (what every shard holds alike, such
    as its indexes).

    Raises:
        ShardUnavailableError: no shard answers (the first one is named).
    """
    import psycopg

    first: Exception | None = None
    for dsn in backend.shards:
        try:
            return shard_rows(dsn, statement, params)
        except psycopg.OperationalError as exc:
            first = first or exc
    label = shard_label(backend, 0)
    reason = backend.clean(first) if first else "no shards"
    raise ShardUnavailableError(
        f"{label} is not answering ({reason}), nor any other shard; the corpus cannot be "
        "searched until they are back: start them, then retry",
        shard=0,
        label=label,
    )


def create_shard_tables(backend: Connection, conn: Any, schema: str, dim: int) -> None:
    """Create the shards' tables and attach them to ``schema``'s partitioned tables on the
    primary (``conn``, in the transaction that created the schema)."""
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    s = sql.Identifier(schema).as_string(None)
    chunks, postings = chunk_table_sql(dim)
    n = len(backend.shards)
    conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    for i, dsn in enumerate(backend.shards):
        _shard_sql(
            dsn,
            [
                "CREATE EXTENSION IF NOT EXISTS vector",
                f"CREATE SCHEMA IF NOT EXISTS {s}",
                f"CREATE TABLE IF NOT EXISTS {s}.chunks ({chunks}, PRIMARY KEY (chunk_pk))",
                f"CREATE TABLE IF NOT EXISTS {s}.postings ({postings}, "
                "PRIMARY KEY (term, chunk_pk))",
                f"CREATE INDEX IF NOT EXISTS chunks_doc ON {s}.chunks (doc_pk, position)",
                f"CREATE INDEX IF NOT EXISTS chunks_embed ON {s}.chunks (embed_sha256)",
                f"CREATE INDEX IF NOT EXISTS postings_chunk ON {s}.postings (chunk_pk)",
            ],
        )
        parts = conninfo_to_dict(dsn)
        server = sql.Identifier(server_name(backend, i))
        options = {k: str(parts[k]) for k in ("host", "port", "dbname") if parts.get(k) is not None}
        conn.execute(
            sql.SQL(
                "CREATE SERVER IF NOT EXISTS {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({})"
            ).format(server, _options(options))
        )
        login = {k: str(parts[k]) for k in ("user", "password") if parts.get(k) is not None}
        if login:
            conn.execute(
                sql.SQL(
                    "CREATE USER MAPPING IF NOT EXISTS FOR CURRENT_USER SERVER {} OPTIONS ({})"
                ).format(server, _options(login))
            )
        for table in ("chunks", "postings"):
            conn.execute(
                sql.SQL(
                    "CREATE FOREIGN TABLE {}.{} PARTITION OF {}.{} "
                    "FOR VALUES WITH (MODULUS {}, REMAINDER {}) SERVER {} "
                    "OPTIONS (schema_name {}, table_name {})"
                ).format(
                    sql.Identifier(schema),
                    sql.Identifier(f"{table}_shard{i}"),
                    sql.Identifier(schema),
                    sql.Identifier(table),
                    sql.Literal(n),
                    sql.Literal(i),
                    server,
                    sql.Literal(schema),
                    sql.Literal(table),
                )
            )


def drop_shard_tables(backend: Connection, schema: str) -> None:
    """Drop ``schema`` on every shard (nothing without shards)."""
    from psycopg import sql

    s = sql.Identifier(schema).as_string(None)
    for dsn in backend.shards:
        _shard_sql(dsn, [f"DROP SCHEMA IF EXISTS {s} CASCADE"])


def _options(values: dict[str, str]) -> Any:
    """``OPTIONS (...)``'s list: each name an identifier, each value a literal."""
    from psycopg import sql

    return sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in values.items()
    )


def shard_error(backend: Connection, exc: Exception) -> ShardUnavailableError | None:
    """A clear error naming the shard ``exc`` came from, or None (not a shard's error)."""
    if not backend.shards:
        return None
    found = _SERVER.search(str(exc))
    names = {server_name(backend, i): i for i in range(len(backend.shards))}
    if found is None or found.group(1) not in names:
        return None
    i = names[found.group(1)]
    label = shard_label(backend, i)
    return ShardUnavailableError(
        f"{label} is not answering ({backend.clean(exc)}); the corpus cannot be searched or "
        "written completely until it is back: start it, then retry",
        shard=i,
        label=label,
    )


def shard_label(backend: Connection, i: int) -> str:
    """How messages name shard ``i``: ``shard 2 of 2 (PostgreSQL at host:5432/db)``."""
    return f"shard {i + 1} of {len(backend.shards)} ({describe(backend.shards[i])})"
