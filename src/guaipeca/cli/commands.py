"""The command line: ``guaipeca init | index | search | status | check-model | compact |
serve | install-service | eval``.

Exit codes: 0 ok, 1 a user-facing error (bad input, bad config, nothing indexed, …),
2 a usage error, 3 an internal error (a bug: please report it). Logs and progress go to
stderr; results go to stdout (``--json`` for scripts).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperOption

from guaipeca import __version__
from guaipeca.config import (
    DEFAULT_CORPUS,
    MAX_TOP_K,
    LoadedSettings,
    check_corpus_paths,
    config_path,
    load_settings,
)
from guaipeca.errors import GuaipecaError, StorageError
from guaipeca.text.languages import language_name
from guaipeca.types import SEARCH_MODES, Hit

if TYPE_CHECKING:
    from guaipeca.cli.corpora import Target
    from guaipeca.config import EmbeddingSettings
    from guaipeca.embed import Embedder
    from guaipeca.evaluate import BeirSet, EvalResult
    from guaipeca.index import Index
    from guaipeca.ingest import SyncReport
    from guaipeca.progress import JobProgress
    from guaipeca.store.embedded.reembed import ReembedReport

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _option_type(self, ctx)


# Typer's help shows a type tag beside every option, "<bool>" on flags too, where it says
# nothing (a flag takes no value): flags show none.
_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    help="Guaipeca: exact, citable hybrid search over your own documents, on one CPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
log = logging.getLogger("guaipeca")


@dataclasses.dataclass
class _State:
    config: str | None = None


_state = _State()


def _settings(*, check_paths: bool = False) -> LoadedSettings:
    loaded = load_settings(_state.config, cwd=Path.cwd(), check_paths=False)
    if check_paths:
        check_corpus_paths(loaded)
    return loaded


def _open_index(
    loaded: LoadedSettings, *, tolerate_down: bool = False, keyword_only: bool = False
) -> Index:
    """The index with the configured model, settings and corpora (weights, languages).

    A storage server (Qdrant) that is down is an error, except for ``serve``
    (``tolerate_down``), which starts and reports it in status and /health.
    ``keyword_only``: the model is loaded only if something asks for a vector
    (cli/model_memo.py), so a keyword search starts faster.
    """
    from guaipeca.cli.model_memo import lazy_model, note_model
    from guaipeca.embed import load_embedder
    from guaipeca.embed.select import load_models
    from guaipeca.index import Index

    s = loaded.settings
    source = str(loaded.source) if loaded.source else None
    from guaipeca.store.backends import open_backend

    def load(settings: EmbeddingSettings) -> Embedder:
        model = load_embedder(settings, source=source, data_dir=loaded.data_dir)
        note_model(loaded.data_dir, settings, model)
        return model

    def model_for(settings: EmbeddingSettings) -> Embedder:
        lazy = (
            lazy_model(loaded.data_dir, settings, lambda: load(settings)) if keyword_only else None
        )
        return lazy if lazy is not None else load(settings)

    models = load_models(s, load=model_for)
    backend = open_backend(s.storage)  # None: embedded, files under data_dir
    try:
        index = Index(
            loaded.data_dir / "index",
            embedder=models.default,
            settings=s.engine(),
            backend=backend,
            corpus_embedders=models.embedders,
            corpus_embedding=models.settings,
        )
    except StorageError as exc:
        where = f"storage.data_dir in {source}" if source else "storage.data_dir"
        raise StorageError(f"{exc} (set {where}, or GUAIPECA_DATA_DIR)") from None
    down = None if tolerate_down or backend is None else index.backend_error
    if down is not None:
        index.close()
        raise GuaipecaError(down)
    for corpus in s.corpora:
        if corpus.name in index.corpora:
            index.set_corpus_weight(corpus.name, corpus.weight)
    return index


def _version(value: bool) -> None:
    if value:
        out.print(f"guaipeca {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            envvar="GUAIPECA_CONFIG",
            help="Config file (default: $GUAIPECA_HOME/guaipeca.yaml, ~/.guaipeca/...).",
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log more detail to stderr.")
    ] = False,
) -> None:
    _state.config = config
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )


@app.command()
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented config file with every setting and its default."""
    from guaipeca.config.template import render_default_config

    path = config_path(_state.config)
    if path.exists() and not force:
        raise GuaipecaError(f"{path} already exists; use --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_default_config(), encoding="utf-8")
    out.print(f"wrote {path}; edit its corpora, then run 'guaipeca index'")


@app.command()
def index(
    corpora: Annotated[
        list[str] | None,
        typer.Argument(help="The corpora to index. Without one, every configured corpus."),
    ] = None,
    path: Annotated[
        Path | None,
        typer.Option(
            "--path",
            help="Index this folder, without a config file. It goes into the corpus named "
            "as the argument, or into 'default'; when 'default' already holds another "
            "folder, into a corpus named after this folder.",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Index the folder into the corpus even though the corpus was indexed from "
            "another folder. Its documents from there are removed.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Rebuild the corpus: convert and embed every file again."),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=0,
            max=64,
            help="Processes converting and chunking files (0: one per core, up to 4).",
        ),
    ] = 0,
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Keep running, and index again whenever files change."),
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.2, help="The seconds between two --watch scans.")
    ] = 2.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON, for scripts.")
    ] = False,
) -> None:
    """Index corpora: new and changed files are added, and removed files leave the index."""
    from guaipeca.cli.corpora import settle_folders

    loaded = _settings()
    targets = _targets(loaded, corpora, path)
    idx = _open_index(loaded)
    try:
        targets = settle_folders(loaded, idx, targets, replace=replace, err=err)
    except BaseException:
        idx.close()
        raise
    stop = threading.Event()
    if watch:
        _announce_watch(targets, interval, stop)
    try:
        reports = _index_rounds(
            idx,
            loaded,
            targets,
            force=force,
            workers=workers,
            watch=watch,
            interval=interval,
            as_json=as_json,
            stop=stop,
        )
    finally:
        idx.close()
    if any(r.failed for r in reports) and all(
        not (r.added or r.changed or r.unchanged) for r in reports
    ):
        raise typer.Exit(EXIT_USER)


