"""What the MCP tools act on (server/tools/): the open index, the loaded settings, the
configured corpora and their folders, and the checks every path and file name an agent sends
goes through before anything touches the disk.

Thread-safe: tools call it from worker threads. Writes (re-index, upload, delete) take one
lock; reads never wait for it.
"""

import base64
import binascii
import contextlib
import dataclasses
import fnmatch
import hashlib
import logging
import os
import re
import secrets
import threading
import time
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any

from guaipeca import __version__
from guaipeca.config import CorpusSettings, LoadedSettings, Settings
from guaipeca.convert import FileLimits, OcrOptions, convert_bytes
from guaipeca.embed import identity_of
from guaipeca.errors import (
    BackendUnavailableError,
    ConversionError,
    GuaipecaError,
    InvalidArgumentError,
    NotFoundError,
)
from guaipeca.index import Index
from guaipeca.ingest import ConversionCache, SyncReport, cache_key, sync_folder
from guaipeca.progress import RoundLog
from guaipeca.server.idle import ToolCalls
from guaipeca.server.schema import (
    BrokenCorpus,
    ChunkOut,
    CorpusStatus,
    DeleteOut,
    FileProblem,
    FolderOut,
    FoldersOut,
    HitOut,
    IndexingState,
    IndexSummary,
    ScoresOut,
    StatusOut,
    UploadLimits,
    UploadOut,
    chunk_fields,
)
from guaipeca.types import Chunk, Hit, IndexStats

__all__ = ["MAX_NAME_BYTES", "MAX_SUBFOLDER_DEPTH", "Service", "check_name", "check_subfolder"]

log = logging.getLogger("guaipeca.server")

#: Longest file name component, in UTF-8 bytes (the limit of common file systems).
MAX_NAME_BYTES = 255
#: Deepest subfolder an upload may name.
MAX_SUBFOLDER_DEPTH = 16

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Control, format (e.g. right-to-left override), private-use, surrogate, unassigned and
# line/paragraph separator characters: invisible or misleading in a file name.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


# -- names and paths -------------------------------------------------------------------
def _name_problem(name: str) -> str | None:
    if "/" in name or "\\" in name:
        return "it must not contain '/' or '\\'"
    if any(unicodedata.category(c) in _BAD_CATEGORIES for c in name):
        return "it must not contain control or invisible characters"
    if ".." in name:
        return "it must not contain '..'"
    if name.startswith("."):
        return "hidden names (starting with '.') are not allowed"
    if name != name.strip():
        return "it must not start or end with a space"
    if _PERCENT_ESCAPE.search(name):
        return "it must not contain percent-escapes such as %2e"
    return None


def check_name(raw: object, what: str = "filename") -> str:
    """A plain file or folder name, NFC-normalised.

    Checked both as NFC and as NFKC, so look-alikes that compatibility-normalise to a
    separator or a dot (full-width '／', '．．', the two-dot leader) are refused too.

    Raises:
        InvalidArgumentError: empty, too long, a path, hidden, or with invisible characters.
    """
    if not isinstance(raw, str) or not raw:
        raise InvalidArgumentError(f"{what} must be a non-empty name")
    name = unicodedata.normalize("NFC", raw)
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_NAME_BYTES} bytes")
    for form in (name, unicodedata.normalize("NFKC", name)):
        problem = _name_problem(form)
        if problem is not None:
            raise InvalidArgumentError(f"{what} {raw!r:.80} is not a plain name: {problem}")
    return name


def check_subfolder(raw: object) -> tuple[str, ...]:
    """A relative folder path written with '/', as checked names.

    Raises:
        InvalidArgumentError: absolute, with '..', '\\', empty or hidden parts, or too deep.
    """
    if not isinstance(raw, str) or not raw.strip("/"):
        raise InvalidArgumentError("subfolder must be a relative folder path such as 'notes/2024'")
    if raw.startswith("/"):
        raise InvalidArgumentError(f"subfolder {raw!r:.80} must be relative, not absolute")
    parts = raw.strip("/").split("/")
    if len(parts) > MAX_SUBFOLDER_DEPTH:
        raise InvalidArgumentError(f"subfolder is deeper than {MAX_SUBFOLDER_DEPTH} folders")
    return tuple(check_name(p, "subfolder part") for p in parts)


