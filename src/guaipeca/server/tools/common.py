"""What every MCP tool shares (§7.1): the server class, error handling, the registrar,
limits and the descriptions several tools reuse.

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

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, ParamSpec, Protocol, TypeVar

import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AnyUrl, Field, ValidationError

from guaipeca.config import did_you_mean
from guaipeca.errors import GuaipecaError, InvalidArgumentError
from guaipeca.index import MAX_BUDGET
from guaipeca.server.audit import door
from guaipeca.server.departure import current_departure, departure_of
from guaipeca.server.limits import rate_counted, too_many_requests
from guaipeca.server.service import (
    Service,
)
from guaipeca.server.tools.links import resource_links
from guaipeca.server.writes import STDIO, current_caller

__all__ = [
    "BUDGET_DOC",
    "INSTRUCTIONS",
    "READ_ONLY",
    "TOOL_MAX_CHUNK_IDS",
    "TOOL_MAX_RESULT_CHARS",
    "TOOL_MAX_TOP_K",
    "TOOL_RESULT_CHARS",
    "WHERE_DOC",
    "BudgetArg",
    "Registrar",
    "ToolServer",
    "describe_invalid_arguments",
    "guard",
    "in_thread",
    "one_of",
    "rate_wait",
    "registrar",
]

log = logging.getLogger("guaipeca.server")

#: Most hits one search call returns (the library allows more; an agent's context does not).
TOOL_MAX_TOP_K = 100
#: Most chunk ids one get_chunk call takes.
TOOL_MAX_CHUNK_IDS = 100
#: Most characters one read returns (get_document's max_chars, a document resource): an
#: answer's memory is bounded by this, not by the document (up to limits.max_chars).
TOOL_MAX_READ_CHARS = 1_000_000
#: Characters of widened text (documents, sections) one search returns by default, and at
#: most: 5 MB of documents in one answer (sent twice over MCP, as text and as structured
#: content) helps no agent.
TOOL_RESULT_CHARS = 40_000
TOOL_MAX_RESULT_CHARS = 400_000

_P = ParamSpec("_P")
_T = TypeVar("_T")
_V = TypeVar("_V")
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


class Registrar(Protocol):
    """``@tool(title, links=False, **hints)``, as :func:`registrar` returns it."""

    def __call__(self, title: str, *, links: bool = False, **hints: bool) -> Callable[[_F], _F]: ...


INTERNAL_ERROR = "internal error (the server log has the details)"


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


def _request_scope(context: Context[Any, Any] | None) -> dict[str, Any] | None:
    """The ASGI scope of the HTTP request that carried a tool call (None: stdio, web API)."""
    try:
        request = context.request_context.request if context is not None else None
    except ValueError:  # a context outside a request
        return None
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, dict) else None


class ToolServer(MCPServer[Any]):
    """MCPServer whose argument errors are one readable line and which refuses
    arguments a tool does not have (a misspelt ``topk`` must not silently mean the default).

    The results of the tools in ``linked_tools`` carry ``resource_link`` blocks to the hits,
    chunks and documents they name (links.py), after the JSON text block. A resource that
    is missing and one the caller may not read give the same error as an unknown URI.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool_arguments: dict[str, frozenset[str]] = {}
        self.linked_tools: set[str] = set()

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError:
            # The SDK's own words for a URI no template matches: nothing tells a forbidden
            # or missing document from one that never existed.
            raise ResourceNotFoundError(f"Unknown resource: {uri}") from None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self.tool_arguments.get(name)
        if known is not None:
            for arg in sorted(set(arguments) - known):
                hint = did_you_mean(arg, sorted(known)) or f"arguments: {', '.join(sorted(known))}"
                raise ToolError(
                    f"Error executing tool {name}: unknown argument {arg!r:.60} ({hint})"
                )
        # Over HTTP the call runs in its session's task: the departure to follow is the
        # one of the POST that carries it (the web API's request set its own already).
        scope = _request_scope(context)
        if scope is not None:
            current_departure.set(departure_of(scope))
        try:
            result = await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = describe_invalid_arguments(cause)
                raise ToolError(f"Error executing tool {name}: {message}") from cause
            raise
        if name in self.linked_tools and isinstance(result, CallToolResult):
            structured = result.structured_content
            if not result.is_error and isinstance(structured, dict):
                result.content.extend(resource_links(structured))
        return result


