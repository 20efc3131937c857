"""MCP tools over an open :class:`~guaipeca.Index` (§7.1): search, read, list, index,
upload and delete.

Built on the official SDK's ``MCPServer``: each tool's typed parameters become its JSON
input schema, and its return model becomes its output schema and the result's
``structuredContent`` (the SDK sends the same JSON as text for clients that read only text).

Errors are raised, never returned: a :class:`~guaipeca.errors.GuaipecaError` becomes a tool
error result (``isError: true``) carrying its one-line message with server paths replaced by
placeholders; arguments that do not fit the schema get one line naming each bad argument;
anything unexpected becomes "internal error" while its traceback goes to the log (stderr).
Nothing here prints: on stdio, stdout is the protocol stream.

Blocking work (searching, reading, converting, indexing) runs in worker threads, so the
event loop keeps answering. Searches run concurrently with each other and with an indexing
run (the index serves its last committed state); writes (index, upload, delete) take one
lock, so at most one runs at a time.
"""

import base64
import binascii
import contextlib
import difflib
import fnmatch
import functools
import hashlib
import inspect
import logging
import os
import re
import secrets
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import __version__
from ..config import CorpusSettings, LoadedSettings, Settings
from ..convert import convert_bytes
from ..errors import ConversionError, GuaipecaError, InvalidArgumentError, NotFoundError
from ..index import MAX_QUERY_CHARS, Index
from ..ingest import ConversionCache, SyncReport, sync_folder
from ..search.backend import BackendUnavailableError
from ..types import Chunk, Hit, IndexStats
from .idle import ToolCalls
from .security import search_gate

__all__ = ["Service", "build_server"]

log = logging.getLogger("guaipeca.server")

#: Most hits one search call returns (the library allows more; an agent's context does not).
MAX_TOP_K = 100
#: Most chunk ids one get_chunk call takes.
MAX_CHUNK_IDS = 100
#: Longest file name component, in UTF-8 bytes (the limit of common file systems).
MAX_NAME_BYTES = 255
#: Deepest subfolder an upload may name.
MAX_SUBFOLDER_DEPTH = 16

_P = ParamSpec("_P")
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

_INTERNAL_ERROR = "internal error (the server log has the details)"
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Control, format (e.g. right-to-left override), private-use, surrogate, unassigned and
# line/paragraph separator characters: invisible or misleading in a file name.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


# -- output models -----------------------------------------------------------------------
class ScoresOut(BaseModel):
    """The parts of a hit's fused score."""

    dense: float | None = Field(
        None, description="similarity from the embedding retriever (null: not retrieved by it)"
    )
    lexical: float | None = Field(
        None, description="BM25 keyword score (null: not retrieved by it)"
    )
    dense_rank: int | None = Field(None, description="rank in the embedding retriever's list")
    lexical_rank: int | None = Field(None, description="rank in the keyword retriever's list")
    rerank: float | None = Field(None, description="reranker score, when reranking is on")


class ChunkOut(BaseModel):
    """One stored passage: an exact span of its document."""

    chunk_id: str = Field(description="'corpus:number'; pass it to get_chunk")
    corpus: str
    doc_id: str = Field(description="the document's id; pass it to get_document or get_toc")
    source_path: str | None = Field(
        description="the source file, relative to its corpus folder (null: added as text)"
    )
    heading_path: list[str] = Field(description="document title and enclosing section")
    section_id: str = Field(description="shared by every chunk of one section")
    page_start: int | None = Field(description="first page (paged sources such as PDF)")
    page_end: int | None = Field(description="last page (paged sources such as PDF)")
    start: int = Field(description="character offset where the text starts in the document")
    end: int = Field(description="character offset where the text ends (exclusive)")
    position: int = Field(description="the chunk's number within its document, from 0")
    text: str
    metadata: dict[str, Any]


class HitOut(ChunkOut):
    """One search result."""

    score: float = Field(description="fused score; higher is better")
    scores: ScoresOut
    snippet: str = Field(description="the query terms in context, marked **like this**")


class SearchOut(BaseModel):
    query: str
    mode: str
    return_mode: str
    section_mode: bool
    count: int
    hits: list[HitOut]


class ChunksOut(BaseModel):
    chunks: list[ChunkOut]


class DocumentOut(BaseModel):
    doc_id: str
    corpus: str
    source_path: str | None = Field(description="relative to the corpus folder")
    metadata: dict[str, Any]
    chunk_count: int
    chars: int = Field(description="length of the whole document text")
    offset: int = Field(description="where the returned text starts")
    end: int = Field(description="where the returned text ends (exclusive)")
    truncated: bool = Field(description="true when the document goes on after 'end'")
    next_offset: int | None = Field(description="offset for the next part (null: no more)")
    text: str


