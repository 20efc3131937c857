"""What the MCP tools return: pydantic models that become each tool's output schema and the
result's ``structuredContent`` (server/tools/).

:class:`ChunkOut`, :class:`HitOut` and :class:`ScoresOut` are the wire form of
:class:`~guaipeca.types.Chunk`, :class:`~guaipeca.types.Hit` and
:class:`~guaipeca.types.ScoreParts`: the same field names (a test holds them to it), each
with the description a client's model reads. They are filled by name from those records
(:func:`chunk_out`, :func:`hit_out`), so no field list is written twice.
"""

from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, Field

from guaipeca.types import Chunk, Hit


class ScoresOut(BaseModel):
    """The parts of a hit's fused score."""

    dense: float | None = Field(
        None, description="similarity from the embedding retriever (null: not retrieved by it)"
    )
    lexical: float | None = Field(
        None, description="BM25 keyword score (null: not retrieved by it)"
    )
    dense_rank: int | None = Field(None, description="rank in the embedding retriever's list")
    lexical_rank: int | None = Field(None, description="rank in the keyword retriever's list")
    rerank: float | None = Field(None, description="reranker score, when reranking is on")


class ChunkOut(BaseModel):
    """One stored passage: an exact span of its document."""

    chunk_id: str = Field(description="'corpus:number'; pass it to get_chunk")
    corpus: str
    doc_id: str = Field(description="the document's id; pass it to get_document or get_toc")
    source_path: str | None = Field(
        description="the source file, relative to its corpus folder (null: added as text)"
    )
    heading_path: list[str] = Field(
        description="document title and enclosing '##' section (what section_id groups by)"
    )
    heading_trail: list[str] = Field(
        description="every heading level down to this chunk, e.g. ['Duck', 'Behaviour', "
        "'Feeding']; a prefix of it works as section_filter"
    )
    section_id: str = Field(description="shared by every chunk of one section")
    table_header: str | None = Field(
        None,
        description="for a chunk holding table rows: its table's header row (column names), "
        "which a chunk cut from the middle of a long table does not contain itself",
    )
    ocr: bool = Field(
        False, description="true when the text was read with OCR (a scanned page or an image)"
    )
    page_start: int | None = Field(description="first page (paged sources such as PDF)")
    page_end: int | None = Field(description="last page (paged sources such as PDF)")
    start: int = Field(description="character offset where the text starts in the document")
    end: int = Field(description="character offset where the text ends (exclusive)")
    position: int = Field(description="the chunk's number within its document, from 0")
    text: str
    metadata: dict[str, Any]


class ListExplanationOut(BaseModel):
    """One retriever's part in a fused score: contribution = weight x normalised."""

    rank: int | None = Field(description="rank in that list (null: not returned by it)")
    raw: float | None = Field(description="the retriever's own score: cosine or BM25")
    normalised: float = Field(description="the score after the fusion's normalisation")
    weight: float = Field(description="the list's weight in the fusion")
    contribution: float


class ExplanationOut(BaseModel):
    """Why a hit scored what it did: score = fused x corpus_weight (unless reranked)."""

    fusion: str = Field(description="combmnz, rrf, zscore, minmax, dbsf; dense or keyword")
    formula: str = Field(description="how the contributions make the fused score")
    dense: ListExplanationOut | None
    keyword: ListExplanationOut | None
    dense_weight_note: str = Field(description="why the dense weight is what it is")
    fused: float
    corpus_weight: float
    score: float
    reranked: bool = Field(description="a reranker re-scored the hit after fusion")
    shown_floor: float | None = Field(
        None,
        description="set when fused was 0 (last in every list that returned it): the score "
        "shown instead, half the search's lowest positive score (same order)",
    )


class HitOut(ChunkOut):
    """One search result."""

    score: float = Field(description="fused score; higher is better")
    scores: ScoresOut
    snippet: str = Field(
        description="plain text around the densest cluster of query terms, marked **like "
        "this** (a literal '**' of the text, or a '*' touching a marker, is escaped as "
        "'\\*')"
    )
    highlights: list[list[int]] = Field(
        default_factory=list,
        description="every query-term match as [start, end) character offsets into 'text'",
    )
    embedded: bool = Field(
        True,
        description="false while the chunk waits for its vector: found by keyword only, "
        "invisible to meaning (dense) search until embedded",
    )
    rerank_error: str | None = Field(
        None, description="why the reranker failed (the hits keep the fused order); else null"
    )
    truncated: bool = Field(
        False,
        description="the text stops before the end of its document or section (the "
        "search's max_chars); read on with get_document(offset=end)",
    )
    explanation: ExplanationOut | None = Field(
        None, description="with explain: true, how the score was made; else null"
    )


