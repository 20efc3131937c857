"""The ``search`` tool: hybrid, keyword or dense search with filters, sections and return modes."""

# No `from __future__ import annotations` here: the SDK evaluates each tool's annotations when
# it is registered, and one of them names a live local of register_search (the settings).
import threading
from typing import Annotated, Any, Literal

from pydantic import Field

from guaipeca.errors import InvalidArgumentError
from guaipeca.index import MAX_QUERY_CHARS
from guaipeca.server.limits import SearchGate
from guaipeca.server.schema import SearchOut
from guaipeca.server.service import Service
from guaipeca.server.tools.common import (
    READ_ONLY,
    TOOL_MAX_RESULT_CHARS,
    TOOL_MAX_TOP_K,
    TOOL_RESULT_CHARS,
    WHERE_DOC,
    BudgetArg,
    Registrar,
)
from guaipeca.types import Hits, ReturnMode, SearchMode

__all__ = ["register_search", "resolve_mode"]


def resolve_mode(mode: SearchMode, hybrid: bool | None, default: SearchMode) -> SearchMode:
    """The search mode: ``mode``, or the seed Guaipeca's ``hybrid`` switch (true: hybrid,
    false: dense) when given and ``mode`` is left at its ``default``.

    Raises:
        InvalidArgumentError: ``mode`` set to another mode than ``hybrid`` implies.
    """
    if hybrid is None:
        return mode
    implied: SearchMode = "hybrid" if hybrid else "dense"
    if mode not in (default, implied):
        raise InvalidArgumentError(
            f"hybrid={str(hybrid).lower()} means mode {implied!r}, but mode is {mode!r}: "
            "give one of them"
        )
    return implied


# The search tool's arguments, as its input schema shows them (defaults set at registration).
_Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look for: a question or keywords, in any language.",
    ),
]
_TopK = Annotated[int, Field(ge=1, le=TOOL_MAX_TOP_K, description="How many results to return.")]
_Corpora = Annotated[
    list[str] | None,
    Field(
        min_length=1,
        max_length=100,
        description="Search only these corpora (see list_folders); default: every "
        "configured corpus.",
    ),
]
_Mode = Annotated[
    Literal["hybrid", "dense", "keyword"],
    Field(
        description="hybrid: keywords and meaning fused (best in general); "
        "keyword: exact terms, names, codes (BM25); dense: meaning, paraphrases."
    ),
]
_Hybrid = Annotated[
    bool | None,
    Field(
        description="The seed Guaipeca's switch: true is mode hybrid, false is mode "
        "dense. Give mode or hybrid, not both."
    ),
]
_Where = Annotated[dict[str, Any] | None, Field(description=WHERE_DOC)]
_ReturnModes = Literal["chunks", "documents", "auto", "documents_if_fit"]
_SectionMode = Annotated[
    bool,
    Field(description="One result per section, with the whole section's text."),
]
_SectionFilter = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=2000,
        description="Search only inside one section: a section_id (from a hit or "
        "get_toc) or a heading prefix such as 'Manual > Installation' (of a hit's "
        "heading_path or its full heading_trail, e.g. 'Manual > Installation > Linux').",
    ),
]
_MaxChars = Annotated[
    int,
    Field(
        ge=1,
        le=TOOL_MAX_RESULT_CHARS,
        description="documents and section modes: most characters of text in all "
        "the hits together; a hit cut short has truncated: true (read on with "
        "get_document from its end).",
    ),
]


_Explain = Annotated[
    bool,
    Field(
        description="Say why each hit ranks where it does: each list's rank, raw and "
        "normalised score, the weights, the fused score and the corpus weight."
    ),
]


def _return_mode_field(max_chars: int) -> Any:
    """The ``return_mode`` argument's schema: its description names ``search.max_chars``."""
    return Field(
        description="chunks: the matching passages; documents: one result per "
        "document with its whole text; auto: the passages while their text together "
        f"stays under {max_chars} characters, else the documents (as the seed Guaipeca "
        "did); documents_if_fit: the documents when they fit together in "
        f"{max_chars} characters, else the passages (what auto did before)."
    )


async def _run_search(
    service: Service,
    gate: SearchGate,
    query: str,
    *,
    top_k: int,
    mode: SearchMode,
    corpora: list[str] | None,
    where: dict[str, Any] | None,
    return_mode: ReturnMode,
    section_mode: bool,
    section_filter: str | None,
    max_chars: int,
    explain: bool = False,
    budget: int | None = None,
) -> Hits:
    """One search through the gate, in a worker thread (scoping the corpora reads the
    index, so it runs there too)."""

    def run(cancel: threading.Event) -> Hits:
        return service.index.search(
            query,
            top_k=top_k,
            mode=mode,
            where=where,
            corpora=service.scope(corpora),
            return_mode=return_mode,
            section_mode=section_mode,
            section_filter=section_filter,
            max_chars=max_chars,
            cancel=cancel,
            explain=explain,
            budget=budget,
        )

    return await gate.run_cancellable(run)


def _search_out(
    service: Service,
    query: str,
    mode: SearchMode,
    return_mode: ReturnMode,
    section_mode: bool,
    hits: Hits,
    budget: int | None = None,
) -> SearchOut:
    """The tool's result: the search as run, its hits, and the shards it missed."""
    return SearchOut(
        query=query,
        mode=mode,
        return_mode=return_mode,
        section_mode=section_mode,
        budget=budget,
        count=len(hits),
        hits=[service.hit_out(h) for h in hits],
        missing_shards=list(hits.missing_shards),
    )


def register_search(tool: Registrar, service: Service, gate: SearchGate) -> None:
    """Registers the ``search`` tool."""
    s = service.settings.search
    default_top_k = min(s.top_k, TOOL_MAX_TOP_K)

    @tool("Search documents", links=True, **READ_ONLY)
    async def search(
        query: _Query,
        top_k: _TopK = default_top_k,
        corpora: _Corpora = None,
        mode: _Mode = s.mode,
        hybrid: _Hybrid = None,
        where: _Where = None,
        return_mode: Annotated[_ReturnModes, _return_mode_field(s.max_chars)] = "chunks",
        section_mode: _SectionMode = False,
        section_filter: _SectionFilter = None,
        max_chars: _MaxChars = TOOL_RESULT_CHARS,
        explain: _Explain = False,
        budget: BudgetArg = None,
    ) -> SearchOut:
        """Search the indexed documents and return the best passages, best first.

        Use it first for any question about the user's documents, and again with other
        words, a filter or section_filter to dig deeper. Each hit has chunk_id, corpus,
        doc_id, source_path (relative to its corpus folder), heading_path, heading_trail
        (every heading level), section_id, page_start/page_end, the character span
        start/end, score and its parts, a snippet with the query terms marked (and their
        offsets in 'highlights'), table_header for table rows, ocr for scanned text, and the
        passage text. Follow up with get_chunk, get_toc or get_document. Whole documents or
        sections come within max_chars characters in all: a hit cut short has truncated: true.
        In long documents, give a budget (characters) to get the best paragraphs and
        sentences that fit in it instead of whole chunks. A non-empty missing_shards means
        the hits leave out what those shards hold.
        """
        chosen = resolve_mode(mode, hybrid, s.mode)
        hits = await _run_search(
            service,
            gate,
            query,
            top_k=top_k,
            mode=chosen,
            corpora=corpora,
            where=where,
            return_mode=return_mode,
            section_mode=section_mode,
            section_filter=section_filter,
            max_chars=max_chars,
            explain=explain,
            budget=budget,
        )
        return _search_out(service, query, chosen, return_mode, section_mode, hits, budget)
