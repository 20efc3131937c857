"""What a Qdrant corpus needs from its backend: the client, retried calls and collection
names (a Protocol, so the corpus does not import the backend that opens it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["Connection", "qdrant_models"]

T = TypeVar("T")


class Connection(Protocol):
    """The open connection a :class:`~guaipeca.store.qdrant.corpus.QdrantCorpus` works through."""

    client: Any
    local: bool
    exact: bool
    replication_factor: int | None
    shard_number: int | None

    def call(self, fn: Callable[..., T], *args: Any, retry: bool = True, **kwargs: Any) -> T: ...

    def collection(self, corpus: str) -> str: ...


def qdrant_models() -> Any:
    """qdrant_client.models, imported on first use (the extra is optional)."""
    from qdrant_client import models

    return models
