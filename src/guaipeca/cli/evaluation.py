"""``guaipeca eval``: nDCG@10, Recall@100 and MRR@10 of the configuration on a BEIR-format
data set, indexed into a temporary in-memory index (guaipeca.evaluate does the work)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from guaipeca.cli.context import current_settings, err, out, plural
from guaipeca.text.languages import language_name
from guaipeca.types import SEARCH_MODES

if TYPE_CHECKING:
    from guaipeca.embed.vector_cache import VectorCache
    from guaipeca.evaluate import BeirSet, EvalResult
    from guaipeca.index import Index


def eval_(
    folder: Annotated[Path, typer.Argument(help="A BEIR-format folder (corpus, queries, qrels).")],
    mode: Annotated[
        str,
        typer.Option(
            help="hybrid, dense or keyword; several joined by commas, or all: the set is "
            "indexed once and each mode scored on it."
        ),
    ] = "hybrid",
    split: Annotated[str, typer.Option(help="The qrels split: qrels/<split>.tsv.")] = "test",
    language: Annotated[
        str,
        typer.Option(
            help="Stemming and stopword language of the corpus: an ISO code (en, pt, pt-BR) "
            "or a Snowball name (english, portuguese)."
        ),
    ] = "english",
    limit_queries: Annotated[
        int | None,
        typer.Option(
            "--max-queries",
            "--limit-queries",
            min=1,
            help="Evaluate only the first N queries, for a quick look.",
        ),
    ] = None,
    max_docs: Annotated[
        int | None,
        typer.Option(
            "--max-docs",
            min=1,
            help="Index only N documents, for a quick look. The documents judged for the "
            "chosen queries are always kept, so scores run higher than on the whole set.",
        ),
    ] = None,
    top_k: Annotated[
        int, typer.Option("--top-k", min=1, max=1000, help="How many documents each query ranks.")
    ] = 100,
    vector_cache: Annotated[
        Path | None,
        typer.Option(
            "--vector-cache",
            file_okay=False,
            help="A folder that keeps the passage vectors between runs (one file pair per "
            "model): a second run of the same set and model embeds nothing.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the result as JSON (a list when several modes)."),
    ] = False,
) -> None:
    """Measure nDCG@10, Recall@100 and MRR@10 of your configuration on a BEIR data set."""
    from guaipeca.evaluate import load_beir

    modes = _modes(mode)
    try:
        language = language_name(language)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--language") from None
    beir = load_beir(folder, split=split, limit_queries=limit_queries, limit_docs=max_docs)
    idx, cache = _open_index(language, vector_cache)
    try:
        results, index_seconds, chunks = _run_eval(
            idx, beir, modes=modes, top_k=top_k, quiet=as_json
        )
    finally:
        idx.close()
        if cache is not None:
            cache.save()
    extra: dict[str, Any] = {
        "split": split,
        "language": language,
        "folder": str(folder),
        "chunks": chunks,
        "chunks_per_second": round(chunks / index_seconds, 2) if index_seconds > 0 else None,
    }
    if cache is not None:
        extra["vector_cache"] = {"found": cache.hits, "embedded": cache.misses}
    _report(results, index_seconds, extra, as_json=as_json)


def _open_index(language: str, vector_cache: Path | None) -> tuple[Index, VectorCache | None]:
    """An in-memory index with the configured model, behind the vector cache when given."""
    from guaipeca.embed import load_embedder
    from guaipeca.embed.vector_cache import VectorCache
    from guaipeca.index import Index

    loaded = current_settings()
    source = str(loaded.source) if loaded.source else None
    embedder = load_embedder(loaded.settings.embedding, source=source, data_dir=loaded.data_dir)
    cache = VectorCache(embedder, vector_cache) if vector_cache is not None else None
    idx = Index(
        embedder=embedder if cache is None else cache,
        settings=loaded.settings.engine(),
        language=language,
    )
    return idx, cache


def _report(
    results: list[EvalResult], index_seconds: float, extra: dict[str, Any], *, as_json: bool
) -> None:
    """Print each mode's result: a JSON object (a list of them for several modes), or a
    line each; the vector cache's counts on stderr."""
    rows = []
    for result in results:
        result.index_seconds = index_seconds
        rows.append({**result.to_dict(), **extra})
    if as_json:
        out.print_verbatim(json.dumps(rows[0] if len(rows) == 1 else rows, ensure_ascii=False))
        return
    for result in results:
        _print_result(result, index_seconds, label=f"{result.mode:<8} " if len(results) > 1 else "")
    if "vector_cache" in extra:
        counts = extra["vector_cache"]
        err.print(f"vector cache: {counts['found']} passages found, {counts['embedded']} embedded")


def _modes(raw: str) -> tuple[str, ...]:
    """``--mode``'s modes, in the order given (``all``: hybrid, keyword, dense)."""
    if raw.strip().lower() == "all":
        return ("hybrid", "keyword", "dense")
    modes = tuple(dict.fromkeys(m.strip().lower() for m in raw.split(",") if m.strip()))
    if not modes or any(m not in SEARCH_MODES for m in modes):
        raise typer.BadParameter(
            f"must be one of {', '.join(SEARCH_MODES)}, several joined by commas, or all",
            param_hint="--mode",
        )
    return modes


def _print_result(result: EvalResult, index_seconds: float, *, label: str) -> None:
    metrics = "  ".join(f"{name} {value:.4f}" for name, value in result.metrics.items())
    queries = f"{result.queries} {'query' if result.queries == 1 else 'queries'}"
    out.print(
        f"{label}{metrics}  ({queries}, {plural(result.documents, 'doc')}, "
        f"index {index_seconds:.1f} s, query p50 {result.query_p50_ms:.1f} ms)",
    )


def _run_eval(
    idx: Index, beir: BeirSet, *, modes: tuple[str, ...], top_k: int, quiet: bool
) -> tuple[list[EvalResult], float, int]:
    """Index the set once, then run its queries in each mode: bars on a terminal, plain
    lines elsewhere. Returns the results, the indexing seconds and the chunks indexed."""
    from guaipeca.evaluate import evaluate_index, index_beir
    from guaipeca.progress import JobProgress

    with JobProgress(console=err, quiet=quiet) as job:
        docs = job.task("eval: indexing", "documents", total=len(beir.corpus))
        started = time.perf_counter()
        report = index_beir(idx, beir, batch=64, progress=docs.update)  # moves every 64 docs
        index_seconds = time.perf_counter() - started
        docs.finish()
        results = []
        for mode in modes:
            name = "eval: searching" if len(modes) == 1 else f"eval: searching ({mode})"
            queries = job.task(name, "queries", total=len(beir.queries))
            results.append(
                evaluate_index(idx, beir, mode=mode, top_k=top_k, progress=queries.update)  # type: ignore[arg-type]
            )
            queries.finish()
    return results, index_seconds, report.chunks