_Wire = TypeVar("_Wire", bound=BaseModel)


def _from_record(model: type[_Wire], record: Chunk, source_path: str | None) -> _Wire:
    """``model`` filled from the same-named attributes of ``record`` (validation turns
    tuples into lists and a nested record into its model), with ``source_path`` as shown
    to clients: relative to its corpus folder."""
    fields = {name: getattr(record, name) for name in model.model_fields}
    return model.model_validate({**fields, "source_path": source_path}, from_attributes=True)


def chunk_out(chunk: Chunk, source_path: str | None) -> ChunkOut:
    return _from_record(ChunkOut, chunk, source_path)


def hit_out(hit: Hit, source_path: str | None) -> HitOut:
    return _from_record(HitOut, hit, source_path)


#: What a search result's ``missing_shards`` means (the search tools share it).
MISSING_SHARDS_DOC: Final = (
    "shards of a sharded corpus that did not answer: the hits come from the other shards "
    "only (storage.postgres.partial_results); empty: the answer is complete"
)


class SearchOut(BaseModel):
    query: str
    mode: str
    return_mode: str
    section_mode: bool
    count: int
    hits: list[HitOut]
    #: The character budget the hits were packed into (None: whole chunks).
    budget: int | None = None
    missing_shards: list[str] = Field(default_factory=list, description=MISSING_SHARDS_DOC)


class ChunksOut(BaseModel):
    chunks: list[ChunkOut]


class DocumentOut(BaseModel):
    doc_id: str
    corpus: str
    source_path: str | None = Field(description="relative to the corpus folder")
    metadata: dict[str, Any]
    chunk_count: int
    chars: int = Field(description="length of the whole document text")
    offset: int = Field(description="where the returned text starts")
    end: int = Field(description="where the returned text ends (exclusive)")
    truncated: bool = Field(description="true when the document goes on after 'end'")
    next_offset: int | None = Field(description="offset for the next part (null: no more)")
    text: str


class DocumentInfoOut(BaseModel):
    doc_id: str
    corpus: str
    source_path: str | None = Field(description="relative to the corpus folder")
    filename: str = Field(description="the file's name (the last part of doc_id)")
    file_size: int | None = Field(description="bytes of the source file now (null: no file)")
    chars: int
    chunk_count: int
    metadata: dict[str, Any]


class DocumentListOut(BaseModel):
    documents: list[DocumentInfoOut]
    count: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page (null: no more)")


class TocNode(BaseModel):
    title: str
    level: int = Field(description="1 for '#', 2 for '##', ...")
    section_id: str = Field(description="pass as section_filter to search inside this section")
    chunk_id: str | None = Field(None, description="the chunk where this heading starts")
    chunks: int = Field(description="chunks directly under this heading")
    children: list["TocNode"] = Field(default_factory=list)


class DocumentTocOut(BaseModel):
    doc_id: str
    source_path: str | None = Field(description="relative to the corpus folder")
    structured: bool = Field(description="false when the document has no headings")
    chunks: int
    headings: list[TocNode] = Field(description="the top two levels of its headings")


class TocOut(BaseModel):
    doc_id: str | None = Field(description="the document (null: a corpus's listing)")
    corpus: str
    structured: bool = Field(description="false when the document has no headings")
    chunks: int
    headings: list[TocNode]
    documents: list[DocumentTocOut] | None = Field(
        None, description="asked for a corpus only: its documents with their top headings"
    )
    more_documents: bool = Field(False, description="the corpus holds more documents")


class FileProblem(BaseModel):
    file: str = Field(description="relative to the corpus folder")
    reason: str


class IndexSummary(BaseModel):
    corpus: str
    added: int
    changed: int
    unchanged: int
    removed: int
    failed: list[FileProblem] = Field(
        description="files not indexed because of an error (corrupt, unreadable), with why"
    )
    warnings: list[FileProblem]
    skipped: list[FileProblem] = Field(
        default_factory=list,
        description="files not indexed though nothing is wrong with them, with why (an "
        "unsupported type, empty or no text, too big, an image without OCR, a link out)",
    )
    chunks_embedded: int
    documents: int = Field(description="documents in the corpus after the run")
    chunks: int = Field(description="chunks in the corpus after the run")
    seconds: float


class IndexOut(BaseModel):
    corpora: list[IndexSummary]


