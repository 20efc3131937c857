"""MCP tools for agentic retrieval (§7.1): keyword, semantic and filtered search, reading
many chunks, reading around hits, and following entities from one document to the next.

Registered by :func:`~guaipeca.server.tools.server.build_server` next to the core tools, one
``register_*`` function per tool, with the same conventions: typed arguments become the input
schema, Pydantic models the output schema; library errors become one-line tool errors;
searches go through the server's search gate (concurrency cap and deadline); everything
blocking runs in a worker thread.
"""

import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field

from guaipeca import agentic
from guaipeca.agentic import CONTENT_TYPES, NeighborSpan, RelatedHit, build_filter, search_depth
from guaipeca.enrich import Enrichment
from guaipeca.index import MAX_QUERY_CHARS, MAX_TOP_K
from guaipeca.server.limits import SearchGate
from guaipeca.server.schema import MISSING_SHARDS_DOC, ChunkOut, HitOut
from guaipeca.server.service import Service
from guaipeca.server.tools.common import (
    READ_ONLY,
    TOOL_MAX_CHUNK_IDS,
    TOOL_MAX_TOP_K,
    WHERE_DOC,
    BudgetArg,
    Registrar,
    in_thread,
)
from guaipeca.store import partial
from guaipeca.types import Hit, Hits, SearchMode

__all__ = [
    "register_filtered_search",
    "register_find_related",
    "register_keyword_and_semantic_search",
    "register_keyword_search",
    "register_read_chunk",
    "register_read_neighbors",
    "register_semantic_search",
]

T = TypeVar("T")


# -- output models -----------------------------------------------------------------------
class EnrichmentOut(BaseModel):
    """What indexing extracted from a chunk (locally, and by an LLM when configured)."""

    keywords: list[str] = Field(description="key phrases, lower-case, best first")
    entities: list[str] = Field(description="names, acronyms, organisations, places...")
    dates: list[str] = Field(description="dates mentioned: YYYY-MM-DD, YYYY-MM or YYYY")
    content_types: list[str] = Field(description="table, code, list, heading, text")
    context: str | None = Field(None, description="LLM: where the chunk sits in its document")
    questions: list[str] = Field(default_factory=list, description="LLM: questions it answers")
    source: str = Field(description="local, or llm when an LLM contributed")


class AgentSearchOut(BaseModel):
    query: str
    mode: str
    filter: dict[str, Any] | None = Field(description="the filter applied (null: none)")
    count: int
    hits: list[HitOut]
    missing_shards: list[str] = Field(default_factory=list, description=MISSING_SHARDS_DOC)


class EnrichedChunkOut(ChunkOut):
    enrichment: EnrichmentOut | None = Field(
        description="keywords, entities and dates of the chunk (null: indexed without)"
    )


class EnrichedChunksOut(BaseModel):
    chunks: list[EnrichedChunkOut]


class SpanOut(BaseModel):
    """Consecutive chunks of one document: the exact text document[start:end]."""

    corpus: str
    doc_id: str
    source_path: str | None
    heading_path: list[str] = Field(description="heading path of the span's first chunk")
    start: int = Field(description="character offset of the span in the document")
    end: int = Field(description="character offset where the span ends (exclusive)")
    first_position: int = Field(description="position of the first chunk in the document")
    last_position: int = Field(description="position of the last chunk")
    page_start: int | None
    page_end: int | None
    chunk_ids: list[str] = Field(description="every chunk in the span, in document order")
    requested: list[str] = Field(description="the requested chunk ids this span contains")
    text: str


class NeighborsOut(BaseModel):
    window: int
    spans: list[SpanOut]


class RelatedHitOut(HitOut):
    shared_entities: list[str] = Field(description="entities of the seeds found in this chunk")
    shared_keywords: list[str] = Field(description="key phrases of the seeds found here")


class RelatedOut(BaseModel):
    seeds: list[str] = Field(description="the chunk ids followed")
    query: str | None
    entities: list[str] = Field(description="the seeds' entities that were followed")
    keywords: list[str] = Field(description="the seeds' key phrases that were followed")
    count: int
    hits: list[RelatedHitOut]
    missing_shards: list[str] = Field(default_factory=list, description=MISSING_SHARDS_DOC)


def enrichment_out(e: Enrichment | None) -> EnrichmentOut | None:
    if e is None:
        return None
    return EnrichmentOut(
        keywords=list(e.keywords),
        entities=list(e.entities),
        dates=list(e.dates),
        content_types=list(e.content_types),
        context=e.context,
        questions=list(e.questions),
        source=e.source,
    )