class DocumentInfoOut(BaseModel):
    doc_id: str
    corpus: str
    source_path: str | None = Field(description="relative to the corpus folder")
    chars: int
    chunk_count: int
    metadata: dict[str, Any]


class DocumentListOut(BaseModel):
    documents: list[DocumentInfoOut]
    count: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page (null: no more)")


class TocNode(BaseModel):
    title: str
    level: int = Field(description="1 for '#', 2 for '##', ...")
    section_id: str = Field(description="pass as section_filter to search inside this section")
    chunk_id: str | None = Field(None, description="the chunk where this heading starts")
    chunks: int = Field(description="chunks directly under this heading")
    children: list["TocNode"] = Field(default_factory=list)


class TocOut(BaseModel):
    doc_id: str
    corpus: str
    structured: bool = Field(description="false when the document has no headings")
    chunks: int
    headings: list[TocNode]


class FileProblem(BaseModel):
    file: str = Field(description="relative to the corpus folder")
    reason: str


class IndexSummary(BaseModel):
    corpus: str
    added: int
    changed: int
    unchanged: int
    removed: int
    failed: list[FileProblem]
    warnings: list[FileProblem]
    chunks_embedded: int
    documents: int = Field(description="documents in the corpus after the run")
    chunks: int = Field(description="chunks in the corpus after the run")
    seconds: float


class IndexOut(BaseModel):
    corpora: list[IndexSummary]


class CorpusStatus(BaseModel):
    name: str
    topic: str
    language: str
    weight: float
    documents: int
    chunks: int
    configured: bool = Field(description="listed in the server's configuration")
    indexed: bool = Field(description="present in the index")
    upload_allowed: bool


class BrokenCorpus(BaseModel):
    name: str
    reason: str


class IndexingState(BaseModel):
    corpus: str
    seconds: float = Field(description="seconds since this run started")


class StatusOut(BaseModel):
    version: str
    model: str
    dimension: int
    documents: int
    chunks: int
    corpora: list[CorpusStatus]
    broken: list[BrokenCorpus] = Field(description="corpora that cannot be used, and why")
    indexing: IndexingState | None = Field(description="the indexing run in progress, if any")
    backend: str = Field("embedded", description="storage backend: embedded or qdrant")
    backend_error: str | None = Field(
        None, description="why the storage backend (a Qdrant server) cannot be reached; null: up"
    )


class FolderOut(BaseModel):
    name: str
    path: str = Field(description="the folder, with the home folder shown as ~")
    exists: bool
    topic: str
    weight: float
    language: str
    extensions: list[str]
    exclude: list[str]
    upload_allowed: bool


class UploadLimits(BaseModel):
    corpora: list[str] = Field(description="corpora that accept uploads")
    max_file_size: int = Field(description="bytes, after base64 decoding")
    allowed_extensions: list[str]
    auto_index: bool = Field(description="an uploaded file is indexed right away")


class FoldersOut(BaseModel):
    folders: list[FolderOut]
    upload: UploadLimits


class UploadOut(BaseModel):
    corpus: str
    doc_id: str = Field(description="the file's path in the corpus folder: its document id")
    bytes: int
    sha256: str
    replaced: bool = Field(description="true when an existing file was overwritten")
    format: str
    warnings: list[str] = Field(description="notes from converting the file")
    indexed: IndexSummary | None = Field(description="the indexing run (null: not indexed yet)")