def _announce_watch(targets: list[Target], interval: float, stop: threading.Event) -> None:
    # SIGTERM (systemd, docker stop) ends the watch between scans, cleanly.
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    # To stderr: --json output on stdout stays clean.
    folders = ", ".join(f"{t.name} ({t.folder})" for t in targets)
    err.print(
        f"watching {folders}: indexing now, then every {interval:g} s when files change; "
        "Ctrl-C stops",
        markup=False,
    )


def _index_rounds(
    idx: Index,
    loaded: LoadedSettings,
    targets: list[Target],
    *,
    force: bool,
    workers: int,
    watch: bool,
    interval: float,
    as_json: bool,
    stop: threading.Event,
) -> list[SyncReport]:
    """Index every target once, or with ``watch`` again after every ``interval`` until
    ``stop``; the reports of the last round."""
    from guaipeca.cli.corpora import remember
    from guaipeca.convert import FileLimits
    from guaipeca.ingest import sync_folder
    from guaipeca.progress import JobProgress

    while True:
        reports = []
        for target in targets:
            with JobProgress(console=err, quiet=as_json) as job:
                report = _two_phases(
                    idx,
                    job,
                    target.name,
                    functools.partial(
                        sync_folder,
                        idx,
                        target.folder,
                        corpus=target.name,
                        cache_dir=loaded.data_dir / "converted",
                        skip=[loaded.data_dir],
                        force=force,
                        workers=workers,
                        wait=False,
                        limits=FileLimits(**loaded.settings.limits.model_dump()),
                        **target.options,
                    ),
                )
            remember(loaded, target)
            reports.append(report)
            if as_json or not watch or report.touched or report.failed:
                _print_report(report, idx, as_json)
        if not watch or stop.is_set():
            return reports
        force = False
        if not _wait(stop, interval):
            return reports