# -- argument types ----------------------------------------------------------------------
_Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look for: a question or keywords, in any language.",
    ),
]
_After = Annotated[
    int,
    Field(ge=1, le=TOOL_MAX_TOP_K, description="Results returned (after fusion/reranking)."),
]
_Before = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_TOP_K,
        description="Candidates handed to the reranker (default: the server's "
        "search.top_k_before); at least top_k_after.",
    ),
]
_Corpora = Annotated[
    list[str] | None,
    Field(
        min_length=1,
        max_length=100,
        description="Only these corpora; default: every configured one.",
    ),
]
_Where = Annotated[dict[str, Any] | None, Field(description=WHERE_DOC)]
_Rerank = Annotated[
    bool | None,
    Field(
        description="Reorder the best top_k_before candidates by query-term coverage and "
        "proximity before keeping top_k_after (default: the server's search.rerank)."
    ),
]
_ChunkIds = Annotated[
    str | Annotated[list[str], Field(min_length=1, max_length=TOOL_MAX_CHUNK_IDS)],
    Field(description=f"One chunk id ('corpus:number') or a list of up to {TOOL_MAX_CHUNK_IDS}."),
]
_Terms = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=200)]] | None,
    Field(max_length=20),
]

_Keywords = Annotated[
    _Terms,
    Field(
        description="Each must be in one of the chunk's key phrases "
        "(lower-case substring: 'cancer' matches 'breast cancer')."
    ),
]
_Entities = Annotated[
    _Terms,
    Field(
        description="Each must be one of the chunk's named entities, ignoring case "
        "and accents ('sao paulo' matches 'São Paulo'; 'BRCA' matches 'BRCA1')."
    ),
]
_ContentTypes = Annotated[
    _Terms,
    Field(
        description=f"Any of: {', '.join(CONTENT_TYPES)} (what the chunk holds), or "
        "file extensions such as 'pdf' or '.docx'."
    ),
]
_DateFrom = Annotated[
    str | None,
    Field(
        pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$",
        description="A date mentioned in the chunk is on or after this "
        "(YYYY, YYYY-MM or YYYY-MM-DD).",
    ),
]
_DateTo = Annotated[
    str | None,
    Field(
        pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$",
        description="... and on or before this (inclusive; 2024-03 takes the whole month).",
    ),
]


def _check_chunk_ids(service: Service, chunk_ids: str | list[str]) -> None:
    """Chunk ids of corpora the caller may not read are missing (server/guard.py)."""
    ids = [chunk_ids] if isinstance(chunk_ids, str) else list(dict.fromkeys(chunk_ids))
    service.guard.chunk_ids(ids, service.index.get_chunk, agentic.missing_chunks)


def _default_k(service: Service) -> int:
    return min(service.settings.search.top_k, TOOL_MAX_TOP_K)


def _search_out(
    service: Service, query: str, mode: str, where: dict[str, Any] | None, hits: Hits
) -> AgentSearchOut:
    """A search tool's result: the search as run, its hits, and the shards it missed."""
    return AgentSearchOut(
        query=query,
        mode=mode,
        filter=where,
        count=len(hits),
        hits=_hits_out(service, hits),
        missing_shards=list(hits.missing_shards),
    )


def _hits_out(service: Service, hits: list[Hit]) -> list[HitOut]:
    return [service.hit_out(h) for h in hits]


async def _mode_search(
    service: Service,
    gate: SearchGate,
    mode: SearchMode,
    query: str,
    top_k_after: int,
    top_k_before: int | None,
    rerank: bool | None,
    corpora: list[str] | None,
    where: dict[str, Any] | None,
    budget: int | None = None,
) -> AgentSearchOut:
    """Run one mode's search under the gate (cap and deadline) and shape its answer."""
    # Cancellable: past the deadline the search stops at its next checkpoint and frees its slot.
    scope = service.scope(corpora)
    hits = await gate.run_cancellable(
        lambda cancel: agentic.mode_search(
            service.index,
            mode,
            query,
            top_k_before,
            top_k_after,
            rerank=rerank,
            corpora=scope,
            where=where,
            cancel=cancel,
            budget=budget,
        )
    )
    return _search_out(service, query, mode, where, hits)


def register_keyword_search(tool: Registrar, service: Service, gate: SearchGate) -> None:
    """Registers the ``keyword_search`` tool."""
    default_k = _default_k(service)

    @tool("Keyword search", links=True, **READ_ONLY)
    async def keyword_search(
        query: _Query,
        top_k_after: _After = default_k,
        top_k_before: _Before = None,
        rerank: _Rerank = None,
        corpora: _Corpora = None,
        where: _Where = None,
        budget: BudgetArg = None,
    ) -> AgentSearchOut:
        """Exact-term search (BM25 with the corpus language's stemming): best for names,
        codes, identifiers, rare words and quoted phrases. Returns hits like search.

        Use semantic_search when the words may differ from the documents' (paraphrases,
        another language), and filtered_search to narrow by entity, keyword or date.
        """
        return await _mode_search(
            service, gate, "keyword", query, top_k_after, top_k_before, rerank, corpora, where,
            budget,
        )  # fmt: skip


