"""Plain data that crosses layers: chunk spans, stored chunks, documents and search hits.

Leaf module: imports nothing else from the package.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

SearchMode = Literal["hybrid", "dense", "keyword"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "dense", "keyword")
ReturnMode = Literal["chunks", "documents", "auto", "documents_if_fit"]
RETURN_MODES: tuple[ReturnMode, ...] = ("chunks", "documents", "auto", "documents_if_fit")
Fusion = Literal["auto", "combmnz", "rrf", "zscore", "minmax", "dbsf"]
FUSIONS: tuple[Fusion, ...] = ("auto", "combmnz", "rrf", "zscore", "minmax", "dbsf")
#: Request shapes of HTTP rerankers (search/rerank_http.py); auto: detected on first call.
RerankApi = Literal["auto", "cohere", "jina", "tei", "vllm", "infinity"]
RERANK_APIS: tuple[RerankApi, ...] = ("auto", "cohere", "jina", "tei", "vllm", "infinity")
#: Longest document id (a folder scan's ids are relative paths).
MAX_DOC_ID_CHARS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkLocation:
    """Where a chunk lies in its document, and its text: the fields every chunk record shares.

    The records built on it differ for a reason: :class:`ChunkSpan` is what the chunker cuts
    (checked), :class:`Chunk` a stored chunk as the public API shows it, :class:`Hit` a
    chunk and how it scored, and ``store.contract.ChunkRow`` a chunk as a store keeps it.
    """

    start: int
    end: int
    #: Exactly ``document.text[start:end]``.
    text: str
    #: The chunk's number within its document, from 0.
    position: int
    #: Document title and enclosing "##" section (what ``section_id`` groups by).
    heading_path: tuple[str, ...]
    section_id: str
    page_start: int | None = None
    page_end: int | None = None
    #: Every heading level down to the chunk (``heading_path`` keeps title + "##" section).
    heading_trail: tuple[str, ...] = ()
    #: The header row of the table the chunk's first table row belongs to (None: no table);
    #: a chunk may start in the middle of its table.
    table_header: str | None = None


#: The names of :class:`ChunkLocation`'s fields.
_LOCATION = tuple(f.name for f in fields(ChunkLocation))


def location_of(chunk: ChunkLocation) -> dict[str, Any]:
    """The shared fields of any chunk record, as keywords to build another kind from it."""
    return {name: getattr(chunk, name) for name in _LOCATION}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkSpan(ChunkLocation):
    """One chunk as the chunker cuts it: an exact ``[start, end)`` span of the canonical text.

    Its own type because it is checked: the write path trusts that the text fills its span.
    """

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad span [{self.start}, {self.end})")
        if len(self.text) != self.end - self.start:
            raise ValueError("chunk text length does not match its span")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk(ChunkLocation):
    """A stored chunk, as returned by ``Index.get_chunk`` and ``Index.neighbors``."""

    #: "corpus:number"; what ``Index.get_chunk`` takes.
    chunk_id: str
    corpus: str
    doc_id: str
    source_path: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The chunk's text was read with OCR (from a scanned page or an image).
    ocr: bool = False


@dataclass(frozen=True, slots=True)
class ScoreParts:
    """Where a hit's score came from. ``None`` means that retriever did not return the chunk."""

    dense: float | None = None
    lexical: float | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    rerank: float | None = None