def _targets(loaded: LoadedSettings, names: list[str] | None, path: Path | None) -> list[Target]:
    from guaipeca.cli.corpora import Target
    from guaipeca.convert import OcrOptions

    s = loaded.settings
    if path is not None:
        if names and len(names) > 1:
            raise GuaipecaError("--path indexes one corpus; name at most one")
        name = names[0] if names else DEFAULT_CORPUS
        configured = {c.name: c for c in s.corpora}
        language = configured[name].language if name in configured else None
        options = {"language": language, "ocr": OcrOptions.from_settings(s.ocr, language)}
        return [Target(name, _check_folder(path), options, from_config=False, implicit=not names)]
    check_corpus_paths(loaded)
    known = {c.name: c for c in s.corpora}
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        listed = ", ".join(known) or "none"
        raise GuaipecaError(f"no corpus named {unknown[0]!r} in the config (corpora: {listed})")
    chosen = [known[n] for n in names] if names else list(s.corpora)
    if not chosen:
        raise GuaipecaError("the config has no corpora; add one under 'corpora:'")
    # Without a config file the one corpus is 'default' in the current folder.
    implicit = loaded.source is None and not names
    return [
        Target(
            c.name,
            _check_folder(c.path),
            {
                "language": c.language,
                "extensions": c.extensions,
                "exclude": c.exclude,
                "ocr": OcrOptions.from_settings(s.ocr, c.language),
            },
            from_config=loaded.source is not None,
            implicit=implicit and c.name == DEFAULT_CORPUS,
        )
        for c in chosen
    ]


def _check_folder(path: Path) -> Path:
    folder = path.expanduser().resolve()
    if not folder.is_dir():
        raise GuaipecaError(f"{path} is not a folder")
    if folder == Path(folder.anchor):
        raise GuaipecaError("refusing to index the whole file system; name a folder")
    return folder


def _two_phases(
    idx: Index, job: JobProgress, name: str, keyword_phase: Callable[..., SyncReport]
) -> SyncReport:
    """Run the keyword phase (files converted and committed) while a thread embeds what it
    has committed so far, then finish the embedding phase; both show progress."""
    files = job.task(f"{name}: searchable by keyword", "files")
    vectors = job.task(f"{name}: embedded", "chunks")
    embedded = [0]
    lock = threading.Lock()

    def on_round(done: int, left: int) -> None:
        with lock:
            vectors.update(embedded[0] + done, embedded[0] + done + left)

    def embed_round() -> int:
        count = idx.embed_pending(name, progress=on_round)
        with lock:
            embedded[0] += count
        return count

    keyword_done = threading.Event()

    def embed_meanwhile() -> None:
        while not keyword_done.is_set():
            if not embed_round():
                keyword_done.wait(0.5)

    started = time.perf_counter()
    helper = threading.Thread(target=embed_meanwhile, name="embed", daemon=True)
    helper.start()
    try:
        report = keyword_phase(progress=files.update)
    finally:
        keyword_done.set()
        helper.join()
    files.finish()
    embed_round()
    vectors.update(embedded[0], embedded[0])
    vectors.finish()
    report.chunks_embedded = embedded[0]
    report.chunks_pending = 0
    report.seconds = time.perf_counter() - started
    return report


def _wait(stop: threading.Event, seconds: float) -> bool:
    """Sleep between --watch scans; False once Ctrl-C or SIGTERM asked us to stop."""
    try:
        return not stop.wait(seconds)
    except KeyboardInterrupt:
        return False


# Files converted faster than this are not worth naming in the summary.
_SLOW_FILE_SECONDS = 0.5