class DeleteOut(BaseModel):
    corpus: str
    doc_id: str
    removed_from_index: bool
    file_deleted: bool = Field(description="true when the source file was deleted from disk")


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
            )
            self.index.set_corpus_weight(conf.name, conf.weight)
        finally:
            with self._state_lock:
                self._running = None
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
        return {
            "chunk_id": c.chunk_id,
            "corpus": c.corpus,
            "doc_id": c.doc_id,
            "source_path": self.relative_path(c.corpus, c.source_path),
            "heading_path": list(c.heading_path),
            "section_id": c.section_id,
            "page_start": c.page_start,
            "page_end": c.page_end,
            "start": c.start,
            "end": c.end,
            "position": c.position,
            "text": c.text,
            "metadata": c.metadata,
        }

    def chunk_out(self, chunk: Chunk) -> ChunkOut:
        return ChunkOut(**self._chunk_fields(chunk))

    def hit_out(self, hit: Hit) -> HitOut:
        s = hit.scores
        return HitOut(
            **self._chunk_fields(hit),
            score=hit.score,
            scores=ScoresOut(
                dense=s.dense,
                lexical=s.lexical,
                dense_rank=s.dense_rank,
                lexical_rank=s.lexical_rank,
                rerank=s.rerank,
            ),
            snippet=hit.snippet,
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
                    configured=conf is not None,
                    indexed=st is not None,
                    upload_allowed=name in allowed,
                )
            )
        running = self.indexing
        return StatusOut(
            version=__version__,
            model=stats.model,
            dimension=stats.dimension,
            documents=stats.documents,
            chunks=stats.chunks,
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
    ) -> UploadOut:
        """Save a file into a corpus folder that accepts uploads, then index it if
        ``upload.auto_index``. Nothing is written unless every check passes and the file
        converts.

        Raises:
            InvalidArgumentError: corpus not in ``upload.allow``, a bad name, extension or
                size, the file exists (without ``overwrite``), or it does not convert.
        """
        conf = self.writable_corpus(corpus)
        up = self.settings.upload
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
            converted = convert_bytes(data, ext, name=name, max_bytes=up.max_file_size)
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
        ConversionCache(self.loaded.data_dir / "converted").put(sha, converted)
        indexed = None
        if up.auto_index:
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

    def delete(self, corpus: str, doc_id: str) -> DeleteOut:
        """Remove a document from the index and, when it is a file inside the corpus
        folder, the file from disk. Only corpora listed in ``upload.allow``.

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
            removed = self.index.delete_document(doc_id, corpus=corpus)
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


def _decode_base64(content: str, limit: int) -> bytes:
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


# -- argument errors ---------------------------------------------------------------------
def _shown_input(value: object) -> str:
    if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 60):
        return f" (got {value!r})"
    return ""


def describe_invalid_arguments(exc: ValidationError) -> str:
    """One line naming each argument that does not fit the schema."""
    by_field: dict[str, list[Any]] = {}
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        key = str(loc[0]) if loc else "arguments"
        by_field.setdefault(key, []).append(error)
    problems = []
    err: Any
    for key, errs in by_field.items():
        specific = [e for e in errs if not str(e["type"]).endswith("_type")]
        if specific:
            err = specific[0]
            message = str(err["msg"])
        elif len(errs) > 1:  # a union: "a valid string or a valid list"
            err = errs[0]
            wanted = [str(e["msg"]).removeprefix("Input should be ") for e in errs]
            message = "Input should be " + " or ".join(dict.fromkeys(wanted))
        else:
            err = errs[0]
            message = str(err["msg"])
        where = key + "".join(f"[{p}]" for p in err["loc"][1:] if isinstance(p, int))
        if err["type"] == "missing":
            problems.append(f"{where}: is required")
        else:
            problems.append(f"{where}: {message}{_shown_input(err.get('input'))}")
    return "invalid arguments: " + "; ".join(problems)


class _Server(MCPServer[Any]):
    """MCPServer whose argument errors are one readable line and which refuses
    arguments a tool does not have (a misspelt ``topk`` must not silently mean the default)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool_arguments: dict[str, frozenset[str]] = {}

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self.tool_arguments.get(name)
        if known is not None:
            for arg in sorted(set(arguments) - known):
                close = difflib.get_close_matches(arg, sorted(known), n=1)
                hint = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else f"arguments: {', '.join(sorted(known))}"
                )
                raise ToolError(
                    f"Error executing tool {name}: unknown argument {arg!r:.60} ({hint})"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = describe_invalid_arguments(cause)
                raise ToolError(f"Error executing tool {name}: {message}") from cause
            raise


# -- the server --------------------------------------------------------------------------
_READ = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True}

_INSTRUCTIONS = """\
Guaipeca searches the user's own documents (Markdown, text, PDF, Office, HTML), grouped in
named corpora. Start with `search` (hybrid keyword + semantic by default); every hit names
an exact span of its document (chunk_id, doc_id, character offsets, page span, heading
path). Then read more with `get_chunk` (several chunk ids at once), `get_toc` (a document's
headings, whose section ids feed search's section_filter) and `get_document`. `list_folders`
and `status` tell which corpora exist and what they hold; `list_documents` lists documents.
To dig deeper: `keyword_search` (exact names, codes) and `semantic_search` (meaning);
`filtered_search` narrows by the entities, keywords, dates and content types extracted from
each chunk; `read_neighbors` reads the text around hits; `find_related` follows a hit's
entities and key terms into other documents (call it again on its results for more hops).
`index` re-reads the folders; `upload` and `delete` change corpora that allow it."""

