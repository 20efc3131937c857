"""Real PostgreSQL servers for the storage tests, started once per test session (about 8 s
each, on first use) and stopped at its end (support.postgres)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import postgres


@pytest.fixture(scope="session")
def pg_primary() -> Iterator[postgres.PgServer]:
    server = postgres.start_server("primary")
    postgres.PRIMARY.append(server)
    yield server
    postgres.PRIMARY.clear()
    postgres.discard(server)


@pytest.fixture(scope="session")
def pg_replica(pg_primary: postgres.PgServer) -> Iterator[postgres.PgServer]:
    server = postgres.start_replica(pg_primary)
    yield server
    postgres.discard(server)


@pytest.fixture(scope="session")
def pg_shards() -> Iterator[list[postgres.PgServer]]:
    servers: list[postgres.PgServer] = []
    try:
        servers.extend(postgres.start_server(f"shard{i}") for i in (1, 2))
        yield servers
    finally:
        for server in servers:
            postgres.discard(server)