def _print_report(report: SyncReport, idx: Index, as_json: bool) -> None:
    s = next((c for c in idx.stats().corpora if c.name == report.corpus), None)
    documents, chunks = (s.documents, s.chunks) if s else (0, 0)
    if as_json:
        data = {
            "corpus": report.corpus,
            "added": report.added,
            "changed": report.changed,
            "unchanged": report.unchanged,
            "removed": report.removed,
            "failed": [{"path": p, "reason": r} for p, r in report.failed],
            "warnings": [{"path": p, "warning": w} for p, w in report.warnings],
            "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
            "chunks_embedded": report.chunks_embedded,
            "documents": documents,
            "chunks": chunks,
            "seconds": round(report.seconds, 3),
            "keyword_seconds": round(report.keyword_seconds, 3),
            "slowest": [
                {"path": p, "seconds": round(t, 3), "chunks": n} for p, t, n in report.slowest
            ],
        }
        out.print(json.dumps(data, ensure_ascii=False), markup=False)
        return
    for path, reason in [*report.failed, *report.skipped]:
        err.print(f"skipped {path}: {reason}", markup=False)
    for path, warning in report.warnings:
        err.print(f"warning {path}: {warning}", markup=False)
    out.print(
        f"{report.corpus}: {report.added} added, {report.changed} changed, {report.unchanged} "
        f"unchanged, {report.removed} removed, {len(report.failed)} failed; "
        f"{_count(report.chunks_embedded, 'chunk')} embedded; {_count(chunks, 'chunk')} in "
        f"{_count(documents, 'document')} ({report.seconds:.1f} s; searchable by keyword "
        f"after {report.keyword_seconds:.1f} s)",
        markup=False,
    )
    slow = [(p, t, n) for p, t, n in report.slowest if t >= _SLOW_FILE_SECONDS]
    if slow:
        listed = "; ".join(f"{p} {t:.1f} s ({_count(n, 'chunk')})" for p, t, n in slow)
        err.print(f"slowest files to convert: {listed}", markup=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for: a question or keywords.")],
    top_k: Annotated[
        int, typer.Option("--top-k", "-k", min=1, max=MAX_TOP_K, help="How many hits to print.")
    ] = 5,
    mode: Annotated[
        str,
        typer.Option(
            help="hybrid (keywords and meaning), keyword (exact terms, no model) or dense "
            "(meaning)."
        ),
    ] = "hybrid",
    corpus: Annotated[
        list[str] | None,
        typer.Option("--corpus", "-c", help="Search only this corpus; repeat it for several."),
    ] = None,
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
    return_mode: Annotated[
        str, typer.Option(help="chunks, documents, or auto (documents when they fit).")
    ] = "chunks",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the hits as JSON, for scripts.")
    ] = False,
) -> None:
    """Search the index and print ranked hits with source, page, heading path and span."""
    if mode not in SEARCH_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(SEARCH_MODES)}", param_hint="--mode")
    from guaipeca.store import parse_where_json

    filters = parse_where_json(where) if where else None
    loaded = _settings()
    idx = _open_index(loaded, keyword_only=mode == "keyword")
    try:
        hits = idx.search(
            query,
            top_k=top_k,
            mode=mode,
            where=filters,
            corpora=_search_scope(loaded, idx, corpus),
            rerank=rerank,
            top_k_before=top_k_before,
            section_mode=section_mode,
            return_mode=return_mode,  # type: ignore[arg-type]  # checked by Index.search
        )
    finally:
        idx.close()
    _print_hits(hits, as_json)


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


def _print_hits(hits: list[Hit], as_json: bool) -> None:
    if as_json:
        out.print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False), markup=False)
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
            markup=False,
        )
        trail = h.heading_trail or h.heading_path
        if trail:
            out.print("   " + " > ".join(trail), markup=False)
        if h.table_header:
            out.print(f"   columns: {h.table_header}", markup=False)
        out.print(f"   {h.snippet}", markup=False)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show the config in use, the data folder, the model and each corpus."""
    loaded = _settings()
    idx = _open_index(loaded, keyword_only=True)  # counts need no vectors
    try:
        s = idx.stats()
        broken = idx.broken_corpora
    finally:
        idx.close()
    from guaipeca.cli.corpora import drop_note

    topics = {c.name: (c.topic, str(c.path)) for c in loaded.settings.corpora}
    corpora: list[dict[str, Any]] = []
    for stats in s.corpora:
        entry = dataclasses.asdict(stats)
        entry["topic"], entry["folder"] = topics.get(stats.name, ("", None))
        entry["configured"] = stats.name in topics
        unlisted = loaded.source is not None and not entry["configured"]
        entry["note"] = drop_note(stats.name) if unlisted else None
        corpora.append(entry)
    data = {
        "version": __version__,
        "config": str(loaded.source) if loaded.source else None,
        "data_dir": str(loaded.data_dir),
        "model": s.model,
        "dimension": s.dimension,
        "documents": s.documents,
        "chunks": s.chunks,
        "pending_chunks": s.pending_chunks,
        "pending_seconds": s.pending_seconds,
        "corpora": corpora,
        "broken": broken,
    }
    if as_json:
        out.print(json.dumps(data, ensure_ascii=False), markup=False)
        return
    out.print(f"config   {loaded.source or '(none: defaults, one corpus = this folder)'}")
    out.print(f"data     {loaded.data_dir}")
    out.print(f"model    {s.model} ({s.dimension} dimensions)")
    for e in corpora:
        size = (e["vector_bytes"] + e["catalog_bytes"] + e["lexical_bytes"]) / 1e6
        topic = f" — {e['topic']}" if e["topic"] else ""
        note = f"; {e['note']}" if e["note"] else ""
        if e["pending_chunks"]:  # progressive indexing: keyword only until embedded
            left = e["pending_seconds"]
            eta = f", about {left:.0f} s left" if left is not None else ""
            note += f"; {e['pending_chunks']} waiting for vectors{eta}"
        out.print(
            f"  {e['name']}{topic}: {_count(e['documents'], 'document')}, "
            f"{_count(e['chunks'], 'chunk')}, {e['language']}, {size:.1f} MB{note}",
            markup=False,
        )
        out.print(f"    model: {e['model']}", markup=False)
        if e["model_mismatch"]:
            out.print(f"    dense search off: {e['model_mismatch']}", markup=False)
    for name, reason in broken.items():
        out.print(f"  {name}: cannot be used: {reason}", markup=False)
    if not corpora and not broken:
        out.print("  nothing indexed yet: run 'guaipeca index'")


@app.command()
def corpora(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List every corpus: those in the configuration and those in the data folder, with
    their folders and sizes. A corpus that is not in the configuration is not searched."""
    from guaipeca.cli.corpora import run_corpora

    loaded = _settings()
    idx = _open_index(loaded, keyword_only=True)
    try:
        run_corpora(loaded, idx, as_json=as_json, out=out)
    finally:
        idx.close()


