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

import difflib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from .. import __version__
from ..errors import GuaipecaError, InvalidArgumentError, NotFoundError
from ..index import MAX_QUERY_CHARS
from ..ingest import SyncReport
from ..types import Chunk
from .schema import (
    ChunksOut,
    DeleteOut,
    DocumentInfoOut,
    DocumentListOut,
    DocumentOut,
    FoldersOut,
    IndexOut,
    SearchOut,
    StatusOut,
    TocOut,
    UploadOut,
)
from .security import search_gate
from .service import (
    MAX_NAME_BYTES,
    Service,
    _decode_base64,
)

__all__ = ["MAX_CHUNK_IDS", "MAX_TOP_K", "build_server"]

log = logging.getLogger("guaipeca.server")

#: Most hits one search call returns (the library allows more; an agent's context does not).
MAX_TOP_K = 100
#: Most chunk ids one get_chunk call takes.
MAX_CHUNK_IDS = 100

_P = ParamSpec("_P")
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

_INTERNAL_ERROR = "internal error (the server log has the details)"


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
