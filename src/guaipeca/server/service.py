"""What the MCP tools act on (server/tools/): the open index, the loaded settings, the
configured corpora and their folders (names and paths are checked in server/files.py).
Thread-safe: tools call it from worker threads; writes take one lock, reads never wait."""

import contextlib
import dataclasses
import functools
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from guaipeca.config import CorpusSettings, LoadedSettings, Settings, audit_path, did_you_mean
from guaipeca.convert import FileLimits, OcrOptions, convert_bytes
from guaipeca.errors import (
    ConversionError,
    DiskFullError,
    GuaipecaError,
    InvalidArgumentError,
    NotFoundError,
    StoppedError,
    disk_full,
    free_bytes,
)
from guaipeca.index import Index, check_chunk_count, count_chunks
from guaipeca.ingest import ConversionCache, SyncReport, cache_key, contained, sync_folder
from guaipeca.progress import RoundLog
from guaipeca.server.access import AccessPolicy
from guaipeca.server.audit import AuditLog
from guaipeca.server.files import (
    PreparedUpload,
    check_name,
    check_subfolder,
    check_upload,
    existing_is_same,
    fsync_dir,
    real_path,
    remove_temp_uploads,
    sha256_of,
    write_upload,
)
from guaipeca.server.guard import CorpusGuard
from guaipeca.server.idle import ToolCalls
from guaipeca.server.jobs import JOBS_FILE, Job, Jobs, StoreStage
from guaipeca.server.limits import TokenBucket
from guaipeca.server.quota import UploadLedger
from guaipeca.server.schema import (
    ChunkOut,
    DeleteOut,
    FileProblem,
    HitOut,
    IndexSummary,
    UploadOut,
    chunk_out,
    hit_out,
)
from guaipeca.server.writes import ConversionSlots, WriteQueue, current_caller
from guaipeca.types import Chunk, Hit, IndexStats

__all__ = ["CONVERSIONS_AT_ONCE", "WRITER_WAIT_SECONDS", "Service"]

log = logging.getLogger("guaipeca.server")

#: How long a write waits for another process that writes the same corpus (a CLI
#: ``guaipeca index``) before it fails, naming that process.
WRITER_WAIT_SECONDS = 60.0
#: Uploads converting at once (one per caller): OCR takes a core and up to ~300 MB each.
CONVERSIONS_AT_ONCE = 2
# After a write failed on a full disk, /health says "degraded" until a write succeeds or
# this much more space is free than when it failed.
_FREED_BYTES = 1 << 20


