"""Shards: a corpus's ``chunks`` and ``postings`` hash-partitioned on ``chunk_pk`` over shard
servers, each partition a ``postgres_fdw`` foreign table on one shard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guaipeca.store.postgres.backend import PostgresBackend

__all__ = ["create_shard_tables", "drop_shard_tables", "shard_error"]


def create_shard_tables(backend: PostgresBackend, conn: Any, schema: str, dim: int) -> None:
    raise NotImplementedError


def drop_shard_tables(backend: PostgresBackend, schema: str) -> None:
    """Drop the shard servers' tables of ``schema`` (nothing without shards)."""
    if not backend.shards:
        return
    raise NotImplementedError


def shard_error(backend: PostgresBackend, exc: Exception) -> Exception | None:
    """A clear error naming the shard ``exc`` came from, or None (not a shard's error)."""
    return None
