"""Helpers for the backend contract tests (tests/store/qdrant): open an Index on any backend.

Qdrant runs as qdrant-client's embedded local mode in a temporary folder: no Qdrant server
can run in this environment, so the server itself is not exercised by these tests.
PostgreSQL is a real server the tests start (support.postgres; the ``pg_primary`` fixture
must be active), one schema prefix per test folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from guaipeca import Index
from guaipeca.config import EngineSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.store.qdrant.backend import QdrantBackend

BACKENDS = ("embedded", "qdrant", "postgres")
MakeIndex = Callable[..., Index]
# Qdrant's sparse BM25 keeps no word positions, so search.phrase_weight only acts on the
# embedded backend; the parity tests compare the BM25 both compute, without phrase clauses.
_DEFAULTS = EngineSettings()
NO_PHRASES = _DEFAULTS.model_copy(
    update={"search": _DEFAULTS.search.model_copy(update={"phrase_weight": 0.0})}
)


def open_index(backend: str, folder: Path, **kwargs: Any) -> Index:
    kwargs.setdefault("embedder", HashingEmbedder(64))
    kwargs.setdefault("settings", NO_PHRASES)
    if backend == "embedded":
        return Index(folder / "embedded", **kwargs)
    if backend == "postgres":
        from support.postgres import open_backend

        return Index(backend=open_backend(folder), **kwargs)
    return Index(backend=QdrantBackend.open_local(folder / "qdrant"), **kwargs)