def register_keyword_and_semantic_search(
    tool: Registrar, service: Service, gate: SearchGate
) -> None:
    """Registers the ``keyword_and_semantic_search`` tool."""
    default_k = _default_k(service)

    @tool("Keyword and semantic search", links=True, **READ_ONLY)
    async def keyword_and_semantic_search(
        query: _Query,
        top_k_after: _After = default_k,
        top_k_before: _Before = None,
        rerank: _Rerank = None,
        corpora: _Corpora = None,
        where: _Where = None,
        budget: BudgetArg = None,
    ) -> AgentSearchOut:
        """Keywords and meaning fused (hybrid), with top_k_before/top_k_after: the same
        ranking as search with mode hybrid, under A-RAG-OG's name for its default tool.
        Returns hits like search.

        Use keyword_search for exact names or codes, semantic_search for paraphrases.
        """
        return await _mode_search(
            service, gate, "hybrid", query, top_k_after, top_k_before, rerank, corpora, where,
            budget,
        )  # fmt: skip


def register_semantic_search(tool: Registrar, service: Service, gate: SearchGate) -> None:
    """Registers the ``semantic_search`` tool."""
    default_k = _default_k(service)

    @tool("Semantic search", links=True, **READ_ONLY)
    async def semantic_search(
        query: _Query,
        top_k_after: _After = default_k,
        top_k_before: _Before = None,
        rerank: _Rerank = None,
        corpora: _Corpora = None,
        where: _Where = None,
        budget: BudgetArg = None,
    ) -> AgentSearchOut:
        """Meaning-based search (embeddings only): finds passages that say the same thing
        in other words. Returns hits like search.

        Use keyword_search for exact names or codes; search (hybrid) is the best default.
        """
        return await _mode_search(
            service, gate, "dense", query, top_k_after, top_k_before, rerank, corpora, where,
            budget,
        )  # fmt: skip


def register_filtered_search(tool: Registrar, service: Service, gate: SearchGate) -> None:
    """Registers the ``filtered_search`` tool."""
    idx = service.index
    default_k = _default_k(service)
    default_mode = service.settings.search.mode

    @tool("Filtered search", links=True, **READ_ONLY)
    async def filtered_search(
        query: _Query,
        keywords: _Keywords = None,
        entities: _Entities = None,
        content_types: _ContentTypes = None,
        date_from: _DateFrom = None,
        date_to: _DateTo = None,
        where: _Where = None,
        mode: Annotated[
            Literal["hybrid", "dense", "keyword"],
            Field(description="hybrid (default), keyword (BM25) or dense (meaning)."),
        ] = default_mode,
        top_k_after: _After = default_k,
        top_k_before: _Before = None,
        rerank: _Rerank = None,
        corpora: _Corpora = None,
        budget: BudgetArg = None,
    ) -> AgentSearchOut:
        """Search only inside chunks that match conditions on what indexing extracted
        from them — keywords, named entities, dates, content type — and on metadata
        (where). All conditions are AND-ed and applied before ranking, so results are
        exact, not post-filtered.

        Use it to narrow a broad topic ("only chunks naming the FDA between 2015 and
        2020", "only tables"). Returns hits like search plus the filter it applied.
        """
        combined = build_filter(
            keywords=keywords,
            entities=entities,
            content_types=content_types,
            date_from=date_from,
            date_to=date_to,
            where=where,
        )
        hits = await gate.run_cancellable(
            lambda cancel: idx.search(
                query,
                mode=mode,
                where=combined,
                corpora=service.scope(corpora),
                **search_depth(idx, top_k_before, top_k_after),
                rerank=rerank,
                cancel=cancel,
                budget=budget,
            )
        )
        return _search_out(service, query, mode, combined, hits)


def register_read_chunk(tool: Registrar, service: Service) -> None:
    """Registers the ``read_chunk`` tool."""
    idx = service.index

    @tool("Read chunks with their entities", links=True, **READ_ONLY)
    async def read_chunk(chunk_ids: _ChunkIds) -> EnrichedChunksOut:
        """Read whole chunks by id (several at once), in the order given, each with the
        keywords, entities and dates extracted from it.

        An unknown id makes the whole call fail and names it. Use read_neighbors for the
        text around a chunk and find_related to follow its entities elsewhere.
        """

        def read() -> EnrichedChunksOut:
            _check_chunk_ids(service, chunk_ids)
            chunks = agentic.read_chunks(idx, chunk_ids)
            extra = agentic.enrichment(idx, [c.chunk_id for c in chunks])
            return EnrichedChunksOut(
                chunks=[
                    EnrichedChunkOut(
                        **service.chunk_out(c).model_dump(),
                        enrichment=enrichment_out(extra.get(c.chunk_id)),
                    )
                    for c in chunks
                ]
            )

        return await in_thread(read)


