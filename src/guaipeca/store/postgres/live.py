"""Reads of a sharded corpus without the shards that do not answer, when the caller asked for
partial results (``storage.postgres.partial_results``) and a search will be told.

A read runs as usual first. When a shard does not answer, partial results were asked for and
a search is listening (:func:`guaipeca.store.partial.listening`), the read runs again with
that shard's partitions left out: every ``chunks`` and ``postings`` of the statements it
sends names the live shards' foreign tables instead of the partitioned table (so PostgreSQL
never opens a connection to the lost shard), and the search is told each shard it misses
(:func:`guaipeca.store.partial.report_missing`). The search's later reads leave that shard
out at once. Keyword scores then use the whole corpus's totals (kept on the primary) with
the live shards' document frequencies.

Writes never come here: they fail naming the shard (:func:`~.shards.shard_error`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from guaipeca.errors import ShardUnavailableError
from guaipeca.store.partial import listening, report_missing, reported
from guaipeca.store.postgres.connection import Conn, Connection
from guaipeca.store.postgres.shards import shard_label

__all__ = ["LiveShards", "read_live", "without_shards"]

log = logging.getLogger("guaipeca")
T = TypeVar("T")


def without_shards(statement: str, schema: str, shards: int, missing: Sequence[int]) -> str:
    """``statement`` reading ``schema``'s (a quoted identifier) ``chunks`` and ``postings``
    from the partitions of the shards not in ``missing`` only (each use keeps its alias)."""
    live = [i for i in range(shards) if i not in missing]

    def tables(found: re.Match[str]) -> str:
        table = found.group(1)
        if len(live) == 1:
            return f"{schema}.{table}_shard{live[0]}"
        union = " UNION ALL ".join(f"SELECT * FROM {schema}.{table}_shard{i}" for i in live)
        return f"({union})"

    return re.sub(re.escape(schema) + r"\.(chunks|postings)\b", tables, statement)


class LiveShards:
    """A connection whose statements leave out the ``missing`` shards' partitions."""

    def __init__(self, conn: Conn, schema: str, shards: int, missing: Sequence[int]) -> None:
        self._conn = conn
        self._schema = schema
        self._shards = shards
        self._missing = tuple(missing)

    def execute(self, statement: str, params: Any = None) -> Any:
        live = without_shards(statement, self._schema, self._shards, self._missing)
        return self._conn.execute(live, params)  # our statements, rewritten


def read_live(backend: Connection, schema: str, work: Callable[[Conn], T]) -> T:
    """``work(conn)`` on the read server, without the shards that do not answer when partial
    results were asked for and a search is listening (which is told each shard missed).

    Raises:
        ShardUnavailableError: a shard does not answer and partial results were not asked
            for, no search is listening, or no shard answers.
    """
    n = len(backend.shards)
    partial = backend.partial_results and listening()
    # Shards this search already found down are left out at once (no new wait for them).
    lost = set(reported()) if partial else set()
    missing = [i for i in range(n) if shard_label(backend, i) in lost]
    attempt = _without(work, schema, n, tuple(missing)) if missing else work
    while True:
        try:
            return backend.run(attempt, read=True)
        except ShardUnavailableError as exc:
            if not partial or exc.shard is None or exc.shard in missing or len(missing) + 1 >= n:
                raise
            missing.append(exc.shard)
            log.info("%s; answering from the other shards (partial_results)", exc.label)
            report_missing(exc.label)
            attempt = _without(work, schema, n, tuple(missing))


def _without(
    work: Callable[[Conn], T], schema: str, shards: int, missing: Sequence[int]
) -> Callable[[Conn], T]:
    """``work`` on a connection that leaves out the ``missing`` shards' partitions."""
    return lambda conn: work(LiveShards(conn, schema, shards, missing))
