"""The body of ``GET /health`` while the backend is up: the version, the counts (of the
corpora a search covers: a corpus left in the data folder but not in the configuration is
listed with ``"searched": false`` and left out of the totals), and the broken corpora."""

from __future__ import annotations

from typing import Any, Final

from guaipeca import __version__
from guaipeca.server.service import Service
from guaipeca.types import IndexStats

__all__ = ["SERVER_NAME", "health_body"]

#: ``"server"`` in every /health body: what the original Guaipeca's health check carried,
#: which monitors and scripts written for it look for.
SERVER_NAME: Final = "guaipeca"


def health_body(service: Service, backend: str, stats: IndexStats) -> dict[str, Any]:
    guard = service.guard  # under grants: the corpora an anonymous caller may read
    stats = guard.stats(stats)
    counted = service.searched(stats)
    searched = {c.name for c in counted.corpora}
    body: dict[str, Any] = {
        "status": "ok",
        "server": SERVER_NAME,
        "version": __version__,
        "backend": backend,
        "backend_status": "up",
        "documents": counted.documents,
        "chunks": counted.chunks,
        # Progressive indexing: searchable by keyword only until embedded.
        "pending_chunks": counted.pending_chunks,
        "pending_seconds": counted.pending_seconds,
        "corpora": [
            {
                "name": c.name,
                "documents": c.documents,
                "chunks": c.chunks,
                "pending_chunks": c.pending_chunks,
                "searched": c.name in searched,
            }
            for c in stats.corpora
        ],
    }
    broken = guard.readable(sorted(service.index.broken_corpora))
    if broken:  # names only: the reasons can name files
        body["broken_corpora"] = broken
    return body
