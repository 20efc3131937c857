"""``guaipeca search``: search the index and print ranked hits (source, page, heading path,
character span, snippet), or every field as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from guaipeca.cli.context import current_settings, err, open_index, out
from guaipeca.config import MAX_TOP_K, LoadedSettings
from guaipeca.errors import GuaipecaError
from guaipeca.index.evidence import MAX_BUDGET
from guaipeca.types import SEARCH_MODES, Explanation, Hit, SearchMode

RETURN_MODE_HELP = (
    "chunks, documents, auto (chunks while they fit in search.max_chars, else documents) "
    "or documents_if_fit (documents when they fit, else chunks)."
)

if TYPE_CHECKING:
    from guaipeca.index import Index


TopKOption = Annotated[
    int | None,
    typer.Option(
        "--top-k",
        "-k",
        min=1,
        max=MAX_TOP_K,
        help="How many hits to print (default 5; with --budget: as many as fit).",
    ),
]
BudgetOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=MAX_BUDGET,
        help="Print the best evidence that fits in this many characters instead of "
        "whole chunks: paragraphs and sentences, best first, neighbours merged, the last "
        "cut around its best sentence (e.g. 2000 for a fact, 8000 to compare). --top-k "
        "then caps the number of spans.",
    ),
]
ModeOption = Annotated[
    str | None,
    typer.Option(
        help="hybrid (keywords and meaning), keyword (exact terms, no model) or dense "
        "(meaning) (default: search.mode, hybrid)."
    ),
]
#: The original Guaipeca's flags, kept as aliases.
HybridOption = Annotated[
    bool, typer.Option("--hybrid", help="The same as --mode hybrid (the original's flag).")
]
CorporaListOption = Annotated[
    str | None,
    typer.Option("--corpora", help="Corpora to search, comma-separated (the original's)."),
]


def _mode(mode: str | None, hybrid: bool) -> SearchMode | None:
    """The mode asked for (None: the config's), ``--hybrid`` being ``--mode hybrid``."""
    if hybrid and mode not in (None, "hybrid"):
        raise typer.BadParameter(f"--hybrid contradicts --mode {mode}", param_hint="--hybrid")
    if mode is not None and mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    return "hybrid" if hybrid else mode


def search(
    query: Annotated[str, typer.Argument(help="What to look for: a question or keywords.")],
    top_k: TopKOption = None,
    mode: ModeOption = None,
    hybrid: HybridOption = False,
    corpus: Annotated[
        list[str] | None,
        typer.Option("--corpus", "-c", help="Search only this corpus; repeat it for several."),
    ] = None,
    corpora_list: CorporaListOption = None,
    where: Annotated[
        str | None,
        typer.Option(help='A metadata filter as JSON, e.g. \'{"extension": "pdf", "page": 3}\'.'),
    ] = None,
    rerank: Annotated[
        bool | None,
        typer.Option(
            "--rerank/--no-rerank",
            help="Re-order the best candidates by query-term coverage and proximity "
            "(default: search.rerank).",
        ),
    ] = None,
    top_k_before: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000,
            help="How many candidates the reranker sees (default: top_k_before under search "
            "in the config).",
        ),
    ] = None,
    section_mode: Annotated[
        bool, typer.Option("--sections", help="One hit per section, with its whole text.")
    ] = False,
    return_mode: Annotated[str, typer.Option(help=RETURN_MODE_HELP)] = "chunks",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the hits as JSON, for scripts.")
    ] = False,
    budget: BudgetOption = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Say why each hit ranks where it does: each list's rank, raw and normalised "
            "score, the weights, the fused score and the corpus weight.",
        ),
    ] = False,
) -> None:
    """Search the index and print ranked hits with source, page, heading path and span."""
    chosen = _mode(mode, hybrid)  # checked before anything loads
    from guaipeca.store import parse_where_json

    filters = parse_where_json(where) if where else None
    loaded = current_settings()
    searched = chosen or loaded.settings.search.mode
    if corpora_list:  # the original's --corpora a,b
        corpus = [*(corpus or []), *(n.strip() for n in corpora_list.split(",") if n.strip())]
    idx = open_index(loaded, keyword_only=searched == "keyword")
    try:
        hits = idx.search(
            query,
            top_k=top_k if top_k is not None or budget is not None else 5,
            mode=searched,
            where=filters,
            corpora=_search_scope(loaded, idx, corpus),
            rerank=rerank,
            top_k_before=top_k_before,
            section_mode=section_mode,
            return_mode=return_mode,  # type: ignore[arg-type]  # checked by Index.search
            explain=explain,
            budget=budget,
        )
    finally:
        idx.close()
    for shard in hits.missing_shards:
        err.print(f"warning: partial results: {shard} did not answer; its chunks are left out")
    _print_hits(hits, as_json, whole=budget is not None)