@app.command()
def drop(
    corpus: Annotated[str, typer.Argument(help="The corpus to delete from the index.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask for a confirmation first.")
    ] = False,
) -> None:
    """Delete a corpus from the index, after asking. Its source files are not touched."""
    from guaipeca.cli.corpora import run_drop

    loaded = _settings()
    idx = _open_index(loaded, keyword_only=True)
    try:
        run_drop(loaded, idx, corpus, yes=yes, out=out, err=err)
    finally:
        idx.close()


@app.command()
def serve(
    transport: Annotated[
        str | None,
        typer.Option(help="stdio (one local agent), http, or both (default: server.transport)."),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="HTTP interface (default: server.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="HTTP port (default: server.port, 8090).")
    ] = None,
    watch: Annotated[
        bool | None,
        typer.Option("--watch/--no-watch", help="Re-index corpora when their files change."),
    ] = None,
) -> None:
    """Run the MCP server: stdio, Streamable HTTP at /mcp and legacy SSE at /sse."""
    import anyio

    from guaipeca.server import Service, build_server
    from guaipeca.server.idle import IdleTrim, trim_when_idle

    loaded = _settings()
    conf = loaded.settings.server
    mode = transport or conf.transport
    if mode not in ("stdio", "http", "both"):
        raise typer.BadParameter("must be stdio, http or both", param_hint="--transport")
    idx = _open_index(loaded, tolerate_down=True)
    service = Service(idx, loaded)
    stop = threading.Event()
    if conf.watch if watch is None else watch:
        threading.Thread(target=_watch, args=(service, stop), daemon=True, name="watch").start()

    async def run() -> None:
        from guaipeca.server.http import serve_http

        if mode == "http":
            await serve_http(service, host or conf.host, port or conf.port)
            return
        server = build_server(service)

        async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    stopping.set()
                    scope.cancel()
                    return

        async def http_then_stop(scope: anyio.CancelScope) -> None:
            await serve_http(service, host or conf.host, port or conf.port)
            stopping.set()
            scope.cancel()  # SIGTERM/SIGINT stopped HTTP (gracefully): stop stdio too

        # SIGTERM (systemd, docker stop) ends the server by returning, so the index is
        # closed below; over HTTP, uvicorn first lets requests in flight finish.
        async with anyio.create_task_group() as tg:
            if mode == "stdio":
                tg.start_soon(stop_on_sigterm, tg.cancel_scope)
                # Over HTTP uvicorn's tick drives this; stdio has no tick, so a timer does.
                trim = IdleTrim(service.tool_calls, idx.release_memory, conf.idle_trim_seconds)
                tg.start_soon(trim_when_idle, trim)
            else:
                tg.start_soon(http_then_stop, tg.cancel_scope)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()  # the agent closed stdio: stop serving HTTP too

    # The MCP SDK reads stdin in a worker thread that cancellation cannot interrupt: once
    # a signal stopped everything else, a stdin left open by the agent must not keep the
    # process (and the index) open. Searches still running get their deadline first.
    stopping, finished = threading.Event(), threading.Event()
    grace = conf.search_timeout_seconds + 5.0
    threading.Thread(
        target=_exit_when_stuck, args=(stopping, finished, grace, stop, idx), daemon=True
    ).start()
    try:
        anyio.run(run)
    finally:
        finished.set()
        stop.set()
        idx.close()


