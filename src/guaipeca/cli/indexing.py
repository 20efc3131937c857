"""``guaipeca index``: index the configured corpora (or one folder with ``--path``), in two
phases (searchable by keyword first, then embedded), once or again on every change
(``--watch``), and print one summary per corpus."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from guaipeca.cli.context import (
    EXIT_USER,
    WaitOption,
    WaitTimeoutOption,
    current_settings,
    err,
    open_index,
    out,
    plural,
    state,
    writing,
)
from guaipeca.config import (
    DEFAULT_CORPUS,
    SUPPORTED_EXTENSIONS,
    LoadedSettings,
    check_corpus_paths,
    did_you_mean,
)
from guaipeca.errors import BackendUnavailableError, GuaipecaError, IndexLockedError, ModelError

if TYPE_CHECKING:
    from guaipeca.cli.corpora import Target
    from guaipeca.index import Index
    from guaipeca.ingest import SyncReport
    from guaipeca.progress import JobProgress


def index(
    corpora: Annotated[
        list[str] | None,
        typer.Argument(
            help="The corpora to index (without one, every configured corpus), or files to "
            "index into --corpus, or one folder (as --path)."
        ),
    ] = None,
    into: Annotated[
        str | None,
        typer.Option(
            "--corpus", help="The corpus files listed as arguments go into (default: default)."
        ),
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
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Index corpora: new and changed files are added, and removed files leave the index.
    Exits 1 when no file at all could be indexed.

    One process writes a corpus at a time: when another one is (an index run, a server),
    this exits with code 1 naming it, or waits for it with --wait."""
    loaded = current_settings()
    targets = _targets(loaded, corpora, path, into)
    hold = functools.partial(writing, loaded, wait=wait, timeout=wait_timeout)
    targets, reports = _held_rounds(
        loaded,
        targets,
        hold,
        replace=replace,
        force=force,
        workers=workers,
        watch=watch,
        interval=interval,
        as_json=as_json,
    )
    _exit_if_nothing_indexed(targets, reports)


def _held_rounds(
    loaded: LoadedSettings,
    targets: list[Target],
    hold: Callable[[list[str]], contextlib.AbstractContextManager[None]],
    *,
    replace: bool,
    **rounds: Any,
) -> tuple[list[Target], list[SyncReport]]:
    """Open the index and run the rounds while holding the corpora: before the index is
    opened (a refused run loads nothing), and again once the folders are settled (the
    corpus may be another); --watch lets go after the first round (_index_rounds), so a
    server or another run can write between two scans. Returns the settled targets
    and the last round's reports."""
    from guaipeca.cli.corpora import settle_folders

    with contextlib.ExitStack() as held:
        held.enter_context(hold([t.name for t in targets]))
        idx = open_index(loaded)
        try:
            targets = settle_folders(loaded, idx, targets, replace=replace, err=err)
            held.enter_context(hold([t.name for t in targets]))
            return targets, _index_rounds(idx, loaded, targets, held, **rounds)
        finally:
            idx.close()


def _exit_if_nothing_indexed(targets: list[Target], reports: list[SyncReport]) -> None:
    """One line per corpus left with no file of its folder; exit 1 when that is all of them.
    An unchanged re-run indexed its files earlier: it does not count."""
    empty = [(t, r) for t, r in zip(targets, reports, strict=True) if not r.indexed]
    for target, report in empty:
        err.print(f"error: {_nothing_indexed(target, report)}", markup=False)
    if reports and len(empty) == len(reports):
        raise typer.Exit(EXIT_USER)


def _nothing_indexed(target: Target, report: SyncReport) -> str:
    """Why a corpus holds no file of its folder after a run, in one line."""
    where = f"nothing indexed in corpus {report.corpus!r}:"
    unread = len(report.skipped) + len(report.failed)
    if unread:
        return (
            f"{where} none of the {plural(unread, 'file')} in {target.folder} could be "
            "indexed (each one's reason is in the summary)"
        )
    types = target.options.get("extensions") or SUPPORTED_EXTENSIONS
    return f"{where} {target.folder} holds no file of a type this corpus reads ({', '.join(types)})"


def _announce_watch(targets: list[Target], interval: float, stop: threading.Event) -> None:
    # SIGTERM (systemd, docker stop) ends the watch between scans, cleanly.
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    # To stderr: --json output on stdout stays clean.
    folders = ", ".join(f"{t.name} ({t.folder})" for t in targets)
    err.print(
        f"watching {folders}: indexing now, then every {interval:g} s when files change; "
        "Ctrl-C stops",
    )


