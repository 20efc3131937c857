"""The storage boundary: what :class:`~guaipeca.index.Index` needs from one corpus's store.

Two implementations satisfy it: :class:`~guaipeca.search.corpus.Corpus` (embedded: SQLite
catalog + vector file + tantivy, in ``data_dir``) and
:class:`~guaipeca.search.qdrant_corpus.QdrantCorpus` (a Qdrant server, cluster or
qdrant-client's local mode). ``Index`` only calls what is listed here, so a backend that
passes the contract tests (``tests/qdrant/``) is interchangeable with the embedded one.

A :class:`Backend` opens, lists and drops corpora; ``None`` in ``Index`` means the embedded
layout under the index folder (the default, unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import GuaipecaError
from .binary import DenseScan

if TYPE_CHECKING:
    from ..config import StorageSettings
    from ..lexical import Analyzer
    from ..store import ChunkRow, DocRow
    from ..types import CorpusStats
    from .corpus import PreparedDocument

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "CatalogReader",
    "CorpusStore",
    "LexicalStats",
    "open_backend",
]

F32 = npt.NDArray[np.float32]


class BackendUnavailableError(GuaipecaError):
    """The storage server cannot be reached (down, timed out, refused): retry later."""


@runtime_checkable
class CatalogReader(Protocol):
    """Document-level reads (the embedded backend's SQLite catalog has these methods)."""

    def document(self, doc_id: str) -> DocRow | None: ...

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]: ...

    def list_documents(
        self, *, where: Mapping[str, Any] | None, corpus: str, limit: int, offset: int
    ) -> list[tuple[str, str | None, int, int, dict[str, Any]]]: ...

    def source_states(
        self,
    ) -> list[tuple[str, str | None, str | None, int | None, int | None]]: ...


@runtime_checkable
class LexicalStats(Protocol):
    """BM25 statistics for rerankers (the embedded backend's tantivy index has this)."""

    def doc_freqs(self, tokens: Iterable[str]) -> tuple[int, dict[str, int]]: ...


@runtime_checkable
class CorpusStore(Protocol):
    """One named corpus: writes, retrieval (dense, BM25) and reads, kept consistent.

    Chunk keys (``chunk_pk``) are positive integers, never reused; ``dense`` and ``keyword``
    return ``(chunk_pk, score)`` best first with ties broken by the smaller key, and ``where``
    is the filter dialect of :mod:`guaipeca.store.filters` (already validated by the caller).
    """

    name: str
    language: str
    analyzer: Analyzer

    @property
    def catalog(self) -> CatalogReader: ...

    @property
    def lexical(self) -> LexicalStats: ...

    def known_vectors(self, hashes: Iterable[str]) -> dict[str, F32]: ...

    def stored_signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None: ...

    def write(self, docs: Sequence[PreparedDocument]) -> None: ...

    def delete(self, doc_ids: Sequence[str]) -> int: ...

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool: ...

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool: ...

    def compact(self) -> None: ...

    def dense(
        self,
        query: F32,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        scan: DenseScan = "exact",
    ) -> list[tuple[int, float]]:
        """Cosine top-``n``; ``scan`` is a speed hint (search/binary.py) a backend may ignore
        when its own index is already sub-linear."""
        ...

    def keyword(
        self, query: str, n: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float]]: ...

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]: ...

    def stats(self) -> CorpusStats: ...

    def release_memory(self) -> None:
        """Give back memory that the next search can rebuild cheaply (mapped pages)."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    """Where corpora live when they are not files under the index folder."""

    name: str

    def corpus_names(self) -> list[str]:
        """Corpora that exist in the backend.

        Raises:
            BackendUnavailableError: the backend cannot be reached.
        """
        ...

    def open_corpus(
        self, name: str, *, language: str | None, model: str, dim: int
    ) -> CorpusStore: ...

    def drop_corpus(self, name: str) -> None: ...

    def check(self) -> None:
        """Raise :class:`BackendUnavailableError` when the backend does not answer."""
        ...

    def close(self) -> None: ...


def open_backend(storage: StorageSettings) -> Backend | None:
    """The backend named by ``storage.backend``; ``None`` for the embedded default.

    Raises:
        ConfigError: the Qdrant extra is not installed.
        BackendUnavailableError: the Qdrant server cannot be reached.
    """
    if storage.backend == "embedded":
        return None
    from .qdrant_backend import QdrantBackend

    return QdrantBackend.from_settings(storage.qdrant)