def register_read_neighbors(tool: Registrar, service: Service) -> None:
    """Registers the ``read_neighbors`` tool."""
    idx = service.index

    @tool("Read around chunks", links=True, **READ_ONLY)
    async def read_neighbors(
        chunk_ids: _ChunkIds,
        window: Annotated[
            int, Field(ge=0, le=50, description="Chunks to add on each side of each chunk.")
        ] = 1,
    ) -> NeighborsOut:
        """The text around chunks: each chunk with `window` chunks before and after it,
        in document order. Windows of one document that overlap or touch are merged, so
        each span is one exact slice of the document (start/end offsets, every chunk id).

        Use it when a hit is cut mid-argument, a table continues, or the answer needs
        the preceding definition.
        """

        def read() -> NeighborsOut:
            _check_chunk_ids(service, chunk_ids)
            spans = agentic.read_neighbors(idx, chunk_ids, window)
            return NeighborsOut(window=window, spans=[_span_out(service, sp) for sp in spans])

        return await in_thread(read)


def _telling_missing(
    run: Callable[[threading.Event], T],
) -> Callable[[threading.Event], tuple[T, list[str]]]:
    """``run``, and the shards its searches missed (``storage.postgres.partial_results``)."""

    def collected(cancel: threading.Event) -> tuple[T, list[str]]:
        with partial.collecting() as missing:
            return run(cancel), missing

    return collected


def register_find_related(tool: Registrar, service: Service, gate: SearchGate) -> None:
    """Registers the ``find_related`` tool."""
    idx = service.index
    default_k = _default_k(service)

    @tool("Find related chunks", links=True, **READ_ONLY)
    async def find_related(
        chunk_ids: _ChunkIds,
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="Optional: what the agent is after, to steer the result.",
            ),
        ] = None,
        top_k_after: _After = default_k,
        top_k_before: _Before = None,
        corpora: _Corpora = None,
        exclude: Annotated[
            list[str] | None,
            Field(
                max_length=1000,
                description="Chunk ids the agent already has (left out of the results).",
            ),
        ] = None,
        same_document: Annotated[
            bool, Field(description="Also return chunks of the seeds' own documents.")
        ] = False,
    ) -> RelatedOut:
        """Chunks in other documents that share the given chunks' named entities and key
        phrases — to follow a person, organisation, gene, law or topic from one document
        to the next, even where the original question's words do not appear. Each hit
        says which entities and key phrases it shares. Call it again on its results to
        go further (multi-hop); pass what you already have in exclude.
        """

        seeds = [chunk_ids] if isinstance(chunk_ids, str) else list(dict.fromkeys(chunk_ids))

        def run(cancel: threading.Event) -> tuple[list[RelatedHit], dict[str, Enrichment | None]]:
            _check_chunk_ids(service, seeds)
            scope = service.scope(corpora)
            if scope == []:  # nothing readable to search (an empty list is every corpus there)
                return [], agentic.enrichment(idx, seeds)
            found = agentic.find_related(
                idx,
                seeds,
                query,
                top_k_after=top_k_after,
                top_k_before=top_k_before,
                corpora=scope,
                exclude=exclude or (),
                same_document=same_document,
                cancel=cancel,
            )
            return found, agentic.enrichment(idx, seeds)

        (related, extra), missing = await gate.run_cancellable(_telling_missing(run))
        entities = list(dict.fromkeys(n for e in extra.values() if e for n in e.entities[:12]))
        keywords = list(dict.fromkeys(k for e in extra.values() if e for k in e.keywords[:8]))
        return RelatedOut(
            seeds=seeds,
            query=query,
            entities=entities,
            keywords=keywords,
            count=len(related),
            missing_shards=missing,
            hits=[
                RelatedHitOut(
                    **service.hit_out(r.hit).model_dump(),
                    shared_entities=list(r.shared_entities),
                    shared_keywords=list(r.shared_keywords),
                )
                for r in related
            ],
        )


def _span_out(service: Service, sp: NeighborSpan) -> SpanOut:
    return SpanOut(
        corpus=sp.corpus,
        doc_id=sp.doc_id,
        source_path=service.relative_path(sp.corpus, sp.source_path),
        heading_path=list(sp.heading_path),
        start=sp.start,
        end=sp.end,
        first_position=sp.first_position,
        last_position=sp.last_position,
        page_start=sp.page_start,
        page_end=sp.page_end,
        chunk_ids=list(sp.chunk_ids),
        requested=list(sp.requested),
        text=sp.text,
    )