_WHERE = (
    "Metadata filter, a JSON object of field conditions (AND-ed), plus top-level $and/$or "
    "lists. Operators: $eq (or a bare value), $ne, $gt, $gte, $lt, $lte, $in, $nin, "
    "$exists, $contains, $startswith, $endswith. Fields: corpus, doc_id, source_path, "
    "filename, extension (e.g. '.pdf'), modified (Unix time), page, section_id, position, "
    "or any user metadata key (dotted paths reach nested values). "
    'Example: {"extension": ".pdf", "page": {"$lte": 5}}'
)


def _guard(service: Service, fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Awaitable[_T]]:
    """Turn library errors into tool errors with a clean message, and anything else into
    a generic one (with the traceback in the log)."""

    @functools.wraps(fn)
    async def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        service.tool_calls.started()
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except GuaipecaError as exc:
            raise ToolError(service.sanitise(str(exc))) from None
        except Exception:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(_INTERNAL_ERROR) from None
        finally:
            service.tool_calls.done()

    return guarded


def _registrar(server: _Server, service: Service) -> Callable[..., Callable[[_F], _F]]:
    """``@tool(title, **hints)``: registers a coroutine as a guarded tool of ``server``; its
    name, description (docstring) and arguments come from the function."""

    def tool(title: str, **hints: bool) -> Callable[[_F], _F]:
        def register(fn: _F) -> _F:
            name = fn.__name__
            server.add_tool(
                _guard(service, fn),
                name=name,
                title=title,
                description=inspect.cleandoc(fn.__doc__ or ""),
                annotations=ToolAnnotations(title=title, open_world_hint=False, **hints),
                structured_output=True,
            )
            server.tool_arguments[name] = frozenset(inspect.signature(fn).parameters)
            return fn

        return register

    return tool


async def _thread(fn: Callable[[], _T]) -> _T:
    return await anyio.to_thread.run_sync(fn)