def _excluded(rel: str, patterns: list[str]) -> bool:
    # The same rule as the folder walk of ingest: a file or any of its folders may match.
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p + "/", pat)
        for p in prefixes
        for pat in patterns
    )


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_new(target: Path, data: bytes, *, overwrite: bool, shown: str) -> bool:
    """Write ``data`` to ``target`` atomically (temp file, fsync, rename); True if it
    replaced a file. Without ``overwrite`` an existing file is never clobbered, even one
    created meanwhile: the temp file is hard-linked into place, which fails if it exists."""
    exists_error = InvalidArgumentError(
        f"{shown} already exists; pass overwrite: true to replace it"
    )
    # Hidden and with a suffix no corpus indexes, so a concurrent folder scan skips it.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.upload")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        existed = os.path.lexists(target)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise exists_error from None
            except OSError:
                # A file system without hard links: check, then rename (a small race).
                if os.path.lexists(target):
                    raise exists_error from None
                os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(target.parent)
    return existed


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
        #: Tool calls running and done, for giving memory back when idle (server/idle.py).
        self.tool_calls = ToolCalls()
        self._corpora = {c.name: c for c in loaded.settings.corpora}
        self._roots = {c.name: _real(c.path) for c in loaded.settings.corpora}
        self._data_dir = _real(loaded.data_dir)
        self._replacements = self._path_replacements()
        for c in loaded.settings.corpora:
            if c.name in index.corpora:
                index.set_corpus_weight(c.name, c.weight)
        index.on_background_progress = RoundLog("embedding", "chunks", log.info)
        index.embed_in_background()  # embedding runs behind reads; resumes a killed run's

    @property
    def settings(self) -> Settings:
        return self.loaded.settings

    # -- corpora and paths -------------------------------------------------------------
    def corpus(self, name: str) -> CorpusSettings:
        """A configured corpus.

        Raises:
            NotFoundError: no corpus of that name in the configuration.
        """
        try:
            return self._corpora[name]
        except KeyError:
            known = ", ".join(self._corpora) or "none"
            raise NotFoundError(
                f"no configured corpus named {name!r:.70} (configured: {known})"
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
        not searched: ``status`` shows it with the command that drops it). Without a config
        file, every corpus (None)."""
        if corpora is not None or self.loaded.source is None:
            return corpora
        present = set(self.index.corpora)
        return [name for name in self._corpora if name in present]

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
        real = _real(given)
        names = [corpus] if corpus is not None else list(self._roots)
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
        with self._write_lock:
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
            chunks_embedded=report.chunks_embedded,
            documents=stats.documents if stats else 0,
            chunks=stats.chunks if stats else 0,
            seconds=round(report.seconds, 3),
        )

    # -- reading -----------------------------------------------------------------------
    def _chunk_fields(self, c: Chunk | Hit) -> dict[str, Any]:
        return chunk_fields(c, self.relative_path(c.corpus, c.source_path))

    def chunk_out(self, chunk: Chunk) -> ChunkOut:
        return ChunkOut(**self._chunk_fields(chunk))

    def hit_out(self, hit: Hit) -> HitOut:
        s = hit.scores
        return HitOut(
            **self._chunk_fields(hit),
            score=hit.score,
            scores=ScoresOut(**dataclasses.asdict(s)),
            snippet=hit.snippet,
            embedded=hit.embedded,
            highlights=[list(h) for h in hit.highlights],
            rerank_error=hit.rerank_error,
        )

    def status(self) -> StatusOut:
        # A Qdrant server that is down is reported, not raised: status must keep answering.
        down = self.index.backend_error
        try:
            stats = self.index.stats() if down is None else None
        except BackendUnavailableError as exc:
            down, stats = str(exc), None
        if stats is None:
            emb = self.index.embedder
            stats = IndexStats(None, emb.name, emb.dimension, ())
        by_name = {c.name: c for c in stats.corpora}
        allowed = set(self.settings.upload.allow)
        names = list(self._corpora) + [n for n in by_name if n not in self._corpora]
        corpora = []
        for name in names:
            conf = self._corpora.get(name)
            st = by_name.get(name)
            corpora.append(
                CorpusStatus(
                    name=name,
                    topic=conf.topic if conf else "",
                    language=st.language if st else (conf.language if conf else ""),
                    weight=conf.weight if conf else 1.0,
                    documents=st.documents if st else 0,
                    chunks=st.chunks if st else 0,
                    pending_chunks=st.pending_chunks if st else 0,
                    pending_seconds=st.pending_seconds if st else 0.0,
                    configured=conf is not None,
                    indexed=st is not None,
                    upload_allowed=name in allowed,
                    note=None
                    if conf is not None or self.loaded.source is None
                    else (
                        f"not in the configuration, so not searched; drop it with "
                        f"'guaipeca drop {name}'"
                    ),
                    model=st.model if st else identity_of(self.index.embedder_for(name)).describe(),
                    model_mismatch=self.sanitise(st.model_mismatch)
                    if st and st.model_mismatch
                    else None,
                )
            )
        running = self.indexing
        return StatusOut(
            version=__version__,
            model=stats.model,
            dimension=stats.dimension,
            documents=stats.documents,
            chunks=stats.chunks,
            pending_chunks=stats.pending_chunks,
            pending_seconds=stats.pending_seconds,
            corpora=corpora,
            broken=[
                BrokenCorpus(name=n, reason=self.sanitise(r))
                for n, r in self.index.broken_corpora.items()
            ],
            indexing=IndexingState(corpus=running[0], seconds=round(running[1], 3))
            if running
            else None,
            backend=self.settings.storage.backend,
            backend_error=self.sanitise(down) if down else None,
        )

    def folders(self) -> FoldersOut:
        up = self.settings.upload
        home = None
        with contextlib.suppress(RuntimeError):
            home = Path.home()
        out = []
        for c in self.settings.corpora:
            shown = c.path
            if home is not None and c.path.is_relative_to(home):
                shown = Path("~") / c.path.relative_to(home)
            out.append(
                FolderOut(
                    name=c.name,
                    path=shown.as_posix(),
                    exists=c.path.is_dir(),
                    topic=c.topic,
                    weight=c.weight,
                    language=c.language,
                    extensions=list(c.extensions),
                    exclude=list(c.exclude),
                    upload_allowed=c.name in up.allow,
                )
            )
        return FoldersOut(
            folders=out,
            upload=UploadLimits(
                corpora=list(up.allow),
                max_file_size=up.max_file_size,
                allowed_extensions=list(up.allowed_extensions),
                auto_index=up.auto_index,
            ),
        )

    # -- writing files -----------------------------------------------------------------
    def writable_corpus(self, corpus: str) -> CorpusSettings:
        conf = self.corpus(corpus)
        allowed = self.settings.upload.allow
        if corpus not in allowed:
            listed = ", ".join(allowed) or "none"
            raise InvalidArgumentError(
                f"corpus {corpus!r} does not accept uploads or deletes "
                f"(upload.allow lists: {listed})"
            )
        return conf

    def _inside(self, corpus: str, root: Path, path: Path) -> None:
        real = _real(path)
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
        ``index`` (None: ``upload.auto_index``). Nothing is written unless every check
        passes and the file converts.

        Raises:
            InvalidArgumentError: corpus not in ``upload.allow``, a bad name, extension or
                size, the file exists (without ``overwrite``), or it does not convert.
        """
        conf = self.writable_corpus(corpus)
        up, ocr = self.settings.upload, OcrOptions.from_settings(self.settings.ocr, conf.language)
        name = check_name(filename)
        parts = check_subfolder(subfolder) if subfolder is not None else ()
        rel = PurePosixPath(*parts, name).as_posix()
        ext = PurePosixPath(name).suffix.lower()
        accepted = [e for e in up.allowed_extensions if e in conf.extensions]
        if ext not in accepted:
            shown = f"{ext!r}" if ext else "(no extension)"
            raise InvalidArgumentError(
                f"file type {shown} is not accepted in corpus {corpus!r} "
                f"(accepted: {', '.join(accepted) or 'none'})"
            )
        if conf.exclude and _excluded(rel, conf.exclude):
            raise InvalidArgumentError(
                f"{rel!r} matches an exclude pattern of corpus {corpus!r}, so it would "
                "never be indexed"
            )
        if len(data) > up.max_file_size:
            raise InvalidArgumentError(_too_large(len(data), up.max_file_size))
        if not data:
            raise InvalidArgumentError("the file is empty")
        root = self.corpus_root(corpus)
        target = root.joinpath(*parts, name)
        self._inside(corpus, root, target.parent)
        shown = f"{rel!r} in corpus {corpus!r}"
        if os.path.lexists(target):
            if not overwrite:
                raise InvalidArgumentError(
                    f"{shown} already exists; pass overwrite: true to replace it"
                )
            if target.is_symlink() or not target.is_file():
                raise InvalidArgumentError(f"{shown} exists and is not a regular file")
        try:
            converted = convert_bytes(data, ext, name=name, max_bytes=up.max_file_size, ocr=ocr)
        except ConversionError as exc:
            raise InvalidArgumentError(
                f"{name!r} cannot be read as a {ext} file: {exc}; nothing was written"
            ) from None
        sha = hashlib.sha256(data).hexdigest()
        target.parent.mkdir(parents=True, exist_ok=True)
        self._inside(corpus, root, target.parent)  # a folder swapped for a link meanwhile
        replaced = _write_new(target, data, overwrite=overwrite, shown=shown)
        log.info("upload: wrote %s (%d bytes) into corpus %s", rel, len(data), corpus)
        # Keep the conversion, so the indexing run below need not convert again.
        ConversionCache(self.loaded.data_dir / "converted", cache_key(ocr)).put(sha, converted)
        indexed = None
        if up.auto_index if index is None else index:
            try:
                indexed = self.summary(self.reindex(corpus))
            except GuaipecaError as exc:
                raise GuaipecaError(f"{shown} was saved, but indexing failed: {exc}") from exc
        return UploadOut(
            corpus=corpus,
            doc_id=rel,
            bytes=len(data),
            sha256=sha,
            replaced=replaced,
            format=converted.format,
            warnings=list(converted.warnings),
            indexed=indexed,
        )

    def delete(self, corpus: str, doc_id: str, *, index: bool = True) -> DeleteOut:
        """Remove a document from the index (unless ``index`` is false: then the next
        indexing run drops it) and, when it is a file inside the corpus folder, the file
        from disk. Only corpora listed in ``upload.allow``.

        Raises:
            InvalidArgumentError: the corpus does not accept deletes.
            NotFoundError: no such document.
        """
        self.writable_corpus(corpus)
        with self._write_lock:
            doc = self.index.get_document(doc_id, corpus=corpus)
            path = self._file_of(corpus, doc_id, doc.source_path)
            deleted = False
            if path is not None and os.path.lexists(path):
                path.unlink()
                _fsync_dir(path.parent)
                deleted = True
                log.info("delete: removed %s from corpus %s", doc_id, corpus)
            removed = index and self.index.delete_document(doc_id, corpus=corpus)
        return DeleteOut(
            corpus=corpus, doc_id=doc_id, removed_from_index=removed, file_deleted=deleted
        )

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
        parent = _real(candidate.parent)
        if not parent.is_relative_to(root) or parent.is_relative_to(self._data_dir):
            return None
        source = Path(source_path)
        if _real(source.parent) / source.name != parent / candidate.name:
            return None
        if os.path.lexists(candidate) and not (candidate.is_symlink() or candidate.is_file()):
            return None
        return parent / candidate.name


def _too_large(size: int, limit: int) -> str:
    return f"the file is {size:,} bytes; the limit is {limit:,} bytes ({_human(limit)})"


def _human(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def decode_base64(content: str, limit: int) -> bytes:
    """Decode strict base64, refusing an oversized payload before decoding it."""
    text = content.strip()
    # 4 characters carry 3 bytes: anything longer than this cannot fit the limit.
    if len(text) > 4 * -(-limit // 3):
        raise InvalidArgumentError(
            f"the file is about {len(text) * 3 // 4:,} bytes; "
            f"the limit is {limit:,} bytes ({_human(limit)})"
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(
            "content_base64 is not valid base64 (standard alphabet with padding, no line breaks)"
        ) from None