@dataclass(frozen=True, slots=True)
class ListExplanation:
    """One retriever's part in a hit's fused score: ``contribution = weight * normalised``.
    ``rank`` (1-based) and ``raw`` (cosine, BM25) are None when that list did not return the
    chunk; ``normalised`` is then what the fusion gives a missing chunk."""

    rank: int | None
    raw: float | None
    normalised: float
    weight: float
    contribution: float


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a hit scored what it did (``Index.search(explain=True)``).

    ``fused = combine(sum of the lists' contributions)`` by ``formula``, and ``score =
    fused * corpus_weight`` is the hit's score unless a reranker re-scored it afterwards
    (``reranked``; the hit's ``scores.rerank`` then says by how much). A single-retriever
    search (``fusion`` ``dense`` or ``keyword``) has one list, its raw score the fused one."""

    fusion: str
    formula: str
    dense: ListExplanation | None
    keyword: ListExplanation | None
    dense_weight_note: str
    fused: float
    corpus_weight: float
    score: float
    reranked: bool = False
    #: Set when the fused score was 0 (min-max gives a list's last candidate 0): the score
    #: shown instead, half the lowest positive score of the search (the order is the same).
    shown_floor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        def part(p: ListExplanation | None) -> dict[str, Any] | None:
            return None if p is None else {f.name: getattr(p, f.name) for f in fields(p)}

        return {
            "fusion": self.fusion,
            "formula": self.formula,
            "dense": part(self.dense),
            "keyword": part(self.keyword),
            "dense_weight_note": self.dense_weight_note,
            "fused": self.fused,
            "corpus_weight": self.corpus_weight,
            "score": self.score,
            "reranked": self.reranked,
            "shown_floor": self.shown_floor,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit(Chunk):
    """One search result: a stored chunk, how it scored, and a snippet to show."""

    score: float
    scores: ScoreParts
    snippet: str
    # False while the chunk waits for its vector (progressive indexing): it was found by
    # keyword only, and dense search cannot see it yet.
    embedded: bool = True
    # The query terms' matches as [start, end) offsets into ``text``.
    highlights: tuple[tuple[int, int], ...] = ()
    #: Set when the HTTP reranker failed for this search: why, in one line. The hits then
    #: keep the fused order (and fused scores).
    rerank_error: str | None = None
    #: The text stops before the end of its document or section (a search's character
    #: budget): ``text`` is still exactly ``document[start:end]``; read on from ``end``.
    truncated: bool = False
    #: How the score was made, when the search asked for it (``explain=True``).
    explanation: Explanation | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (tuples become lists); ``explanation`` only when asked for."""
        out = {
            "chunk_id": self.chunk_id,
            "corpus": self.corpus,
            "doc_id": self.doc_id,
            "source_path": self.source_path,
            "heading_path": list(self.heading_path),
            "heading_trail": list(self.heading_trail),
            "section_id": self.section_id,
            "table_header": self.table_header,
            "ocr": self.ocr,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "start": self.start,
            "end": self.end,
            "position": self.position,
            "score": self.score,
            "scores": {
                "dense": self.scores.dense,
                "lexical": self.scores.lexical,
                "dense_rank": self.scores.dense_rank,
                "lexical_rank": self.scores.lexical_rank,
                "rerank": self.scores.rerank,
            },
            "snippet": self.snippet,
            "highlights": [list(h) for h in self.highlights],
            "text": self.text,
            "metadata": self.metadata,
            "embedded": self.embedded,
            "rerank_error": self.rerank_error,
            "truncated": self.truncated,
        }
        if self.explanation is not None:
            out["explanation"] = self.explanation.to_dict()
        return out


class Hits(list[Hit]):
    """A search's hits, best first (a plain list of :class:`Hit` otherwise), and what the
    search could not see.

    ``missing_shards`` names each shard of a sharded corpus that did not answer when partial
    results were asked for (``storage.postgres.partial_results``), as
    ``shard 2 of 2 (PostgreSQL at host:5432/db)``: the hits then come from the other shards
    only. Empty (``partial`` false): the answer is complete.
    """

    missing_shards: tuple[str, ...]

    def __init__(self, hits: Iterable[Hit] = (), *, missing_shards: Iterable[str] = ()) -> None:
        super().__init__(hits)
        self.missing_shards = tuple(missing_shards)

    @property
    def partial(self) -> bool:
        """Whether shards were missing (the hits leave out what they hold)."""
        return bool(self.missing_shards)


@dataclass(frozen=True, slots=True)
class Document:
    """A whole stored document: its canonical text and metadata."""

    doc_id: str
    corpus: str
    text: str
    metadata: dict[str, Any]
    source_path: str | None
    chunk_count: int


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """Part of a stored document: ``text`` is the whole text's ``[offset:end]``, of
    ``chars`` characters in all (what :meth:`Index.read_document` returns)."""

    doc_id: str
    corpus: str
    text: str
    metadata: dict[str, Any]
    source_path: str | None
    chunk_count: int
    chars: int
    offset: int

    @property
    def end(self) -> int:
        return self.offset + len(self.text)

    @property
    def truncated(self) -> bool:
        """Whether text follows ``end``."""
        return self.end < self.chars


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A document's listing entry (no text)."""

    doc_id: str
    corpus: str
    source_path: str | None
    chars: int
    chunk_count: int
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document to add, with its own metadata and (for files) where it came from."""

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    source_path: str | None = None
    modified: float | None = None
    page_starts: tuple[int, ...] | None = None
    # The source file as it was read (for incremental indexing of folders).
    source_sha256: str | None = None
    source_size: int | None = None
    source_mtime_ns: int | None = None
    # Chunks and local enrichment computed ahead, in a worker process (``guaipeca.index.
    # plan_chunks``); used only when made for this very text and these settings.
    plan: Any = None


@dataclass(frozen=True, slots=True)
class SourceState:
    """What the index knows about a document's source file."""

    doc_id: str
    source_path: str | None
    sha256: str | None
    size: int | None
    mtime_ns: int | None


class SkippedFile(NamedTuple):
    """A file a folder sync did not index though nothing is wrong with it: its path, why
    (one line), and the kind of reason that groups it (``guaipeca.ingest.SKIP_KINDS``)."""

    path: str
    reason: str
    kind: str


@dataclass(frozen=True, slots=True)
class AddReport:
    """What one ``add_documents`` call did."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    metadata_updated: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    # Chunks committed for keyword search whose vectors come later (progressive indexing).
    chunks_pending: int = 0


@dataclass(frozen=True, slots=True)
class CorpusStats:
    name: str
    language: str
    documents: int
    chunks: int
    deleted_slots: int
    vector_bytes: int
    catalog_bytes: int
    lexical_bytes: int
    # Chunks searchable by keyword whose vectors are not written yet (progressive indexing).
    pending_chunks: int = 0
    # Estimated seconds until they are embedded (at the last measured rate); None: unknown.
    pending_seconds: float | None = None
    #: What the stored vectors are (provider, model, dimension, …; embed/identity.py).
    model: str = ""
    #: Why the vectors do not fit the configured model (then keyword search only), or None.
    model_mismatch: str | None = None


@dataclass(frozen=True, slots=True)
class IndexStats:
    path: str | None
    model: str
    dimension: int
    corpora: tuple[CorpusStats, ...]

    @property
    def documents(self) -> int:
        return sum(c.documents for c in self.corpora)

    @property
    def chunks(self) -> int:
        return sum(c.chunks for c in self.corpora)

    @property
    def pending_chunks(self) -> int:
        """Chunks searchable by keyword only, waiting for their vectors."""
        return sum(c.pending_chunks for c in self.corpora)

    @property
    def pending_seconds(self) -> float | None:
        """Estimated seconds until every pending chunk is embedded (None: unknown)."""
        if not self.pending_chunks:
            return 0.0
        parts = [c.pending_seconds for c in self.corpora if c.pending_chunks]
        return None if any(p is None for p in parts) else round(sum(p or 0.0 for p in parts), 1)