class CorpusStatus(BaseModel):
    name: str
    topic: str
    language: str
    weight: float
    documents: int
    chunks: int
    pending_chunks: int = Field(
        0, description="chunks searchable by keyword only, waiting for their vectors"
    )
    pending_seconds: float | None = Field(
        0.0, description="estimated seconds until they are embedded (null: not known yet)"
    )
    configured: bool = Field(description="listed in the server's configuration")
    indexed: bool = Field(description="present in the index")
    searched: bool = Field(
        True,
        description="covered by a search that names no corpus, and counted in the totals "
        "(false: see note)",
    )
    upload_allowed: bool
    note: str | None = Field(
        None,
        description="why searches skip it: in the data folder but not in the configuration "
        "(with the command that drops it)",
    )
    model: str = Field(
        "", description="what its vectors are: provider, model, dimension, prefixes, weights hash"
    )
    model_mismatch: str | None = Field(
        None,
        description="why dense search is off (vectors of another model; keyword search works "
        "until 'guaipeca reembed'); null: none",
    )


class BrokenCorpus(BaseModel):
    name: str
    reason: str


class IndexingState(BaseModel):
    corpus: str
    seconds: float = Field(description="seconds since this run started")


class JobOut(BaseModel):
    """An upload accepted as a job (``GET /jobs/{id}``, ``status`` with ``job``)."""

    job: str
    kind: str = Field(description="what the job does: upload")
    state: Literal["running", "done", "failed"]
    started: float = Field(description="Unix time")
    finished: float | None = Field(None, description="Unix time (null: running)")
    status: int | None = Field(
        None, description="once ended: the HTTP status the upload's answer had (200: done)"
    )
    result: dict[str, Any] | None = Field(
        None, description="done: the upload's answer (as the upload tool returns it)"
    )
    error: str | None = Field(None, description="failed: why; nothing was written")


class StatusOut(BaseModel):
    version: str
    model: str
    dimension: int
    documents: int = Field(description="in the searched corpora (see corpora[].searched)")
    chunks: int = Field(description="in the searched corpora")
    pending_chunks: int = Field(
        0, description="chunks searchable by keyword only, waiting for their vectors"
    )
    pending_seconds: float | None = Field(
        0.0, description="estimated seconds until every pending chunk is embedded (null: unknown)"
    )
    corpora: list[CorpusStatus]
    broken: list[BrokenCorpus] = Field(description="corpora that cannot be used, and why")
    indexing: IndexingState | None = Field(description="the indexing run in progress, if any")
    backend: str = Field("embedded", description="storage backend: embedded, qdrant or postgres")
    backend_error: str | None = Field(
        None,
        description="why the storage server (Qdrant, PostgreSQL) cannot be reached; null: up",
    )
    job: JobOut | None = Field(
        None, description="the job asked for with the job argument (null: none asked for)"
    )


class FolderOut(BaseModel):
    name: str
    path: str = Field(description="the folder, with the home folder shown as ~")
    exists: bool
    topic: str
    weight: float
    language: str
    extensions: list[str]
    exclude: list[str]
    upload_allowed: bool


class UploadLimits(BaseModel):
    corpora: list[str] = Field(description="corpora that accept uploads")
    max_file_size: int = Field(description="bytes, after base64 decoding")
    allowed_extensions: list[str]
    auto_index: bool = Field(description="an uploaded file is indexed right away")


class FoldersOut(BaseModel):
    folders: list[FolderOut]
    upload: UploadLimits


class UploadOut(BaseModel):
    """A stored upload (state "done"), or one accepted as a job (state "running": only
    ``corpus``, ``job``, ``poll`` and ``note`` are set)."""

    state: Literal["done", "running"] = Field(
        "done",
        description="done: written (and indexed, as asked); running: not done within "
        "upload.answer_seconds, it goes on as a job (see job)",
    )
    corpus: str
    doc_id: str | None = Field(
        description="the file's path in the corpus folder: its document id (null: running)"
    )
    bytes: int | None = None
    sha256: str | None = None
    replaced: bool | None = Field(
        None, description="true when an existing file was overwritten (null: running)"
    )
    format: str | None = None
    warnings: list[str] = Field(default_factory=list, description="notes from converting the file")
    indexed: IndexSummary | None = Field(
        None, description="the indexing run (null: not indexed yet, or running)"
    )
    job: str | None = Field(
        None,
        description="running: the job's id; call status with job set to it for the outcome",
    )
    poll: str | None = Field(
        None, description="running: where HTTP clients read the job (GET, same identity)"
    )
    note: str | None = Field(None, description="running: how to follow the job")


class DeleteOut(BaseModel):
    corpus: str
    doc_id: str
    removed_from_index: bool
    file_deleted: bool = Field(description="true when the source file was deleted from disk")