# -- the service -------------------------------------------------------------------------
class Service:
    """What the tools act on: the open index, the loaded settings and how to re-index.

    Thread-safe: tools call it from worker threads. Writes (:meth:`reindex`,
    :meth:`upload`, :meth:`delete`) take one lock; reads never wait for it.
    """

    def __init__(self, index: Index, loaded: LoadedSettings) -> None:
        self.index = index
        self.loaded = loaded
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._running: tuple[str, float] | None = None
        # The last write that failed on a full disk: (message, folder, free bytes then).
        self._disk_full: tuple[str, Path, int | None] | None = None
        #: Tool calls running and done, for giving memory back when idle (server/idle.py).
        self.tool_calls = ToolCalls()
        #: Requests and tool calls per caller (the HTTP rate limit and the tools share it).
        self.rate_bucket = TokenBucket(
            loaded.settings.server.rate_limit_rps, loaded.settings.server.rate_limit_burst
        )
        #: Where writes (index, upload, delete) wait their turn (server/writes.py).
        self.writes = WriteQueue(
            loaded.settings.server.max_queued_writes, loaded.settings.server.max_writes_per_caller
        )
        #: Where uploads convert before they take their write turn (server/uploads.py).
        self.conversions = ConversionSlots(CONVERSIONS_AT_ONCE)
        #: Uploads answered 202 before their work was done (GET /jobs/{id}), kept in the
        #: data folder across restarts.
        self.jobs = Jobs(loaded.data_dir / JOBS_FILE, interrupted=self._interrupted_upload)
        up = loaded.settings.upload
        #: The bytes each identity's uploads keep (server/quota.py).
        self.ledger = UploadLedger(
            loaded.data_dir, up.max_bytes_per_identity, uploads_on=bool(up.allow)
        )
        self._corpora = {c.name: c for c in loaded.settings.corpora}
        audit = loaded.settings.audit
        #: Writes and denied requests (server/audit.py); who may do what (server/guard.py).
        self.audit = AuditLog(audit_path(audit, loaded.data_dir), audit.max_bytes, audit.backups)
        self.guard = CorpusGuard(
            AccessPolicy(loaded.settings.access), self.audit, list(self._corpora), index
        )
        self._roots = {c.name: real_path(c.path) for c in loaded.settings.corpora}
        self._data_dir = real_path(loaded.data_dir)
        self._replacements = self._path_replacements()
        for c in loaded.settings.corpora:
            if c.name in index.corpora:
                index.set_corpus_weight(c.name, c.weight)
        index.on_background_progress = RoundLog("embedding", "chunks", log.info)
        index.on_background_error = self._background_failed
        index.embed_in_background()  # embedding runs behind reads; resumes a killed run's

    @property
    def settings(self) -> Settings:
        return self.loaded.settings

    # -- corpora and paths -------------------------------------------------------------
    def corpus(self, name: str) -> CorpusSettings:
        """A configured corpus.

        Raises:
            NotFoundError: no corpus of that name in the configuration (or, under grants,
                none the caller may read).
        """
        if self.guard.limited and (name not in self._corpora or not self.guard.can_read(name)):
            raise self.guard.hidden(name)
        try:
            return self._corpora[name]
        except KeyError:
            known = ", ".join(self._corpora) or "none"
            hint = did_you_mean(name, self._corpora)
            raise NotFoundError(
                f"no configured corpus named {name!r:.70}{'; ' + hint if hint else ''} "
                f"(configured: {known})"
            ) from None

    def corpus_root(self, name: str) -> Path:
        """The configured folder of a corpus, with links resolved.

        Raises:
            NotFoundError: no such corpus, or its folder is missing.
        """
        self.corpus(name)
        root = self._roots[name]
        if not root.is_dir():
            raise NotFoundError(f"the folder of corpus {name!r} is missing or not a folder")
        return root

    def relative_path(self, corpus: str, source_path: str | None) -> str | None:
        """A source path as shown to clients: relative to its corpus folder, else only
        the file's name (server paths are not shown)."""
        if source_path is None:
            return None
        path = Path(source_path)
        if not path.is_absolute():
            return path.as_posix()
        roots = [self._roots[corpus]] if corpus in self._roots else []
        roots += [r for n, r in self._roots.items() if n != corpus]
        for root in roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        return path.name

    def scope(self, corpora: list[str] | None) -> list[str] | None:
        """The corpora a search or listing covers: those named, else the configured ones
        that are indexed (a corpus left in the data folder but not in the config file is
        not searched: ``status`` shows it with the command that drops it). A configured
        corpus not indexed yet is left out, named or not. Without a config file, every
        corpus (None)."""
        if self.loaded.source is None:
            return self.guard.scope(corpora, None)
        present = set(self.index.corpora)
        if corpora is not None:
            # A configured corpus not indexed yet is there, empty (issue 38): it finds nothing.
            named = self.guard.scope(corpora, None) or []
            return [n for n in named if n in present or n not in self._corpora]
        return self.guard.scope(None, [name for name in self._corpora if name in present])

    def unindexed(self, name: str) -> bool:
        """Whether ``name`` is a configured corpus not indexed yet: it exists from the first
        start, empty (an empty listing, an empty table of contents)."""
        return name in self._corpora and name not in self.index.corpora

    def searched(self, stats: IndexStats) -> IndexStats:
        """``stats`` of the corpora a search covers when it names none (:meth:`scope`): the
        totals of ``/health`` and ``status`` count these only, and list the others as not
        searched."""
        scope = self.scope(None)
        if scope is None:
            return stats
        kept = tuple(c for c in stats.corpora if c.name in scope)
        return dataclasses.replace(stats, corpora=kept)

    def document_id(self, path: str, corpus: str | None) -> tuple[str, str | None]:
        """``(doc_id, corpus)`` of a document named by its path, as the seed Guaipeca named
        documents: an absolute path inside a configured corpus folder, or a path relative
        to it (the doc id itself).

        Raises:
            NotFoundError: an absolute path outside every configured corpus folder.
        """
        given = Path(path)
        if not given.is_absolute():
            return given.as_posix(), corpus
        real = real_path(given)
        names = [corpus] if corpus is not None else self.guard.readable(list(self._roots))
        for name in names:
            root = self._roots.get(name)
            for candidate in (given, real):
                if root is not None and candidate.is_relative_to(root):
                    return candidate.relative_to(root).as_posix(), name
        where = f"corpus {corpus!r}'s folder" if corpus is not None else "any corpus folder"
        raise NotFoundError(f"{path!r:.200} is not inside {where}")

    def _path_replacements(self) -> list[tuple[re.Pattern[str], str]]:
        pairs: dict[str, str] = {}
        for c in self.settings.corpora:
            for p in (c.path, self._roots[c.name]):
                pairs[str(p)] = f"<{c.name} folder>"
        for p in (self.loaded.data_dir, self._data_dir):
            pairs[str(p)] = "<data folder>"
        if self.loaded.source is not None:
            pairs[str(self.loaded.source)] = "<config file>"
        with contextlib.suppress(RuntimeError):
            pairs.setdefault(str(Path.home()), "~")
        # Longest first, so a corpus inside the home folder keeps its own name; whole
        # paths only, so the home folder /root does not turn /rootfs into ~fs.
        return [
            (re.compile(re.escape(k) + r"(?![^/\s'\",;:)\]}])"), v)
            for k, v in sorted(pairs.items(), key=lambda kv: -len(kv[0]))
            if len(k) > 1
        ]

    def sanitise(self, message: str) -> str:
        """One line of a user message with the server's own paths replaced."""
        line = " ".join(message.split()) or "error"
        for path, shown in self._replacements:
            line = path.sub(shown.replace("\\", r"\\"), line)  # a literal replacement
        return line if len(line) <= 500 else line[:497] + "..."

    # -- indexing ----------------------------------------------------------------------
    @property
    def indexing(self) -> tuple[str, float] | None:
        """The corpus being indexed and the seconds since its run started, or None."""
        with self._state_lock:
            if self._running is None:
                return None
            name, started = self._running
        return name, time.monotonic() - started

    def reindex(self, corpus: str, *, force: bool = False) -> SyncReport:
        """Bring a configured corpus in line with its folder (see ``sync_folder``).

        Blocks while another write runs. ``force`` drops the corpus and rebuilds it.

        Raises:
            NotFoundError: the corpus is not configured, or its folder is missing.
            GuaipecaError: the corpus cannot be written (another model, locked, ...).
        """
        conf = self.corpus(corpus)
        with (
            self._write_lock,
            self.index.writing([corpus], wait=WRITER_WAIT_SECONDS),
            self.watching_disk(self.loaded.data_dir),
        ):
            return self._reindex_locked(conf, force=force)

    def _reindex_locked(self, conf: CorpusSettings, *, force: bool = False) -> SyncReport:
        root = self.corpus_root(conf.name)
        if root == Path(root.anchor):
            raise InvalidArgumentError(
                f"corpus {conf.name!r}: refusing to index the whole file system"
            )
        with self._state_lock:
            self._running = (conf.name, time.monotonic())
        try:
            report = sync_folder(
                self.index,
                root,
                corpus=conf.name,
                extensions=conf.extensions,
                exclude=conf.exclude,
                language=conf.language,
                cache_dir=self.loaded.data_dir / "converted",
                skip=[self.loaded.data_dir],
                force=force,
                workers=0,
                progress=RoundLog(f"index {conf.name}", "files", log.info, of_total=True),
                wait=False,  # searchable by keyword now; embedded in the background
                limits=FileLimits(**self.settings.limits.model_dump()),
                ocr=OcrOptions.from_settings(self.settings.ocr, conf.language),
                stop=self.writes.stopping,
            )
            self.index.set_corpus_weight(conf.name, conf.weight)
        finally:
            with self._state_lock:
                self._running = None
        self.index.embed_in_background()
        log.info(
            "indexed %s: %d added, %d changed, %d removed, %d failed",
            conf.name,
            report.added,
            report.changed,
            report.removed,
            len(report.failed),
        )
        return report

    def summary(self, report: SyncReport) -> IndexSummary:
        """A sync report as clients see it (paths relative to the corpus folder)."""
        stats = next((c for c in self.index.stats().corpora if c.name == report.corpus), None)

        def problems(items: list[tuple[str, str]]) -> list[FileProblem]:
            return [
                FileProblem(
                    file=self.relative_path(report.corpus, p) or "",
                    reason=self.sanitise(r),
                )
                for p, r in items
            ]

        return IndexSummary(
            corpus=report.corpus,
            added=report.added,
            changed=report.changed,
            unchanged=report.unchanged,
            removed=report.removed,
            failed=problems(report.failed),
            warnings=problems(report.warnings),
            skipped=problems([(f.path, f.reason) for f in report.skipped]),
            chunks_embedded=report.chunks_embedded,
            documents=stats.documents if stats else 0,
            chunks=stats.chunks if stats else 0,
            seconds=round(report.seconds, 3),
        )

    @contextlib.contextmanager
    def audited(self, corpus: str | None) -> Iterator[None]:
        """Write the outcome of the write in the block (ok, or error and why) to the
        audit log, under the current caller and door."""
        try:
            yield
        except Exception as exc:
            why = self.sanitise(str(exc)) if isinstance(exc, GuaipecaError) else "internal error"
            self.audit.record(current_caller(), "error", corpus, why)
            raise
        self.audit.record(current_caller(), "ok", corpus)

    # -- a full disk -------------------------------------------------------------------
    @contextlib.contextmanager
    def watching_disk(self, folder: Path) -> Iterator[None]:
        """Turn a full disk met in the block into a :class:`DiskFullError` naming
        ``folder`` (one line, no traceback), noted for /health; a block that succeeds
        clears the note.

        Raises:
            DiskFullError: the block failed on a full disk (or quota).
        """
        try:
            yield
        except Exception as exc:
            full = disk_full(exc, folder)
            if full is None:
                raise
            self._note_disk_full(full)
            raise full from None
        with self._state_lock:
            self._disk_full = None

    def _note_disk_full(self, full: DiskFullError) -> None:
        log.warning("a write failed: %s", full)
        with self._state_lock:
            self._disk_full = (self.sanitise(str(full)), full.folder, full.free)

    def _background_failed(self, exc: Exception) -> bool:
        full = disk_full(exc, self.loaded.data_dir)
        if full is not None:
            self._note_disk_full(full)
        return full is not None

    def disk_problem(self) -> str | None:
        """Why writes fail (a full disk), until a write succeeds or space is freed."""
        with self._state_lock:
            noted = self._disk_full
        if noted is None:
            return None
        message, folder, free_then = noted
        free = free_bytes(folder)
        if free is not None and free >= (free_then or 0) + _FREED_BYTES:
            with self._state_lock:
                self._disk_full = None
            return None
        return message

    @property
    def configured(self) -> dict[str, CorpusSettings]:
        """The configured corpora by name, in configuration order (a copy)."""
        return dict(self._corpora)

    # -- reading -----------------------------------------------------------------------
    def chunk_out(self, chunk: Chunk) -> ChunkOut:
        return chunk_out(chunk, self.relative_path(chunk.corpus, chunk.source_path))

    def hit_out(self, hit: Hit) -> HitOut:
        return hit_out(hit, self.relative_path(hit.corpus, hit.source_path))

    # -- writing files -----------------------------------------------------------------
    def writable_corpus(self, corpus: str) -> CorpusSettings:
        """A corpus that accepts uploads and deletes, from this caller.

        Raises:
            NotFoundError: no such corpus (or, under grants, not readable).
            AccessDeniedError: under grants, readable but not writable.
            InvalidArgumentError: not in ``upload.allow``.
        """
        conf = self.corpus(corpus)
        self.guard.check_write(corpus)
        allowed = self.guard.readable(self.settings.upload.allow)
        if corpus not in allowed:
            listed = ", ".join(allowed) or "none"
            raise InvalidArgumentError(
                f"corpus {corpus!r} does not accept uploads or deletes "
                f"(upload.allow lists: {listed})"
            )
        return conf

    def check_served(self, corpus: str, doc_id: str, source_path: str | None) -> None:
        """Refuse a document whose file leads outside its corpus folder (a link indexed by
        a version before links were checked): its text is never served.

        Raises:
            NotFoundError: the file is such a link.
        """
        root = self._roots.get(corpus)
        if source_path is None or root is None or not os.path.isabs(source_path):
            return
        path = Path(source_path)
        if os.path.lexists(path) and contained(path, root, [self._data_dir])[0] is None:
            raise NotFoundError(f"no document {doc_id!r:.200} in corpus {corpus!r}")

    def _inside(self, corpus: str, root: Path, path: Path) -> None:
        real = real_path(path)
        if not real.is_relative_to(root) or real.is_relative_to(self._data_dir):
            raise InvalidArgumentError(f"that path is outside the folder of corpus {corpus!r}")

    def upload(
        self,
        corpus: str,
        filename: str,
        data: bytes,
        *,
        subfolder: str | None = None,
        overwrite: bool = False,
        index: bool | None = None,
    ) -> UploadOut:
        """Save a file into a corpus folder that accepts uploads, then index it if
        ``index`` (None: ``upload.auto_index``): :meth:`prepare_upload`, then
        :meth:`store_upload`. Nothing is written unless every check passes and the file
        converts.

        Raises:
            InvalidArgumentError: corpus not in ``upload.allow``, a bad name, extension or
                size, the file exists (without ``overwrite``), or it does not convert.
        """
        ready = self.prepare_upload(
            corpus, filename, data, subfolder=subfolder, overwrite=overwrite
        )
        return self.store_upload(ready, index=index)

    def prepare_upload(
        self,
        corpus: str,
        filename: str,
        data: bytes,
        *,
        subfolder: str | None = None,
        overwrite: bool = False,
        cancel: threading.Event | None = None,
    ) -> PreparedUpload:
        """Check an upload and convert it, writing nothing: the slow part, run outside the
        write turn, within ``limits.convert_timeout_seconds``, stopped when ``cancel`` is set.

        Raises:
            InvalidArgumentError: as :meth:`upload`; a conversion over its time budget too.
            AbandonedError: ``cancel`` was set.
        """
        conf = self.writable_corpus(corpus)
        up, ocr = self.settings.upload, OcrOptions.from_settings(self.settings.ocr, conf.language)
        name = check_name(filename)
        parts = check_subfolder(subfolder) if subfolder is not None else ()
        rel = PurePosixPath(*parts, name).as_posix()
        ext = PurePosixPath(name).suffix.lower()
        accepted = [e for e in up.allowed_extensions if e in conf.extensions]
        check_upload(rel, ext, data, corpus, accepted, conf.exclude, up.max_file_size)
        self.ledger.check(current_caller(), corpus, rel, len(data), self._upload_path)
        root = self.corpus_root(corpus)
        target = root.joinpath(*parts, name)
        self._inside(corpus, root, target.parent)
        shown = f"{rel!r:.300} in corpus {corpus!r}"
        existing_is_same(target, data, overwrite=overwrite, shown=shown)  # refused early
        limits = FileLimits(**self.settings.limits.model_dump())
        try:
            converted = convert_bytes(
                data,
                ext,
                name=name,
                max_bytes=up.max_file_size,
                limits=limits,
                ocr=ocr,
                cancel=cancel,
            )
            # Refused here, not by the index run after the file is written.
            engine = self.settings.engine()
            check_chunk_count(count_chunks(converted.text, engine), engine)
        except ConversionError as exc:
            raise InvalidArgumentError(
                f"{name!r} cannot be read as a {ext} file: {exc}; nothing was written"
            ) from None
        return PreparedUpload(
            corpus, rel, target, shown, data, overwrite, converted, cache_key(ocr)
        )

    def store_upload(self, ready: PreparedUpload, *, index: bool | None = None) -> UploadOut:
        """Write a prepared upload into its corpus folder and index it (the short part, in
        the write turn). A new file that cannot be indexed for a full disk is removed.

        Raises:
            InvalidArgumentError: the file appeared meanwhile (without ``overwrite``).
            DiskFullError: no room to write or index it.
        """
        with self.audited(ready.corpus):
            return self._store_upload(ready, index)

    def _store_upload(self, ready: PreparedUpload, index: bool | None) -> UploadOut:
        up, target, shown, data = self.settings.upload, ready.target, ready.shown, ready.data
        root = self.corpus_root(ready.corpus)
        # Checked again: another upload of that name may have landed while this converted.
        same = existing_is_same(target, data, overwrite=ready.overwrite, shown=shown)
        sha = hashlib.sha256(data).hexdigest()
        # The folder is checked again once made: one swapped for a link meanwhile.
        inside = functools.partial(self._inside, ready.corpus, root)
        new = not same and not os.path.lexists(target)
        # Again in the write turn: one identity's uploads converting together all passed
        # the early check; here they land one at a time.
        self.ledger.check(current_caller(), ready.corpus, ready.rel, len(data), self._upload_path)
        # Its job (if it has one) notes where the file goes: a restart can tell if it landed.
        self.jobs.storing(StoreStage(str(target), shown, sha, new))
        with self.watching_disk(root):
            replaced = (
                False
                if same
                else write_upload(target, data, overwrite=ready.overwrite, shown=shown, made=inside)
            )
        log.info("upload: wrote %s (%d bytes) into corpus %s", ready.rel, len(data), ready.corpus)
        try:
            with self.watching_disk(self.loaded.data_dir):
                # Keep the conversion, so the indexing run below need not convert again.
                ConversionCache(self.loaded.data_dir / "converted", ready.cache).put(
                    sha, ready.converted
                )
                indexed = (
                    self._index_upload(ready.corpus, shown)
                    if (up.auto_index if index is None else index)
                    else None
                )
        except DiskFullError as exc:
            if not new:  # a file replaced: the index still serves its earlier version
                raise
            # Not indexed: a file left in the folder would only be indexed by a later run.
            target.unlink(missing_ok=True)
            fsync_dir(target.parent)
            raise DiskFullError(exc.folder, quota=exc.quota, note=f"{shown} was not kept") from None
        self.ledger.record(current_caller(), ready.corpus, ready.rel, len(data))
        return UploadOut(
            corpus=ready.corpus,
            doc_id=ready.rel,
            bytes=len(data),
            sha256=sha,
            replaced=replaced,
            format=ready.converted.format,
            warnings=list(ready.converted.warnings),
            indexed=indexed,
        )

    def _interrupted_upload(self, job: Job) -> str:
        """What became of an upload a previous server process left running (its job's
        error): a conversion is in memory only, so nothing was written unless its store
        had begun; a temporary file a killed write left is removed."""
        again = "send it again (the same bytes are accepted)"
        stage = job.store
        if stage is None:
            return (
                "the server restarted before the upload ended; nothing from it was "
                f"written or indexed: {again}"
            )
        target = Path(stage.target)
        remove_temp_uploads(target.parent)
        if sha256_of(target) == stage.sha256:
            return (
                f"the server restarted while {stage.shown} was being indexed: the file is "
                "in the corpus folder but may not be indexed yet; the next index run "
                f"indexes it, or {again}"
            )
        kept = "" if stage.new else " (the earlier version is unchanged)"
        return (
            f"the server restarted before {stage.shown} was written; nothing from it was "
            f"written or indexed{kept}: {again}"
        )

    def _index_upload(self, corpus: str, shown: str) -> IndexSummary:
        try:
            return self.summary(self.reindex(corpus))
        except StoppedError as exc:
            raise StoppedError(
                f"{shown} was saved, but the server is shutting down before it was indexed; "
                "send it again once the server is back (the same bytes are accepted)"
            ) from exc
        except DiskFullError:
            raise  # the upload removes the file it wrote
        except GuaipecaError as exc:
            raise GuaipecaError(f"{shown} was saved, but indexing failed: {exc}") from exc

    def delete(self, corpus: str, doc_id: str, *, index: bool = True) -> DeleteOut:
        """Remove a document from the index (unless ``index`` is false: then the next
        indexing run drops it) and, when it is a file inside the corpus folder, the file
        from disk. Only corpora listed in ``upload.allow``.

        Raises:
            InvalidArgumentError: the corpus does not accept deletes.
            NotFoundError: no such document.
        """
        with self.audited(corpus):
            self.writable_corpus(corpus)
            return self._delete(corpus, doc_id, index)

    def _delete(self, corpus: str, doc_id: str, index: bool) -> DeleteOut:
        with (
            self._write_lock,
            self.index.writing([corpus], wait=WRITER_WAIT_SECONDS),
            self.watching_disk(self.loaded.data_dir),
        ):
            doc = self.index.get_document(doc_id, corpus=corpus)
            path = self._file_of(corpus, doc_id, doc.source_path)
            deleted = False
            if path is not None and os.path.lexists(path):
                path.unlink()
                fsync_dir(path.parent)
                deleted = True
                log.info("delete: removed %s from corpus %s", doc_id, corpus)
                self.ledger.forget(corpus, doc_id)
            removed = index and self.index.delete_document(doc_id, corpus=corpus)
        return DeleteOut(
            corpus=corpus, doc_id=doc_id, removed_from_index=removed, file_deleted=deleted
        )

    def _upload_path(self, corpus: str, rel: str) -> Path:
        return self.corpus_root(corpus).joinpath(*PurePosixPath(rel).parts)

    def _file_of(self, corpus: str, doc_id: str, source_path: str | None) -> Path | None:
        """The document's file when it lies inside the corpus folder under its own id
        (as a folder scan stores it), else None: nothing outside is ever touched."""
        if source_path is None:
            return None
        root = self._roots[corpus]
        parts = PurePosixPath(doc_id).parts
        if not parts or doc_id.startswith("/") or any(p in ("", ".", "..") for p in parts):
            return None
        candidate = root.joinpath(*parts)
        parent = real_path(candidate.parent)
        if not parent.is_relative_to(root) or parent.is_relative_to(self._data_dir):
            return None
        source = Path(source_path)
        if real_path(source.parent) / source.name != parent / candidate.name:
            return None
        if os.path.lexists(candidate) and not (candidate.is_symlink() or candidate.is_file()):
            return None
        return parent / candidate.name