def _search_scope(loaded: LoadedSettings, idx: Index, corpus: list[str] | None) -> list[str] | None:
    """The corpora a search covers: those named, else the configured ones that are indexed
    (None: all)."""
    from guaipeca.cli.corpora import search_scope

    if not idx.corpora and idx.broken_corpora:
        name, reason = next(iter(idx.broken_corpora.items()))
        raise GuaipecaError(f"corpus {name!r} cannot be used: {reason}")
    if not idx.corpora:
        raise GuaipecaError(
            f"nothing is indexed yet in {loaded.data_dir}; run 'guaipeca index' first"
        )
    scope = corpus or search_scope(loaded, idx)
    if scope == []:
        names = ", ".join(c.name for c in loaded.settings.corpora)
        raise GuaipecaError(
            f"no corpus of {loaded.source} ({names}) is indexed yet; run 'guaipeca index'"
        )
    return scope


def _print_hits(hits: list[Hit], as_json: bool, *, whole: bool = False) -> None:
    """The hits as text (``whole``: each span's full text, not its snippet) or JSON."""
    if as_json:
        out.print_verbatim(json.dumps([h.to_dict() for h in hits], ensure_ascii=False))
        return
    if not hits:
        out.print("no hits")
        return
    for rank, h in enumerate(hits, start=1):
        source = h.source_path or h.doc_id
        page = ""
        if h.page_start:
            page = f" p.{h.page_start}" + (f"-{h.page_end}" if h.page_end != h.page_start else "")
        ocr = "  (OCR)" if h.ocr else ""
        out.print(
            f"{rank}. {source}{page}  chars {h.start}-{h.end}  score {h.score:.4f}{ocr}",
        )
        trail = h.heading_trail or h.heading_path
        if trail:
            out.print("   " + " > ".join(trail))
        if h.table_header:
            out.print(f"   columns: {h.table_header}")
        if whole:
            out.print_verbatim("\n".join("   " + line for line in h.text.splitlines()))
        else:
            out.print(f"   {h.snippet}")
        if h.explanation is not None:
            for line in explanation_lines(h.explanation):
                out.print(f"   {line}")


def explanation_lines(e: Explanation) -> list[str]:
    """A hit's explanation as short lines: one per list, then how the score was made."""
    lines = []
    for name, part in (("dense", e.dense), ("keyword", e.keyword)):
        if part is None:
            continue
        found = "not returned" if part.rank is None else f"rank {part.rank}, raw {part.raw:.4f}"
        lines.append(
            f"{name}: {found}, normalised {part.normalised:.4f} x weight {part.weight:.4f} "
            f"= {part.contribution:.4f}"
        )
    if e.dense_weight_note:
        lines.append(f"dense weight: {e.dense_weight_note}")
    rerank = "; then reranked" if e.reranked else ""
    lines.append(
        f"{e.fusion}: {e.formula} = {e.fused:.4f}; x corpus weight {e.corpus_weight:g} "
        f"= {e.score:.4f}{rerank}"
    )
    return lines
