"""Guaipeca: self-hosted hybrid retrieval on one CPU — exact, citable search over your own
documents, as a library, a CLI and an MCP server.

>>> from guaipeca import Index
>>> index = Index()                      # in memory; Index("folder") keeps it on disk
>>> index.add_documents({"a": "# Title\\n\\nSome text."})        # doctest: +SKIP
>>> hits = index.search("text", top_k=5)                        # doctest: +SKIP
"""

from guaipeca.config import EngineSettings
from guaipeca.errors import (
    ConfigError,
    GuaipecaError,
    IndexCorruptError,
    IndexLockedError,
    InvalidArgumentError,
    InvalidFilterError,
    ModelError,
    NotFoundError,
)
from guaipeca.index import Index
from guaipeca.types import (
    AddReport,
    Chunk,
    Document,
    DocumentInfo,
    Hit,
    IndexStats,
    NewDocument,
    ScoreParts,
)

__version__ = "0.1.0"

__all__ = [
    "AddReport",
    "Chunk",
    "ConfigError",
    "Document",
    "DocumentInfo",
    "EngineSettings",
    "GuaipecaError",
    "Hit",
    "Index",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexStats",
    "InvalidArgumentError",
    "InvalidFilterError",
    "ModelError",
    "NewDocument",
    "NotFoundError",
    "ScoreParts",
    "__version__",
]
