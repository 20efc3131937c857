"""Keep a corpus in step with a folder: convert new and changed files (cached by content
hash), add them, drop files that are gone, and report the ones that fail.

Incremental rule: a file whose size and mtime match what the index recorded is skipped
unread; any other file is hashed (SHA-256), and only a new hash is converted; unchanged
chunks of a changed file keep their vectors (see ``Index.add_documents``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from guaipeca.config import EngineSettings
from guaipeca.convert import (
    DEFAULT_MAX_BYTES,
    IMAGE_EXTENSIONS,
    NO_OCR_FOR_IMAGES,
    SUPPORTED_EXTENSIONS,
    Converted,
    FileLimits,
    OcrOptions,
    convert_bytes,
)
from guaipeca.convert.cache import ConversionCache, cache_key
from guaipeca.errors import (
    ConversionError,
    ConversionTimeoutError,
    GuaipecaError,
    InvalidArgumentError,
    NoTextError,
    StoppedError,
    TooLargeError,
)
from guaipeca.index import Index
from guaipeca.index.write import ChunkPlan, plan_chunks
from guaipeca.types import MAX_DOC_ID_CHARS, NewDocument, SkippedFile, SourceState

__all__ = [
    "KEPT_NOTE",
    "SKIP_KINDS",
    "ConversionCache",
    "SyncReport",
    "cache_key",
    "contained",
    "sync_folder",
    "watch_folder",
]

log = logging.getLogger("guaipeca")

#: Added to a failure's reason when the file's earlier version is still in the index.
KEPT_NOTE = "; the version indexed earlier is still served"
#: ``workers=0``: at most this many worker processes, and none below this many files to
#: read (starting a process costs about a second; a few files are read faster in place).
AUTO_WORKERS = 4
AUTO_WORKERS_MIN_FILES = 32
#: How many of the slowest files a run reports.
SLOWEST_FILES = 5
_ADD_BATCH_CHARS = 2_000_000
Progress = Callable[[int, int], None]
# Why a file was skipped, not failed: nothing is wrong with it, it just holds nothing to index
# (the kind groups the report's skipped files; each keeps its own one-line reason).
UNSUPPORTED = "unsupported file type"
NO_TEXT = "no text to index"
TOO_BIG = "too big"
NO_OCR = "image without OCR"
NEVER_READ = "never read"
TOO_SLOW = "too slow"
SKIP_KINDS = (UNSUPPORTED, NO_TEXT, TOO_BIG, NO_OCR, NEVER_READ, TOO_SLOW)


@dataclass
class SyncReport:
    """What one pass over a folder did."""

    corpus: str
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    # Chunks committed for keyword search whose vectors are still to come (wait=False).
    chunks_pending: int = 0
    #: Files that could not be indexed because of an error (corrupt, unreadable), with why.
    failed: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    #: Files not indexed though nothing is wrong with them, with why (``SKIP_KINDS``): an
    #: unsupported type, empty, no text found, too big, an image without OCR, a link out.
    skipped: list[SkippedFile] = field(default_factory=list)
    seconds: float = 0.0
    # Seconds from the start until every document of the run was searchable by keyword.
    keyword_seconds: float = 0.0
    # (path, seconds converting it, chunks) of the slowest files, slowest first.
    slowest: list[tuple[str, float, int]] = field(default_factory=list)

    @property
    def touched(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    @property
    def indexed(self) -> bool:
        """Whether any file of the folder is in the corpus now (new, changed or unchanged)."""
        return bool(self.added or self.changed or self.unchanged)


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: Path
    real: Path  # what is read: the file itself, or the target of a link inside the folder
    rel: str
    size: int
    mtime_ns: int
    sha256: str


def _excluded(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel + "/", p) for p in patterns)


def _walk(root: Path, exclude: Sequence[str], failed: list[tuple[str, str]]) -> Iterator[Path]:
    def on_error(exc: OSError) -> None:
        failed.append((str(exc.filename or root), _reason(exc)))

    # followlinks=False: a symlink loop cannot trap the walk; linked files are still read
    # when they lead to a file inside the folder (see contained()).
    for top, dirs, files in os.walk(root, onerror=on_error, followlinks=False):
        here = Path(top)
        rel_top = here.relative_to(root).as_posix()
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and not _excluded(d if rel_top == "." else f"{rel_top}/{d}", exclude)
        )
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if not name.startswith(".") and not _excluded(rel, exclude):
                yield path


OUTSIDE_FOLDER = "a link to a file outside the corpus folder (never read)"
IN_SKIPPED_FOLDER = "a link into Guaipeca's own data folder (never read)"


def contained(path: Path, root: Path, skip: Sequence[Path] = ()) -> tuple[Path | None, str]:
    """``(real path, "")`` when ``path`` resolves (links followed) to a file inside the
    real folder ``root`` and outside every ``skip`` folder, else ``(None, reason)``.

    A file of a corpus is read through its real path only after this check, so a link
    such as ``passwd.md -> /etc/passwd`` is never read, indexed or served; links that stay
    inside the folder keep working.
    """
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None, "a broken link or unreadable path"
    if not real.is_relative_to(root):
        return None, OUTSIDE_FOLDER
    if any(real.is_relative_to(s) for s in skip):
        return None, IN_SKIPPED_FOLDER
    return real, ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Refused(NamedTuple):
    """Why a file gave no document: ``kind`` (``SKIP_KINDS``) when nothing is wrong with it,
    "" for an error."""

    reason: str
    kind: str = ""


def _timed_convert(
    path: str, max_bytes: int, limits: FileLimits, ocr: OcrOptions, name: str
) -> tuple[Converted | _Refused, float]:
    """Worker entry: what ``_convert_path`` returns, and the seconds it took."""
    started = time.perf_counter()
    result = _convert_path(path, max_bytes, limits, ocr, name)
    return result, time.perf_counter() - started


@dataclass(frozen=True, slots=True)
class _PlanFor:
    """What a worker needs to chunk and enrich a document the way the index will."""

    corpus: str
    language: str
    settings: EngineSettings


def _worker(
    path: str,
    cached: Converted | None,
    max_bytes: int,
    limits: FileLimits,
    ocr: OcrOptions,
    doc_id: str,
    plan_for: _PlanFor,
) -> tuple[Converted | _Refused, float, ChunkPlan | None]:
    """Worker process entry: convert the file (unless ``cached``), then chunk and enrich
    it (the keyword phase's main cost), so the parent only writes."""
    if cached is not None:
        result: Converted | _Refused = cached
        seconds = 0.0
    else:
        result, seconds = _timed_convert(path, max_bytes, limits, ocr, PurePosixPath(doc_id).name)
    planned, plan = _planned(result, doc_id, plan_for)
    return planned, seconds, plan


def _planned(
    result: Converted | _Refused, doc_id: str, plan_for: _PlanFor
) -> tuple[Converted | _Refused, ChunkPlan | None]:
    """``result`` chunked and enriched, or why it is refused (over chunking.max_chunks)."""
    if isinstance(result, _Refused):
        return result, None
    try:
        plan = plan_chunks(
            f"{plan_for.corpus}/{doc_id}",
            result.text,
            result.page_starts,
            plan_for.language,
            plan_for.settings,
        )
    except TooLargeError as exc:
        return _Refused(str(exc), TOO_BIG), None
    return result, plan


def _convert_path(
    path: str, max_bytes: int, limits: FileLimits, ocr: OcrOptions, name: str
) -> Converted | _Refused:
    """The converted file (read at ``path``, typed by the ``name`` it has in the corpus),
    or why there is none."""
    try:
        p = Path(path)
        size = p.stat().st_size
        if size > max_bytes:
            return _Refused(_too_big(size, max_bytes), TOO_BIG)
        typed = PurePosixPath(name)
        return convert_bytes(
            p.read_bytes(),
            typed.suffix,
            name=typed.name,
            max_bytes=max_bytes,
            limits=limits,
            ocr=ocr,
        )
    except NoTextError as exc:
        return _Refused(str(exc), NO_TEXT)
    except TooLargeError as exc:
        return _Refused(str(exc), TOO_BIG)
    except ConversionTimeoutError as exc:  # limits.convert_timeout_seconds
        return _Refused(str(exc), TOO_SLOW)
    except ConversionError as exc:
        return _Refused(str(exc))
    except OSError as exc:
        return _Refused(_reason(exc))


def sync_folder(
    index: Index,
    folder: str | os.PathLike[str],
    *,
    corpus: str = "default",
    extensions: Sequence[str] = SUPPORTED_EXTENSIONS,
    exclude: Sequence[str] = (),
    language: str | None = None,
    cache_dir: Path | None = None,
    force: bool = False,
    workers: int = 1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    skip: Sequence[Path] = (),
    progress: Progress | None = None,
    wait: bool = True,
    limits: FileLimits | None = None,
    ocr: OcrOptions | None = None,
    stop: threading.Event | None = None,
    files: Sequence[Path] | None = None,
) -> SyncReport:
    """Bring ``corpus`` in line with the files under ``folder`` (only ``files``, removing
    nothing else, when given: A-RAG-OG's ``index.py``); ids are relative paths.

    ``skip``: folders never read (our data folder). Each file not indexed is named, in
    ``skipped`` (``SKIP_KINDS``) when nothing is wrong with it, else in ``failed``; not
    hidden files, ``exclude`` matches, supported types not in ``extensions``. ``stop`` ends
    the run at the next file or batch with :class:`StoppedError` (what was added so far
    stays; the next run does the rest). ``force`` drops the corpus and converts and embeds
    everything again. ``workers=0``: one process per core (up to ``AUTO_WORKERS``) when
    there are at least ``AUTO_WORKERS_MIN_FILES`` files to read, else none. ``workers`` > 1
    converts files in that many processes, which run ahead while the documents already
    converted are committed; the result is identical to ``workers=1``. ``wait=False``
    returns once every document is searchable by keyword, leaving new chunks pending for
    the embedding phase (``Index.embed_pending`` / ``embed_in_background``). ``limits``:
    how much of one big file is read (pages, cells, characters); a file over a limit is
    indexed up to it, with a warning in the report. ``ocr`` says how scanned pages and
    images are read (default: OCR when Tesseract is installed, in ``language``). What a
    converter notes (the detected encoding, the pages read with OCR) is document metadata.

    Raises:
        InvalidArgumentError: ``folder`` is not a readable directory, or ``workers`` < 1.
        StoppedError: ``stop`` was set.
    """
    started = time.perf_counter()
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise InvalidArgumentError(f"{folder} is not a folder")
    if workers < 0:
        raise InvalidArgumentError("workers must be at least 0 (0: one per core)")
    if force:
        index.drop_corpus(corpus)
    index.create_corpus(corpus, language=language)
    ocr = ocr if ocr is not None else OcrOptions(language=language)
    cache = ConversionCache(cache_dir, cache_key(ocr))
    report = SyncReport(corpus)
    exts = tuple(e.lower() for e in extensions)
    known = {s.doc_id: s for s in index.source_states(corpus)}

    # 1. Which files changed (size+mtime, then hash); never our own data folder.
    skipped = [Path(p).expanduser().resolve() for p in skip]
    candidates, seen = _changed_files(
        root, exts, exclude, skipped, known, force, max_bytes, ocr, report, files
    )
    # 2-3. Convert what the cache does not have (in worker processes if asked, running
    # ahead), and add in path order as results arrive, so any number of workers gives the
    # same index and the first documents are searchable while later ones still convert.
    if workers == 0:
        auto = min(AUTO_WORKERS, os.cpu_count() or 1)
        workers = auto if len(candidates) >= AUTO_WORKERS_MIN_FILES else 1
    plan_for = _PlanFor(corpus, index.corpus_language(corpus), index.settings)
    reading = (max_bytes, limits or FileLimits(), ocr)
    conversions = _conversions(candidates, cache, force, workers, reading, plan_for)
    adder = _Adder(index, corpus, report, wait, _stopper(corpus, stop))
    timings = _add_converted(conversions, len(candidates), cache, known, adder, progress)
    report.keyword_seconds = time.perf_counter() - started
    _note_slowest(index, corpus, timings, report)
    # 4. Files that are gone leave the index (not when only ``files`` were read).
    report.removed += _remove_gone(index, corpus, known, seen) if files is None else 0
    report.seconds = time.perf_counter() - started
    return report


def _remove_gone(
    index: Index, corpus: str, known: Mapping[str, SourceState], seen: set[str]
) -> int:
    """Delete the documents of files no longer in the folder (documents added through the
    API, with no source file, stay); how many were."""
    removed = 0
    for doc_id, state in known.items():
        if state.source_path is not None and doc_id not in seen:
            removed += int(index.delete_document(doc_id, corpus=corpus))
    return removed


def _changed_files(
    root: Path,
    exts: tuple[str, ...],
    exclude: Sequence[str],
    skipped: list[Path],
    known: Mapping[str, SourceState],
    force: bool,
    max_bytes: int,
    ocr: OcrOptions,
    report: SyncReport,
    listed: Sequence[Path] | None = None,
) -> tuple[list[_Candidate], set[str]]:
    """The files to (re)index, with their hashes, and every file seen (by relative path).
    Unchanged files (same path, size and mtime) are counted, unreadable ones reported.
    Without OCR an image has no text to read: it is skipped before it is hashed, not
    failed (a folder of documents with pictures in it is not broken), and one indexed
    before stays as it was. So is a file too big to read."""
    unreadable = () if ocr.engine() is not None else IMAGE_EXTENSIONS
    candidates: list[_Candidate] = []
    seen: set[str] = set()
    paths = []
    # A listed file's folder is resolved as ``root`` is, its own name kept (a link stays one).
    walked = (
        _walk(root, exclude, report.failed)
        if listed is None
        else (Path(f).parent.resolve() / Path(f).name for f in listed)
    )
    for p in walked:
        suffix = p.suffix.lower()
        if any(p.is_relative_to(s) for s in skipped):
            continue  # our own data folder
        if suffix in exts:
            paths.append(p)
        elif suffix not in SUPPORTED_EXTENSIONS:  # a supported one left out is the config's
            shown = f"'{suffix}'" if suffix else "(no extension)"
            report.skipped.append(SkippedFile(str(p), f"{UNSUPPORTED} {shown}", UNSUPPORTED))
    for path in paths:
        rel = path.relative_to(root).as_posix()
        real, why = contained(path, root, skipped)
        if real is not None and len(rel) > MAX_DOC_ID_CHARS:
            real, why = None, f"a path longer than {MAX_DOC_ID_CHARS:,} characters (never read)"
        if real is None:
            report.skipped.append(SkippedFile(str(path), why, NEVER_READ))
            continue
        try:
            st = real.stat()
            if not real.is_file():
                raise IsADirectoryError(f"{rel} is not a regular file")
        except OSError as exc:
            report.failed.append((str(path), _reason(exc)))
            continue
        seen.add(rel)
        state = known.get(rel)
        if (
            not force
            and state is not None
            and state.source_path == str(path)
            and state.size == st.st_size
            and state.mtime_ns == st.st_mtime_ns
        ):
            report.unchanged += 1
            continue
        if path.suffix.lower() in unreadable:
            report.skipped.append(SkippedFile(str(path), NO_OCR_FOR_IMAGES, NO_OCR))
            continue
        # From here on a failure leaves an indexed earlier version in place: say so.
        kept = KEPT_NOTE if state is not None else ""
        if st.st_size > max_bytes:
            why = _too_big(st.st_size, max_bytes) + kept
            report.skipped.append(SkippedFile(str(path), why, TOO_BIG))
            continue
        try:
            sha = _sha256(real)
        except OSError as exc:
            report.failed.append((str(path), _reason(exc) + kept))
            continue
        candidates.append(_Candidate(path, real, rel, st.st_size, st.st_mtime_ns, sha))
    return candidates, seen


def _add_converted(
    conversions: AbstractContextManager[Iterator[_Result]],
    total: int,
    cache: ConversionCache,
    known: Mapping[str, SourceState],
    adder: _Adder,
    progress: Progress | None,
) -> list[tuple[_Candidate, float]]:
    """Add each converted file as it arrives (failures to the report); the conversion
    seconds of each file added."""
    report = adder.report
    timings: list[tuple[_Candidate, float]] = []
    if progress:
        progress(0, total)
    with conversions as results:
        for done, (c, result, seconds, fresh, plan) in enumerate(results, start=1):
            adder.check_stop()
            if isinstance(result, _Refused):
                why = result.reason + (KEPT_NOTE if c.rel in known else "")
                if result.kind:
                    report.skipped.append(SkippedFile(str(c.path), why, result.kind))
                else:
                    report.failed.append((str(c.path), why))
            else:
                if fresh:
                    cache.put(c.sha256, result)
                for warning in result.warnings:
                    report.warnings.append((str(c.path), warning))
                timings.append((c, seconds))
                adder.add(c, result, plan)
            if progress:
                progress(done, total)
    adder.flush()
    return timings


def _note_slowest(
    index: Index, corpus: str, timings: list[tuple[_Candidate, float]], report: SyncReport
) -> None:
    for c, seconds in sorted(timings, key=lambda t: -t[1])[:SLOWEST_FILES]:
        try:
            chunks = index.get_document(c.rel, corpus=corpus).chunk_count
        except GuaipecaError:
            chunks = 0
        report.slowest.append((str(c.path), seconds, chunks))


def _stopper(corpus: str, stop: threading.Event | None) -> Callable[[], None]:
    def check_stop() -> None:
        if stop is not None and stop.is_set():
            raise StoppedError(
                f"indexing of corpus {corpus!r} stopped (shutting down); what was added "
                "stays, and the next run does the rest"
            )

    return check_stop


class _Adder:
    """Documents gathered into batches of about ``_ADD_BATCH_CHARS`` characters, each added
    in one ``add_documents`` call (one keyword commit). ``check_stop`` runs before each
    file and each batch (it raises once the run must stop)."""

    def __init__(
        self,
        index: Index,
        corpus: str,
        report: SyncReport,
        wait: bool,
        check_stop: Callable[[], None],
    ) -> None:
        self.index, self.corpus, self.report, self.wait = index, corpus, report, wait
        self.check_stop = check_stop
        self.batch: list[NewDocument] = []
        self.chars = 0

    def add(self, c: _Candidate, result: Converted, plan: ChunkPlan | None) -> None:
        self.batch.append(
            NewDocument(
                doc_id=c.rel,
                text=result.text,
                metadata=dict(result.metadata),
                source_path=str(c.path),
                modified=c.mtime_ns / 1e9,
                page_starts=result.page_starts,
                source_sha256=c.sha256,
                source_size=c.size,
                source_mtime_ns=c.mtime_ns,
                plan=plan,
            )
        )
        self.chars += len(result.text)
        if self.chars >= _ADD_BATCH_CHARS:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        self.check_stop()
        result = self.index.add_documents(self.batch, corpus=self.corpus, wait=self.wait)
        report = self.report
        report.added += result.added
        report.changed += result.replaced + result.metadata_updated
        report.unchanged += result.unchanged
        report.chunks_embedded += result.chunks_embedded
        report.chunks_pending += result.chunks_pending
        self.batch.clear()
        self.chars = 0


_Result = tuple[_Candidate, Converted | _Refused, float, bool, ChunkPlan | None]


@contextmanager
def _conversions(
    candidates: Sequence[_Candidate],
    cache: ConversionCache,
    force: bool,
    workers: int,
    reading: tuple[int, FileLimits, OcrOptions],
    plan_for: _PlanFor,
) -> Iterator[Iterator[_Result]]:
    """``(candidate, converted or reason, seconds, freshly converted, chunk plan)`` in the
    order of ``candidates``. With ``workers`` > 1, worker processes run ahead of the
    consumer converting files (cached ones are not converted again) and chunking and
    enriching them; with one, the same happens in this process."""
    cached = {c.rel: hit for c in candidates if not force and (hit := cache.get(c.sha256))}
    if workers > 1 and len(candidates) > 1:
        # spawn, not fork: the parent may hold ONNX Runtime and tantivy threads.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {
                c.rel: pool.submit(
                    _worker, str(c.real), cached.get(c.rel), *reading, c.rel, plan_for
                )
                for c in candidates
            }

            def pooled() -> Iterator[_Result]:
                for c in candidates:
                    result, seconds, plan = futures.pop(c.rel).result()
                    yield c, result, seconds, c.rel not in cached, plan

            try:
                yield pooled()
            finally:
                for fut in futures.values():
                    fut.cancel()
        return

    def inline() -> Iterator[_Result]:
        # Chunked here as a worker would, so a document over chunking.max_chunks is one
        # skipped file, not a failed batch (the index uses the plan: no work is repeated).
        for c in candidates:
            fresh = c.rel not in cached
            converted, seconds = (
                _timed_convert(str(c.real), *reading, c.path.name)
                if fresh
                else (cached[c.rel], 0.0)
            )
            result, plan = _planned(converted, c.rel, plan_for)
            yield c, result, seconds, fresh, plan

    yield inline()


def watch_folder(
    index: Index,
    folder: str | os.PathLike[str],
    *,
    interval: float = 2.0,
    stop: threading.Event | None = None,
    on_report: Callable[[SyncReport], None] | None = None,
    **options: object,
) -> None:
    """Re-sync ``folder`` every ``interval`` seconds until ``stop`` is set.

    Polling on size and mtime: portable (network drives, containers) and cheap, since
    unchanged files are not read.
    """
    stop = stop or threading.Event()
    while not stop.is_set():
        report = sync_folder(index, folder, **options)  # type: ignore[arg-type]
        if on_report is not None:
            on_report(report)
        stop.wait(interval)


def _too_big(size: int, limit: int) -> str:
    mib = 1024 * 1024  # the same unit as the converters' messages
    return f"file is {size / mib:.1f} MB; the limit is {limit / mib:.1f} MB"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not text in a known encoding"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__
