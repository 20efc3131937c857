"""What a PostgreSQL corpus and the shard helpers need from the backend (a Protocol, so they
do not import the backend that opens them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["Conn", "Connection"]

T = TypeVar("T")
#: An open psycopg connection (psycopg.Connection[tuple[Any, ...]]).
Conn = Any


class Connection(Protocol):
    """The open backend a :class:`~guaipeca.store.postgres.corpus.PostgresCorpus` works through."""

    prefix: str
    vector_index: str
    hnsw_threshold: int
    shards: tuple[str, ...]
    partial_results: bool

    def run(self, work: Callable[[Conn], T], *, read: bool = False) -> T: ...

    def schema(self, corpus: str) -> str: ...

    def clean(self, exc: BaseException) -> str: ...