def _exit_when_stuck(
    stopping: threading.Event,
    finished: threading.Event,
    grace: float,
    stop: threading.Event,
    idx: Index,
) -> None:
    stopping.wait()
    if finished.wait(grace):
        return
    log.info("stopped; stdin is still open: closing the index and exiting")
    stop.set()
    idx.close()
    os._exit(0)


def _watch(service: Any, stop: threading.Event, interval: float = 5.0) -> None:
    """server.watch: re-sync every configured corpus every few seconds (unchanged files are
    not read), in the background; searches keep answering meanwhile."""
    while not stop.wait(interval):
        for corpus in service.settings.corpora:
            try:
                report = service.reindex(corpus.name)
                if report.touched:
                    log.info(
                        "watch: %s re-indexed (%d added, %d changed, %d removed)",
                        corpus.name,
                        report.added,
                        report.changed,
                        report.removed,
                    )
            except GuaipecaError as exc:
                log.warning("watch: %s: %s", corpus.name, exc)


@app.command("install-service")
def install_service(
    system: Annotated[
        bool,
        typer.Option(
            "--system", help="A system unit (/etc/systemd/system, as --user-name); default: yours."
        ),
    ] = False,
    user_name: Annotated[
        str, typer.Option("--user-name", help="The account a --system unit runs as.")
    ] = "guaipeca",
    memory_max: Annotated[
        str, typer.Option(help="MemoryMax: RAM cap (e.g. 2G; 1G is enough for ~100k chunks).")
    ] = "2G",
    cpu_quota: Annotated[
        str, typer.Option(help="CPUQuota: CPU cap, a percentage of one core (200% = two).")
    ] = "200%",
    host: Annotated[str | None, typer.Option(help="--host for serve (default: config).")] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="The port the unit's serve listens on (default: the config's)."
        ),
    ] = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the unit instead of writing it.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing unit.")] = False,
) -> None:
    """Write a systemd unit that runs 'guaipeca serve --transport http' (journal logs,
    graceful stop on SIGTERM, MemoryMax/CPUQuota caps), then print how to start it."""
    import shutil

    from guaipeca.cli.service_unit import UnitOptions, render_unit, unit_path
    from guaipeca.config import home_dir

    path = config_path(_state.config).resolve()
    if not path.is_file():
        raise GuaipecaError(
            f"no config file at {path}: a service needs one (write it with 'guaipeca init', "
            "list your corpora, then run this again)"
        )
    loaded = _settings(check_paths=True)  # a broken config fails here, not at every restart
    s = loaded.settings
    uploads = [c.path for c in s.corpora if c.name in s.upload.allow and c.path.is_absolute()]
    script = shutil.which("guaipeca") or sys.argv[0]
    home = home_dir().resolve()
    options = UnitOptions(
        executable=Path(script).resolve(),
        config=path,
        home=home,
        env_file=home / "env",
        user_unit=not system,
        user=user_name if system else None,
        memory_max=memory_max,
        cpu_quota=cpu_quota,
        host=host,
        port=port,
        writable=(loaded.data_dir.resolve(), *uploads),
    )
    text = render_unit(options)
    if print_only:
        sys.stdout.write(text)
        return
    target = unit_path(user_unit=not system)
    if target.exists() and not force:
        raise GuaipecaError(f"{target} already exists; use --force to overwrite it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except PermissionError:
        raise GuaipecaError(f"cannot write {target}: run as root for --system") from None
    ctl = "systemctl" if system else "systemctl --user"
    out.print(f"wrote {target}", markup=False)
    out.print("start it now and at boot:", markup=False)
    out.print(f"  {ctl} daemon-reload && {ctl} enable --now guaipeca", markup=False)
    out.print(f"  journalctl {'' if system else '--user '}-u guaipeca -f    # its logs")
    if not system:
        out.print("  loginctl enable-linger $USER   # keep it running after you log out")
    out.print(f"secrets (GUAIPECA_AUTH_TOKEN=...) go in {options.env_file} (chmod 600)")


@app.command("check-model")
def check_model(
    download: Annotated[
        bool,
        typer.Option(
            "--download",
            help="Download the configured fastembed model into the data folder first (the "
            "only command that uses the network for a model).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Load the embedding model and report what it is, where it loads from, and how fast."""
    from guaipeca.embed import identity_of, load_embedder

    loaded = _settings()
    source = str(loaded.source) if loaded.source else None
    emb = loaded.settings.embedding
    if download:
        _download_model(loaded)
    started = time.perf_counter()
    model = load_embedder(emb, source=source, data_dir=loaded.data_dir)
    load_seconds = float(getattr(model, "load_seconds", time.perf_counter() - started))
    vector = model.embed_query("check")
    ident = identity_of(model)
    remote = emb.provider == "openai"
    data = {
        "provider": ident.provider,
        "model": model.name,
        "dimension": model.dimension,
        "prefixes": f"{ident.query_prefix!r} / {ident.passage_prefix!r}",
        "weights_sha256": ident.weights_sha256 or "unknown (remote)",
        "source": getattr(model, "source", "?"),
        "tokenizer": getattr(model, "tokenizer_source", "inside the model package"),
        "weights": "int8 in memory" if getattr(model, "int8_weights", False) else "as stored",
        "load_seconds": round(load_seconds, 3),
        "first_query_seconds": round(time.perf_counter() - started - load_seconds, 3),
        "norm": round(float((vector**2).sum() ** 0.5), 4),
        "network": f"the server at {getattr(model, 'url', '?')}"
        if remote
        else "not used: the model and tokenizer are local files",
    }
    corpora = _corpus_models(loaded)
    if as_json:
        out.print(json.dumps({**data, "corpora": corpora}), markup=False)
        return
    for key, value in data.items():
        out.print(f"{key:<20}{value}", markup=False)
    for name, entry in corpora.items():
        out.print(f"corpus {name}: configured {entry['configured']}", markup=False)
        if entry["stored"] and entry["stored"] != entry["configured"]:
            out.print(f"  stored vectors: {entry['stored']}", markup=False)
        if entry["mismatch"]:
            out.print(f"  {entry['mismatch']}", markup=False)


def _corpus_models(loaded: LoadedSettings) -> dict[str, dict[str, str | None]]:
    """Per corpus: the model it is configured with, and what its stored vectors are."""
    from guaipeca.embed import identity_of

    idx = _open_index(loaded)
    try:
        stats = {c.name: c for c in idx.stats().corpora}
        names = [c.name for c in loaded.settings.corpora] + sorted(
            set(stats) - set(c.name for c in loaded.settings.corpora)
        )
        return {
            name: {
                "configured": identity_of(idx.embedder_for(name)).describe(),
                "stored": stats[name].model if name in stats else None,
                "mismatch": stats[name].model_mismatch if name in stats else None,
            }
            for name in names
        }
    finally:
        idx.close()


def _download_model(loaded: LoadedSettings) -> None:
    emb = loaded.settings.embedding
    if emb.provider != "fastembed":
        err.print(f"nothing to download: provider {emb.provider} loads without a download")
        return
    from guaipeca.embed.fastembed import download_fastembed, fastembed_cache

    cache = fastembed_cache(loaded.data_dir)
    err.print(f"downloading {emb.model} into {cache} …")
    folder = download_fastembed(emb.model, cache)
    err.print(f"downloaded to {folder}; it loads offline from now on")


@app.command()
def migrate(
    to: Annotated[str, typer.Option("--to", help="Target backend: qdrant or embedded.")],
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to copy. Without one, every corpus.")
    ] = None,
    batch: Annotated[
        int, typer.Option(min=1, max=10_000, help="How many documents go in one write.")
    ] = 64,
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore the checkpoint of an earlier run.")
    ] = False,
) -> None:
    """Copy the index to another backend (embedded <-> qdrant) without re-embedding;
    resumes after an interruption."""
    from guaipeca.cli.migrate import run_migrate

    run_migrate(_settings(), to, corpora, batch=batch, restart=restart, out=out, err=err)


@app.command()
def reembed(
    corpora: Annotated[
        list[str] | None,
        typer.Argument(help="Corpora to re-embed (default: every corpus on another model)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Re-embed stored chunks with the configured model (no re-conversion); resumes after an
    interruption, keyword search keeps working meanwhile, and the switch is atomic."""
    loaded = _settings()
    idx = _open_index(loaded)
    try:
        names = list(corpora) if corpora else list(idx.mismatched_corpora)
        reports = []
        for name in names:
            report = _reembed_one(idx, name, quiet=as_json)
            reports.append(report)
            if not as_json:
                out.print(_reembed_line(report), markup=False)
        if as_json:
            out.print(json.dumps([dataclasses.asdict(r) for r in reports]), markup=False)
        elif not names:
            out.print("every corpus is already on its configured model", markup=False)
    finally:
        idx.close()


def _reembed_one(idx: Index, name: str, *, quiet: bool) -> ReembedReport:
    from guaipeca.progress import JobProgress

    with JobProgress(console=err, quiet=quiet) as job:
        task = job.task(f"reembed {name}", "documents")
        report = idx.reembed(name, progress=task.update)
        task.finish()
    return report


def _reembed_line(report: ReembedReport) -> str:
    if not report.changed:
        return f"{report.corpus}: already on {report.model}"
    resumed = f", {report.resumed} resumed from an earlier run" if report.resumed else ""
    return (
        f"{report.corpus}: {report.documents} documents, {report.chunks} chunks re-embedded "
        f"with {report.model}{resumed}"
    )


@app.command()
def compact(
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to compact. Without one, every corpus.")
    ] = None,
) -> None:
    """Reclaim space left by deleted documents and refresh BM25 statistics."""
    loaded = _settings()
    idx = _open_index(loaded)
    try:
        for name in corpora or idx.corpora:
            before = next((c for c in idx.stats().corpora if c.name == name), None)
            idx.compact(name)
            after = next(c for c in idx.stats().corpora if c.name == name)
            freed = (before.deleted_slots if before else 0) - after.deleted_slots
            out.print(f"{name}: compacted ({freed} deleted chunk slots reclaimed)")
    finally:
        idx.close()


@app.command()
def check(
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to check. Without one, every corpus.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the index: catalog, vectors and keyword index agree, every chunk resolves.

    Exit code 1 when a problem is found (each is printed with how to repair it)."""
    loaded = _settings()
    idx = _open_index(loaded)
    try:
        reports = [idx.verify(name) for name in corpora] if corpora else [idx.verify()]
    finally:
        idx.close()
    checked = [c for r in reports for c in r.corpora]
    broken = {k: v for r in reports for k, v in r.broken.items()}
    ok = not broken and all(c.ok for c in checked)
    if as_json:
        data = {"ok": ok, **reports[0].to_dict()} if len(reports) == 1 else None
        if data is None:
            data = {"ok": ok, "corpora": [c for r in reports for c in r.to_dict()["corpora"]]}
            data["broken"] = broken
        out.print(json.dumps(data, ensure_ascii=False), markup=False)
    else:
        for c in checked:
            head = f"{c.name}: {_count(c.documents, 'document')}, {_count(c.chunks, 'chunk')}"
            out.print(f"{head}: ok" if c.ok else f"{head}: PROBLEMS", markup=False)
            for problem in c.problems:
                out.print(f"  - {problem}", markup=False)
        for name, reason in broken.items():
            out.print(f"{name}: cannot be opened: {reason}", markup=False)
        if not checked and not broken:
            out.print("nothing indexed yet")
    if not ok:
        # An error (exit code 1), not typer.Exit: main() runs click without standalone mode.
        raise GuaipecaError(
            "the index has problems; re-index the corpora named above with "
            "'guaipeca index --force' (sources are read again)"
        )


@app.command("eval")
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
    loaded = _settings()
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
        out.print(json.dumps(data, ensure_ascii=False), markup=False)
        return
    metrics = "  ".join(f"{name} {value:.4f}" for name, value in result.metrics.items())
    queries = f"{result.queries} {'query' if result.queries == 1 else 'queries'}"
    out.print(
        f"{metrics}  ({queries}, {_count(result.documents, 'doc')}, index {index_seconds:.1f} s, "
        f"query p50 {result.query_p50_ms:.1f} ms)",
        markup=False,
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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the app and maps errors to exit codes."""
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(args=argv, prog_name="guaipeca", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool) and code != EXIT_OK:
            return code
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
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        log.debug("internal error", exc_info=True)
        err.print(f"internal error: {type(exc).__name__}: {exc}", markup=False)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