def _index_rounds(
    idx: Index,
    loaded: LoadedSettings,
    targets: list[Target],
    held: contextlib.ExitStack,
    *,
    force: bool,
    workers: int,
    watch: bool,
    interval: float,
    as_json: bool,
) -> list[SyncReport]:
    """Index every target once, or with ``watch`` again after every ``interval`` until
    ``stop``; the reports of the last round. The first round runs in the caller's hold of
    the corpora (``held``, let go after it); each later one takes them again, and is
    skipped while another process writes them."""
    stop = threading.Event()
    if watch:
        _announce_watch(targets, interval, stop)
    reports: list[SyncReport] = []
    first = True
    while True:
        reports = []
        with contextlib.ExitStack() as hold:
            try:
                if not first:
                    hold.enter_context(idx.writing([t.name for t in targets]))
            except IndexLockedError as exc:
                err.print(f"skipping this scan: {exc}", markup=False)
            else:
                for target in targets:
                    report = _one_target(
                        idx, loaded, target, force=force, workers=workers, as_json=as_json
                    )
                    reports.append(report)
                    if as_json or not watch or report.touched or report.failed:
                        _print_report(report, idx, as_json)
        if not watch or stop.is_set():
            return reports
        held.close()
        force, first = False, False
        if not _wait(stop, interval):
            return reports


def _one_target(
    idx: Index, loaded: LoadedSettings, target: Target, *, force: bool, workers: int, as_json: bool
) -> SyncReport:
    """Index one corpus from its folder, in two phases with their progress."""
    from guaipeca.cli.corpora import remember
    from guaipeca.convert import FileLimits
    from guaipeca.ingest import sync_folder
    from guaipeca.progress import JobProgress

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
                files=target.files,
                **target.options,
            ),
        )
    remember(loaded, target)
    return report


def _targets(
    loaded: LoadedSettings, names: list[str] | None, path: Path | None, into: str | None = None
) -> list[Target]:
    from guaipeca.cli.corpora import Target
    from guaipeca.convert import OcrOptions

    s = loaded.settings
    if names == ["all"] and path is None and "all" not in {c.name for c in s.corpora}:
        names = None  # the original's 'guaipeca index all': every configured corpus
    given = _given_paths(loaded, names or []) if path is None else []
    if len(given) == 1 and given[0].is_dir():
        names, path = ([into] if into else []), given[0]  # 'guaipeca index FOLDER'
    elif given:
        return [_files_target(loaded, given, into)]
    elif into is not None:
        raise GuaipecaError("--corpus names where listed files go; list files after it")
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
        hint = did_you_mean(unknown[0], known)
        raise GuaipecaError(
            f"no corpus named {unknown[0]!r} in the config{'; ' + hint if hint else ''} "
            f"(corpora: {listed})"
        )
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


def _given_paths(loaded: LoadedSettings, args: list[str]) -> list[Path]:
    """The arguments as paths when they name files (or one folder) rather than configured
    corpora; [] when they are corpus names. Both at once is an error."""
    configured = {c.name for c in loaded.settings.corpora}
    paths = [Path(a) for a in args if a not in configured and Path(a).expanduser().exists()]
    if paths and len(paths) != len(args):
        raise GuaipecaError("name corpora or list files, not both")
    if len(paths) > 1 and any(p.is_dir() for p in paths):
        folder = next(p for p in paths if p.is_dir())
        raise GuaipecaError(f"{folder} is a folder: list files, or index one folder at a time")
    return [p.expanduser() for p in paths]


def _files_target(loaded: LoadedSettings, files: list[Path], into: str | None) -> Target:
    """``guaipeca index FILE...`` (A-RAG-OG's ``index.py``): these files into one corpus,
    their ids relative to the working folder (or to the folder they share)."""
    import os

    from guaipeca.cli.corpora import Target
    from guaipeca.convert import OcrOptions

    name = into or DEFAULT_CORPUS
    conf = {c.name: c for c in loaded.settings.corpora}.get(name)
    language = conf.language if conf is not None else None
    absolute = [Path(os.path.abspath(f)) for f in files]
    cwd = Path.cwd()
    shared = Path(os.path.commonpath([f.parent for f in absolute]))
    root = cwd if all(f.is_relative_to(cwd) for f in absolute) else shared
    options = {"language": language, "ocr": OcrOptions.from_settings(loaded.settings.ocr, language)}
    return Target(name, _check_folder(root), options, from_config=False, files=absolute)


def _check_folder(path: Path) -> Path:
    from guaipeca.cli.legacy import original_data_hint

    folder = path.expanduser().resolve()
    if not folder.is_dir():
        raise GuaipecaError(f"{path} is not a folder")
    hint = original_data_hint(folder)
    if hint is not None:
        raise GuaipecaError(hint)
    if folder == Path(folder.anchor):
        raise GuaipecaError("refusing to index the whole file system; name a folder")
    return folder


