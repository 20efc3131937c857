"""Opening the configured storage backend (the one module that knows them all)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guaipeca.config import StorageSettings
    from guaipeca.store.contract import Backend

__all__ = ["open_backend"]


def open_backend(storage: StorageSettings) -> Backend | None:
    """The backend named by ``storage.backend``; ``None`` for the embedded default.

    Raises:
        ConfigError: the Qdrant or PostgreSQL extra is not installed.
        BackendUnavailableError: the Qdrant server cannot be reached.
    """
    if storage.backend == "embedded":
        return None
    if storage.backend == "postgres":
        from guaipeca.store.postgres.backend import PostgresBackend

        return PostgresBackend.from_settings(storage.postgres)
    from guaipeca.store.qdrant.backend import QdrantBackend

    return QdrantBackend.from_settings(storage.qdrant)
