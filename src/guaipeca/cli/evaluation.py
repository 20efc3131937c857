"""``guaipeca eval``: nDCG@10, Recall@100 and MRR@10 of the configuration on a BEIR-format
data set, indexed into a temporary in-memory index (guaipeca.evaluate does the work)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from guaipeca.cli.context import current_settings, err, out, plural
from guaipeca.text.languages import language_name
from guaipeca.types import SEARCH_MODES

if TYPE_CHECKING:
    from guaipeca.evaluate import BeirSet, EvalResult
    from guaipeca.index import Index


def eval_(
    folder: Annotated[Path, typer.Argument(help="A BEIR-format folder (corpus, queries, qrels).")],
    mode: Annotated[str, typer.Option(help="hybrid, dense or keyword.")] = "hybrid",
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Measure nDCG@10, Recall@100 and MRR@10 of your configuration on a BEIR data set."""
    from guaipeca.embed import load_embedder
    from guaipeca.evaluate import load_beir
    from guaipeca.index import Index

    if mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    try:
        language = language_name(language)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--language") from None
    beir = load_beir(folder, split=split, limit_queries=limit_queries, limit_docs=max_docs)
    loaded = current_settings()
    source = str(loaded.source) if loaded.source else None
    embedder = load_embedder(loaded.settings.embedding, source=source, data_dir=loaded.data_dir)
    idx = Index(embedder=embedder, settings=loaded.settings.engine(), language=language)
    try:
        result, index_seconds = _run_eval(idx, beir, mode=mode, top_k=top_k, quiet=as_json)
    finally:
        idx.close()
    result.index_seconds = index_seconds
    data = {**result.to_dict(), "split": split, "language": language, "folder": str(folder)}
    if as_json:
        out.print_verbatim(json.dumps(data, ensure_ascii=False))
        return
    metrics = "  ".join(f"{name} {value:.4f}" for name, value in result.metrics.items())
    queries = f"{result.queries} {'query' if result.queries == 1 else 'queries'}"
    out.print(
        f"{metrics}  ({queries}, {plural(result.documents, 'doc')}, index {index_seconds:.1f} s, "
        f"query p50 {result.query_p50_ms:.1f} ms)",
    )


def _run_eval(
    idx: Index, beir: BeirSet, *, mode: str, top_k: int, quiet: bool
) -> tuple[EvalResult, float]:
    """Index the set, then run its queries: bars on a terminal, plain lines elsewhere."""
    from guaipeca.evaluate import evaluate_index, index_beir
    from guaipeca.progress import JobProgress

    with JobProgress(console=err, quiet=quiet) as job:
        docs = job.task("eval: indexing", "documents", total=len(beir.corpus))
        started = time.perf_counter()
        index_beir(idx, beir, batch=64, progress=docs.update)  # moves every 64 documents
        index_seconds = time.perf_counter() - started
        docs.finish()
        queries = job.task("eval: searching", "queries", total=len(beir.queries))
        result = evaluate_index(idx, beir, mode=mode, top_k=top_k, progress=queries.update)  # type: ignore[arg-type]
    return result, index_seconds