def _two_phases(
    idx: Index, job: JobProgress, name: str, keyword_phase: Callable[..., SyncReport]
) -> SyncReport:
    """Run the keyword phase (files converted and committed) while a thread embeds what it
    has committed so far, then finish the embedding phase; both show progress.

    The keyword line ends (one last line) as soon as its phase does. The embedding line
    counts chunks: while the keyword phase still adds some, it shows those known so far;
    its total is set once, when that phase is over, and never moves after."""
    files = job.task(f"{name}: searchable by keyword", "files")
    vectors = job.task(f"{name}: embedded", "chunks")
    embedded = [0, 0]  # inputs embedded (the summary's count), chunks given their vectors
    final = threading.Event()  # the keyword phase is over: done + pending is the total
    lock = threading.Lock()

    def on_round(done: int, left: int) -> None:
        with lock:
            count = embedded[1] + done
            if final.is_set():
                vectors.update(count, count + left)
            else:
                vectors.update(count, so_far=count + left)

    def embed_round() -> int:
        with lock:
            before = embedded[1]
        chunks = [0]

        def progress(done: int, left: int) -> None:
            chunks[0] = done
            on_round(done, left)

        count = idx.embed_pending(name, progress=progress)
        with lock:
            embedded[0] += count
            embedded[1] = before + chunks[0]
        return chunks[0]

    keyword_done = threading.Event()
    failed: list[Exception] = []

    def embed_meanwhile() -> None:
        try:
            while not keyword_done.is_set():
                if not embed_round():
                    keyword_done.wait(0.5)
        except Exception as exc:  # raised below, as one error of the command (a full disk)
            failed.append(exc)

    started = time.perf_counter()
    helper = threading.Thread(target=embed_meanwhile, name="embed", daemon=True)
    helper.start()
    try:
        report = keyword_phase(progress=files.update)
        files.finish()
        final.set()  # no chunk is added from here on: the helper's next round sets the total
    finally:
        keyword_done.set()
        helper.join()
    try:
        if failed:
            raise failed[0]
        embed_round()
    except GuaipecaError as exc:
        raise _vectors_pending(idx, name, exc) from exc
    with lock:
        vectors.update(embedded[1], embedded[1])
    vectors.finish()
    report.chunks_embedded = embedded[0]
    report.chunks_pending = 0
    report.seconds = time.perf_counter() - started
    return report


def _vectors_pending(idx: Index, name: str, exc: GuaipecaError) -> GuaipecaError:
    """The embedding phase failed (a slow or absent embedding server): the corpus is
    committed for keyword search and its vectors wait in the catalog; the next run
    resumes them. One line saying so, after the cause."""
    stats = next((c for c in idx.stats().corpora if c.name == name), None)
    waiting = stats.pending_chunks if stats is not None else 0
    if not waiting or not isinstance(exc, ModelError | BackendUnavailableError):
        return exc  # a full disk, a lock: its own message says what to do
    return type(exc)(
        f"{exc}; corpus {name!r} is searchable by keyword, and {waiting:,} chunks wait for "
        "vectors; run `guaipeca index` again"
    )


def _wait(stop: threading.Event, seconds: float) -> bool:
    """Sleep between --watch scans; False once Ctrl-C or SIGTERM asked us to stop."""
    try:
        return not stop.wait(seconds)
    except KeyboardInterrupt:
        return False


# Files converted faster than this are not worth naming in the summary.
_SLOW_FILE_SECONDS = 0.5
#: Files named per reason in a summary (a big folder may skip thousands); with --verbose
#: (or --json) every one is named.
SHOWN_PER_REASON = 5


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
            "skipped": [{"path": p, "reason": r, "kind": k} for p, r, k in report.skipped],
            "chunks_embedded": report.chunks_embedded,
            "documents": documents,
            "chunks": chunks,
            "seconds": round(report.seconds, 3),
            "keyword_seconds": round(report.keyword_seconds, 3),
            "slowest": [
                {"path": p, "seconds": round(t, 3), "chunks": n} for p, t, n in report.slowest
            ],
        }
        out.print_verbatim(json.dumps(data, ensure_ascii=False))
        return
    _print_unread(report)
    for path, warning in report.warnings:
        err.print(f"warning {path}: {warning}")
    out.print(
        f"{report.corpus}: {report.added} added, {report.changed} changed, {report.unchanged} "
        f"unchanged, {report.removed} removed, {len(report.skipped)} skipped, "
        f"{len(report.failed)} failed; "
        f"{plural(report.chunks_embedded, 'chunk')} embedded; {plural(chunks, 'chunk')} in "
        f"{plural(documents, 'document')} ({report.seconds:.1f} s; searchable by keyword "
        f"after {report.keyword_seconds:.1f} s)",
    )
    slow = [(p, t, n) for p, t, n in report.slowest if t >= _SLOW_FILE_SECONDS]
    if slow:
        listed = "; ".join(f"{p} {t:.1f} s ({plural(n, 'chunk')})" for p, t, n in slow)
        err.print(f"slowest files to convert: {listed}")


def _print_unread(report: SyncReport) -> None:
    """Each skipped file with its reason, grouped by kind of reason, then each failed one;
    at most ``SHOWN_PER_REASON`` per group unless --verbose."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for path, reason, kind in report.skipped:
        groups.setdefault(kind, []).append((path, reason))
    for kind, files in groups.items():
        _print_capped("skipped", kind, files)
    _print_capped("failed", "an error", report.failed)


def _print_capped(verb: str, kind: str, files: list[tuple[str, str]]) -> None:
    shown = files if state.verbose else files[:SHOWN_PER_REASON]
    for path, reason in shown:
        err.print(f"{verb} {path}: {reason}")
    if len(files) > len(shown):
        err.print(
            f"… and {len(files) - len(shown)} more {verb}: {kind} (every file: "
            "guaipeca --verbose index, or --json)",
            markup=False,
        )
