"""Guaipeca: self-hosted hybrid retrieval on one CPU — exact, citable search over your own
documents, as a library, a CLI and an MCP server.

>>> from guaipeca import Index
>>> index = Index()                      # in memory; Index("folder") keeps it on disk
>>> index.add_documents({"a": "# Title\\n\\nSome text."})        # doctest: +SKIP
>>> hits = index.search("text", top_k=5)                        # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

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
from guaipeca.types import (
    AddReport,
    Chunk,
    Document,
    DocumentInfo,
    DocumentPart,
    Explanation,
    Hit,
    Hits,
    IndexStats,
    ListExplanation,
    NewDocument,
    ScoreParts,
)

if TYPE_CHECKING:
    from guaipeca.config import EngineSettings
    from guaipeca.index import Index

    __version__: str


def __getattr__(name: str) -> Any:
    # Index and EngineSettings load on first use: importing the package (which every CLI
    # command does, even --help) then costs no numpy, pydantic or search engine. So does
    # the version: importlib.metadata takes ~30 ms, which a search does not need.
    if name == "__version__":
        global __version__
        from importlib.metadata import version

        # The one place the version is read: pyproject.toml sets it, the installed
        # metadata carries it.
        __version__ = version("guaipeca")
        return __version__
    if name == "Index":
        from guaipeca.index import Index

        return Index
    if name == "EngineSettings":
        from guaipeca.config import EngineSettings

        return EngineSettings
    raise AttributeError(f"module 'guaipeca' has no attribute {name!r}")


__all__ = [
    "AddReport",
    "Chunk",
    "ConfigError",
    "Document",
    "DocumentInfo",
    "DocumentPart",
    "EngineSettings",
    "Explanation",
    "GuaipecaError",
    "Hit",
    "Hits",
    "Index",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexStats",
    "InvalidArgumentError",
    "InvalidFilterError",
    "ListExplanation",
    "ModelError",
    "NewDocument",
    "NotFoundError",
    "ScoreParts",
    "__version__",
]