def build_server(service: Service) -> MCPServer[Any]:
    """An MCP server whose tools search, read and manage the service's corpora (§7.1)."""
    server = _Server("guaipeca", version=__version__, instructions=_INSTRUCTIONS)
    idx = service.index
    s = service.settings.search
    up = service.settings.upload
    # A cap on concurrent searches and a deadline per search (server settings).
    gate = search_gate(service.settings)

    tool = _registrar(server, service)

    @tool("Search documents", **_READ)
    async def search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="What to look for: a question or keywords, in any language.",
            ),
        ],
        top_k: Annotated[
            int, Field(ge=1, le=MAX_TOP_K, description="How many results to return.")
        ] = min(s.top_k, MAX_TOP_K),
        corpora: Annotated[
            list[str] | None,
            Field(
                min_length=1,
                max_length=100,
                description="Search only these corpora (see list_folders); default: all.",
            ),
        ] = None,
        mode: Annotated[
            Literal["hybrid", "dense", "keyword"],
            Field(
                description="hybrid: keywords and meaning fused (best in general); "
                "keyword: exact terms, names, codes (BM25); dense: meaning, paraphrases."
            ),
        ] = s.mode,
        where: Annotated[dict[str, Any] | None, Field(description=_WHERE)] = None,
        return_mode: Annotated[
            Literal["chunks", "documents", "auto"],
            Field(
                description="chunks: the matching passages; documents: one result per "
                "document with its whole text; auto: documents when they are short "
                f"enough together (under {s.max_chars} characters), else chunks."
            ),
        ] = "chunks",
        section_mode: Annotated[
            bool,
            Field(description="One result per section, with the whole section's text."),
        ] = False,
        section_filter: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=2000,
                description="Search only inside one section: a section_id (from a hit or "
                "get_toc) or a heading path prefix such as 'Manual > Installation'.",
            ),
        ] = None,
    ) -> SearchOut:
        """Search the indexed documents and return the best passages, best first.

        Use it first for any question about the user's documents, and again with other
        words, a filter or section_filter to dig deeper. Each hit has chunk_id, corpus,
        doc_id, source_path (relative to its corpus folder), heading_path, section_id,
        page_start/page_end, the character span start/end, score and its parts, a
        snippet with the query terms marked, and the passage text. Follow up with
        get_chunk, get_toc or get_document.
        """
        hits = await gate.run(
            functools.partial(
                idx.search,
                query,
                top_k=top_k,
                mode=mode,
                where=where,
                corpora=corpora,
                return_mode=return_mode,
                section_mode=section_mode,
                section_filter=section_filter,
            )
        )
        return SearchOut(
            query=query,
            mode=mode,
            return_mode=return_mode,
            section_mode=section_mode,
            count=len(hits),
            hits=[service.hit_out(h) for h in hits],
        )

    @tool("Read chunks", **_READ)
    async def get_chunk(
        chunk_ids: Annotated[
            str | Annotated[list[str], Field(min_length=1, max_length=MAX_CHUNK_IDS)],
            Field(
                description="One chunk id ('corpus:number', from search results or "
                f"get_toc) or a list of up to {MAX_CHUNK_IDS}."
            ),
        ],
    ) -> ChunksOut:
        """Read whole chunks by id, in the order given (duplicates once).

        Use it to read the full text of search hits, or chunks named by get_toc. Every
        id must exist: an unknown id makes the whole call fail with its name.
        """
        ids = [chunk_ids] if isinstance(chunk_ids, str) else list(dict.fromkeys(chunk_ids))

        def read() -> list[Chunk]:
            found, missing = [], []
            for cid in ids:
                try:
                    found.append(idx.get_chunk(cid))
                except NotFoundError:
                    missing.append(cid)
            if missing:
                shown = ", ".join(repr(m[:80]) for m in missing[:5])
                more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
                raise NotFoundError(
                    f"no chunk with id {shown}{more} (ids look like 'corpus:number', "
                    "as in search results)"
                )
            return found

        chunks = await _thread(read)
        return ChunksOut(chunks=[service.chunk_out(c) for c in chunks])

    @tool("Read a document", **_READ)
    async def get_document(
        doc_id: Annotated[
            str,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ],
        corpus: Annotated[
            str | None,
            Field(description="Its corpus; needed only when the id exists in several."),
        ] = None,
        offset: Annotated[
            int,
            Field(ge=0, description="Character offset to start at (to read on: next_offset)."),
        ] = 0,
        max_chars: Annotated[
            int,
            Field(ge=1, le=1_000_000, description="Most characters of text to return."),
        ] = 20_000,
    ) -> DocumentOut:
        """Read a whole document (its converted Markdown text) with its metadata.

        Long documents come in parts: when truncated is true, call again with
        offset=next_offset. Character offsets match the start/end of search hits, so
        offset=hit.start reads on from a hit. Prefer get_chunk or search with
        section_filter when only a part is needed.
        """
        doc = await _thread(functools.partial(idx.get_document, doc_id, corpus=corpus))
        end = min(len(doc.text), offset + max_chars)
        start = min(offset, end)
        truncated = end < len(doc.text)
        return DocumentOut(
            doc_id=doc.doc_id,
            corpus=doc.corpus,
            source_path=service.relative_path(doc.corpus, doc.source_path),
            metadata=doc.metadata,
            chunk_count=doc.chunk_count,
            chars=len(doc.text),
            offset=start,
            end=end,
            truncated=truncated,
            next_offset=end if truncated else None,
            text=doc.text[start:end],
        )

    @tool("List documents", **_READ)
    async def list_documents(
        corpus: Annotated[str | None, Field(description="Only this corpus; default: all.")] = None,
        where: Annotated[dict[str, Any] | None, Field(description=_WHERE)] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Page size.")] = 50,
        offset: Annotated[
            int, Field(ge=0, le=1_000_000, description="Documents to skip (paging).")
        ] = 0,
    ) -> DocumentListOut:
        """List indexed documents (id, corpus, source path, size, chunk count, metadata),
        ordered by corpus then id, optionally filtered like search's where.

        Use it to see what a corpus holds or to find a doc_id; page on with
        offset=next_offset.
        """
        rows = await _thread(
            functools.partial(
                idx.list_documents, corpus=corpus, where=where, limit=limit + 1, offset=offset
            )
        )
        more = len(rows) > limit
        docs = [
            DocumentInfoOut(
                doc_id=r.doc_id,
                corpus=r.corpus,
                source_path=service.relative_path(r.corpus, r.source_path),
                chars=r.chars,
                chunk_count=r.chunk_count,
                metadata=r.metadata,
            )
            for r in rows[:limit]
        ]
        return DocumentListOut(
            documents=docs,
            count=len(docs),
            offset=offset,
            next_offset=offset + limit if more else None,
        )

    @tool("Table of contents", **_READ)
    async def get_toc(
        doc_id: Annotated[
            str,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ],
        corpus: Annotated[
            str | None,
            Field(description="Its corpus; needed only when the id exists in several."),
        ] = None,
    ) -> TocOut:
        """A document's headings as a tree, each with its section_id, the chunk where it
        starts and its number of chunks.

        Use it to see how a long document is organised before reading it; pass a
        section_id (or 'Title > Section') to search's section_filter, or a chunk_id to
        get_chunk. structured is false for a document without headings.
        """
        toc = await _thread(functools.partial(idx.toc, doc_id, corpus=corpus))
        return TocOut.model_validate(toc)

    @tool(
        "Re-index folders",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
    )
    async def index(
        corpus: Annotated[
            str | None,
            Field(description="The configured corpus to re-index; default: every one."),
        ] = None,
    ) -> IndexOut:
        """Re-read configured corpus folders: new and changed files are converted and
        indexed, deleted files leave the index. Returns a summary per corpus (added,
        changed, unchanged, removed, failed files with reasons, totals, seconds).

        Incremental and safe to repeat. Searches keep answering while it runs; a second
        write waits for the first (status shows a run in progress).
        """
        names = [corpus] if corpus is not None else [c.name for c in service.settings.corpora]
        if not names:
            raise InvalidArgumentError("the server's configuration lists no corpora")

        def run() -> list[SyncReport]:
            for name in names:
                service.corpus_root(name)  # every folder checked before any run starts
            return [service.reindex(name) for name in names]

        reports = await _thread(run)
        return IndexOut(corpora=[service.summary(r) for r in reports])

    @tool("Index status", **_READ)
    async def status() -> StatusOut:
        """The server's version, embedding model and dimension, every corpus with its
        topic, language, weight and document/chunk counts, corpora that cannot be used
        (with the reason) and the indexing run in progress, if any."""
        return await _thread(service.status)

    @tool("List folders", **_READ)
    async def list_folders() -> FoldersOut:
        """The configured corpora: name, folder, topic, weight, language, file types,
        exclude patterns and whether uploads are allowed, plus the upload limits.

        Use it to choose corpora for search or a target for upload."""
        return await _thread(service.folders)

    @tool(
        "Upload a file",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=False,
    )
    async def upload(
        corpus: Annotated[
            str,
            Field(
                min_length=1,
                description=f"A corpus that accepts uploads: {', '.join(up.allow) or 'none'}.",
            ),
        ],
        filename: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_NAME_BYTES,
                description="A plain file name with its extension, e.g. 'report.pdf' "
                "(no folders; use subfolder).",
            ),
        ],
        content_base64: Annotated[
            str,
            Field(
                min_length=1,
                description="The file's bytes, base64-encoded (standard alphabet). At most "
                f"{up.max_file_size} bytes once decoded.",
            ),
        ],
        subfolder: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=1000,
                description="A folder inside the corpus folder, e.g. 'notes/2024' "
                "(created if missing).",
            ),
        ] = None,
        overwrite: Annotated[bool, Field(description="Replace a file of the same name.")] = False,
    ) -> UploadOut:
        """Save a document into a corpus folder and index it.

        Accepts only corpora listed in the server's upload.allow, file types in
        upload.allowed_extensions, and files that convert to text (a broken PDF is
        refused and nothing is written). An existing file is kept unless overwrite is
        true. Returns the document id (its path in the corpus) and the indexing summary.
        """
        service.writable_corpus(corpus)  # before anything is decoded

        def save() -> UploadOut:
            data = _decode_base64(content_base64, up.max_file_size)
            return service.upload(corpus, filename, data, subfolder=subfolder, overwrite=overwrite)

        return await _thread(save)

    @tool(
        "Delete a document",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=True,
    )
    async def delete(
        corpus: Annotated[
            str,
            Field(
                min_length=1,
                description="The document's corpus (one that accepts uploads: "
                f"{', '.join(up.allow) or 'none'}).",
            ),
        ],
        doc_id: Annotated[
            str,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ],
    ) -> DeleteOut:
        """Delete a document: its file is removed from the corpus folder (when it is a
        file inside that folder) and the document from the index. Cannot be undone.

        Only in corpora that accept uploads."""
        return await _thread(functools.partial(service.delete, corpus, doc_id))

    # Agentic retrieval tools (keyword/semantic/filtered search, read_chunk, read_neighbors,
    # find_related) live in their own module; imported here to avoid an import cycle.
    from .agent_tools import register_agent_tools

    register_agent_tools(server, service, gate)
    return server
