"""The command line: ``guaipeca index | search | status``.

Exit codes: 0 ok, 1 a user-facing error (bad input, missing index, …), 2 usage error,
3 an internal error (a bug: please report it). Logs and progress go to stderr; results
to stdout (``--json`` for scripts).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import __version__
from .errors import GuaipecaError
from .store import parse_where_json
from .types import SEARCH_MODES

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    help="Guaipeca: exact, citable hybrid search over your own documents, on one CPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def home_dir() -> Path:
    """Where Guaipeca keeps its data: ``$GUAIPECA_HOME`` or ``~/.guaipeca``."""
    return Path(os.environ.get("GUAIPECA_HOME") or Path.home() / ".guaipeca").expanduser()


def _open_index() -> Any:
    from .index import Index  # heavy imports only for commands that need them

    return Index(home_dir() / "index")


def _version(value: bool) -> None:
    if value:
        out.print(f"guaipeca {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more to stderr.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@app.command()
def index(
    folder: Annotated[
        Path, typer.Argument(help="Folder of .md/.txt files to index (default: current folder).")
    ] = Path("."),
    corpus: Annotated[str, typer.Option("--corpus", "-c", help="Corpus name.")] = "default",
    language: Annotated[
        str | None, typer.Option(help="Stemming language of a new corpus (e.g. portuguese).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Index a folder: new and changed files are added, removed files leave the index."""
    from .ingest import sync_folder

    started = time.perf_counter()
    idx = _open_index()
    try:
        idx.create_corpus(corpus, language=language)
        with Progress(
            TextColumn("[bold]indexing"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=as_json or not err.is_terminal,
        ) as bar:
            task = bar.add_task("files", total=None)
            report = sync_folder(
                idx,
                folder,
                corpus=corpus,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        stats = idx.stats()
    finally:
        idx.close()
    seconds = time.perf_counter() - started
    summary = {
        "corpus": corpus,
        "added": report.added,
        "changed": report.changed,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "failed": [{"path": p, "reason": r} for p, r in report.failed],
        "chunks_embedded": report.chunks_embedded,
        "documents": stats.documents,
        "chunks": stats.chunks,
        "seconds": round(seconds, 3),
    }
    if as_json:
        out.print_json(json.dumps(summary))
    else:
        for path, reason in report.failed:
            err.print(f"[yellow]skipped[/] {path}: {reason}")
        out.print(
            f"{corpus}: {report.added} added, {report.changed} changed, {report.unchanged} "
            f"unchanged, {report.removed} removed, {len(report.failed)} failed; "
            f"{report.chunks_embedded} chunks embedded; {_count(stats.chunks, 'chunk')} in "
            f"{_count(stats.documents, 'document')} ({seconds:.1f} s)"
        )


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=1000, help="Hits.")] = 5,
    mode: Annotated[str, typer.Option(help="hybrid, dense or keyword.")] = "hybrid",
    corpus: Annotated[
        list[str] | None, typer.Option("--corpus", "-c", help="Search only this corpus (repeat).")
    ] = None,
    where: Annotated[
        str | None, typer.Option(help='Metadata filter as JSON, e.g. \'{"year": {"$gte": 2020}}\'.')
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
) -> None:
    """Search the index and print ranked hits with their source and exact span."""
    if mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    filters = parse_where_json(where) if where else None
    idx = _open_index()
    try:
        if not idx.corpora:
            raise GuaipecaError(
                f"the index at {home_dir() / 'index'} is empty; run 'guaipeca index FOLDER' first"
            )
        hits = idx.search(query, top_k=top_k, mode=mode, where=filters, corpora=corpus)
    finally:
        idx.close()
    if as_json:
        out.print_json(json.dumps([h.to_dict() for h in hits], ensure_ascii=False))
        return
    if not hits:
        out.print("no hits")
        return
    for rank, h in enumerate(hits, start=1):
        where_ = h.source_path or h.doc_id
        page = f" p.{h.page_start}" if h.page_start else ""
        heading = " > ".join(h.heading_path)
        out.print(
            f"[bold]{rank}.[/] {where_}{page}  [dim]chars {h.start}-{h.end}  score {h.score:.4f}[/]"
        )
        if heading:
            out.print(f"   [cyan]{heading}[/]")
        out.print(f"   {h.snippet}", markup=False)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show the index location, model, corpora and their sizes."""
    idx = _open_index()
    try:
        s = idx.stats()
    finally:
        idx.close()
    data = {
        "path": s.path,
        "model": s.model,
        "dimension": s.dimension,
        "documents": s.documents,
        "chunks": s.chunks,
        "corpora": [dataclasses.asdict(c) for c in s.corpora],
    }
    if as_json:
        out.print_json(json.dumps(data))
        return
    out.print(f"index {s.path}  model {s.model} ({s.dimension} dims)")
    for c in s.corpora:
        size = (c.vector_bytes + c.catalog_bytes + c.lexical_bytes) / 1e6
        out.print(
            f"  {c.name}: {c.documents} documents, {c.chunks} chunks, {c.language}, {size:.1f} MB"
        )
    if not s.corpora:
        out.print("  no corpora yet: run 'guaipeca index FOLDER'")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the app and maps errors to exit codes."""
    try:
        app(args=argv, prog_name="guaipeca", standalone_mode=False)
    except GuaipecaError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_USER
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        err.print("aborted")
        return EXIT_USER
    except typer.TyperException as exc:  # usage errors and bad parameters (click's kind)
        exc.show(file=sys.stderr)  # type: ignore[attr-defined]
        code = int(getattr(exc, "exit_code", EXIT_USER))
        return EXIT_USAGE if code == EXIT_USAGE else EXIT_USER
    except Exception as exc:
        err.print(f"internal error: {type(exc).__name__}: {exc}", markup=False)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