# -- the server --------------------------------------------------------------------------
READ_ONLY = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True}

INSTRUCTIONS = """\
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
`index` re-reads the folders; `upload` and `delete` change corpora that allow it.
In long documents (manuals, laws, books) give the search tools a `budget` in characters:
they then return the best paragraphs and sentences that fit in it, not whole chunks."""

BUDGET_DOC = (
    "Return the best evidence that fits in this many characters instead of whole chunks: "
    "the matching paragraphs and sentences, best first, neighbours merged, the last cut "
    "around its best sentence (truncated: true), each an exact span (start/end) with its "
    "heading_trail and pages. Ask for 1000-2000 "
    "for a fact (a date, a number, a definition), 4000-8000 to compare or summarise; widen a "
    "hit with read_neighbors (its chunk_id) or get_document from its end. With a budget, "
    "top_k caps the number of spans and return_mode must be chunks."
)
#: The search tools' ``budget`` argument.
BudgetArg = Annotated[int | None, Field(ge=1, le=MAX_BUDGET, description=BUDGET_DOC)]

WHERE_DOC = (
    "Metadata filter, a JSON object of field conditions (AND-ed), plus top-level $and/$or "
    "lists. Operators: $eq (or a bare value), $ne, $gt, $gte, $lt, $lte, $in, $nin, "
    "$exists, $contains, $startswith, $endswith. Fields: corpus, doc_id, source_path, "
    "filename, extension (e.g. '.pdf'), modified (Unix time), page, section_id, position, "
    "or any user metadata key (dotted paths reach nested values). "
    'Example: {"extension": ".pdf", "page": {"$lte": 5}}'
)


def rate_wait(service: Service) -> float:
    """Takes the caller's rate-limit token for one MCP call (tool call or resource read):
    the seconds to wait before retrying, 0 when the call may run.

    Over MCP the call takes it here, answered as an error of the call (a 429 on the POST
    would end a legacy SSE session); the web API's request took it already, and stdio (one
    local agent) has no limit.
    """
    who = current_caller()
    if who == STDIO or rate_counted.get():
        return 0.0
    return service.rate_bucket.take(who)


def guard(service: Service, fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Awaitable[_T]]:
    """Turn library errors into tool errors with a clean message, and anything else into
    a generic one (with the traceback in the log)."""

    @functools.wraps(fn)
    async def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        wait = rate_wait(service)
        if wait > 0:
            raise ToolError(too_many_requests(wait))
        service.tool_calls.started()
        entered = door.set(f"tool:{fn.__name__}")  # what the audit log names
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except GuaipecaError as exc:
            raise ToolError(service.sanitise(str(exc))) from None
        except Exception:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(INTERNAL_ERROR) from None
        finally:
            door.reset(entered)
            service.tool_calls.done()

    return guarded


def registrar(server: ToolServer, service: Service) -> Registrar:
    """``@tool(title, links=False, **hints)``: registers a coroutine as a guarded tool of
    ``server``; its name, description (docstring) and arguments come from the function.
    ``links``: its results carry resource links to what they name (:class:`ToolServer`)."""

    def tool(title: str, *, links: bool = False, **hints: bool) -> Callable[[_F], _F]:
        def register(fn: _F) -> _F:
            name = fn.__name__
            server.add_tool(
                guard(service, fn),
                name=name,
                title=title,
                description=inspect.cleandoc(fn.__doc__ or ""),
                annotations=ToolAnnotations(title=title, open_world_hint=False, **hints),
                structured_output=True,
            )
            server.tool_arguments[name] = frozenset(inspect.signature(fn).parameters)
            if links:
                server.linked_tools.add(name)
            return fn

        return register

    return tool


async def in_thread(fn: Callable[[], _T]) -> _T:
    return await anyio.to_thread.run_sync(fn)


def one_of(name: str, value: _V | None, alias: str, alias_value: _V | None) -> _V:
    """The argument given under ``name`` or under its ``alias`` (exactly one of them).

    Raises:
        InvalidArgumentError: neither or both given.
    """
    if value is not None and alias_value is not None:
        raise InvalidArgumentError(f"give {name} or {alias}, not both")
    chosen = value if value is not None else alias_value
    if chosen is None:
        raise InvalidArgumentError(f"give {name} (or {alias})")
    return chosen
