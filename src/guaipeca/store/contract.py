"""The storage boundary: what :class:`~guaipeca.index.Index` needs from one corpus's store.

Three implementations satisfy it: :class:`~guaipeca.store.embedded.corpus.Corpus` (embedded:
SQLite catalog + vector file + tantivy, in ``data_dir``),
:class:`~guaipeca.store.qdrant.corpus.QdrantCorpus` (a Qdrant server, cluster or
qdrant-client's local mode) and :class:`~guaipeca.store.postgres.corpus.PostgresCorpus`
(PostgreSQL + pgvector: primary, replica, shards). ``Index`` only calls what is listed here,
so a backend that passes the contract tests (``tests/store/qdrant/``, run against every
backend) is interchangeable with the embedded one.

A :class:`Backend` opens, lists and drops corpora; ``None`` in ``Index`` means the embedded
layout under the index folder (the default, unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from guaipeca.errors import ConfigError
from guaipeca.types import ChunkLocation, ChunkSpan, CorpusStats

if TYPE_CHECKING:
    from guaipeca.lexical import Analyzer

__all__ = [
    "Backend",
    "CatalogReader",
    "ChunkEnrichment",
    "ChunkRow",
    "CorpusStore",
    "DenseScan",
    "DocRow",
    "LexicalStats",
    "PreparedDocument",
    "is_corpus_name",
    "valid_corpus_name",
]

F32 = npt.NDArray[np.float32]

#: A chunk's enrichment as stored: its JSON (SPEC §8; None: none) and its (kind, term) pairs.
ChunkEnrichment = tuple[str | None, tuple[tuple[str, str], ...]]

#: How a dense search scans the vectors: all of them, sign bits first, or by corpus size.
DenseScan = Literal["exact", "binary", "auto"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def valid_corpus_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"corpus name {name!r:.70} is invalid: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def is_corpus_name(name: str) -> bool:
    """Whether ``name`` is a valid corpus name (a backend's listing skips anything else)."""
    return isinstance(name, str) and _NAME.match(name) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkRow(ChunkLocation):
    """A chunk as a store keeps it, within one corpus.

    Not a :class:`~guaipeca.types.Chunk`: a store knows its chunks by an integer key and a
    vector slot, and whether the vector is written yet; the public ``corpus:number`` id and
    the OCR flag (from the document's metadata) are made above it, by the index.
    """

    #: Positive, never reused (the number in the public chunk id).
    chunk_pk: int
    #: The chunk's row in the vector file (embedded store; Qdrant: its point id).
    slot: int
    doc_id: str
    source_path: str | None
    metadata: dict[str, Any]
    # False while the chunk waits for its vector (progressive indexing): keyword only.
    embedded: bool = True


@dataclass(frozen=True, slots=True)
class DocRow:
    doc_pk: int
    doc_id: str
    source_path: str | None
    text: str
    metadata: dict[str, Any]
    chunk_count: int


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    """A document ready to store: canonical text, chunks, and one vector per chunk."""

    doc_id: str
    text: str
    text_sha256: str
    metadata: Mapping[str, Any]
    source_path: str | None
    modified: float | None
    chunks: Sequence[ChunkSpan]
    embed_hashes: Sequence[str]
    vectors: F32
    source_state: tuple[str | None, int | None, int | None] = (None, None, None)
    # Per chunk: enrichment JSON and its (kind, term) pairs (SPEC §8); empty: none.
    enrichments: Sequence[ChunkEnrichment] = ()
    # Per chunk: the input still to embed when its vector comes later (progressive indexing;
    # its row in ``vectors`` is ignored), or None; empty: every vector is given.
    pending: Sequence[str | None] = ()


@runtime_checkable
class CatalogReader(Protocol):
    """Document-level reads (the embedded backend's SQLite catalog has these methods)."""

    def document(self, doc_id: str) -> DocRow | None: ...

    def document_part(self, doc_id: str, offset: int, limit: int) -> tuple[DocRow, int] | None:
        """The document with only ``text[offset:offset + limit]`` as its text, and the
        whole text's length in characters."""
        ...

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]: ...

    def page_span(self, doc_id: str) -> tuple[int | None, int | None]:
        """The first and last page any chunk of the document is on ((None, None): no
        pages), without reading the chunks' text."""
        ...

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
        """Cosine top-``n``; ``scan`` is a speed hint (store/embedded/binary.py) a backend
        may ignore when its own index is already sub-linear."""
        ...

    def keyword(
        self,
        query: str,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        phrase_weight: float = 0.0,
    ) -> list[tuple[int, float]]:
        """BM25 top-``n``; ``phrase_weight`` boosts adjacent query words found side by side
        where the backend keeps word positions (the embedded one; Qdrant ignores it)."""
        ...

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
