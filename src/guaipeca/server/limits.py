"""Limits on what one request may cost (§7.4), each a small pure-ASGI middleware or helper.

- :func:`json_body`: request bodies parsed as JSON, never deeper than :data:`MAX_JSON_DEPTH`.
- :class:`TokenBucket` and :class:`RateLimitMiddleware`: per identity (or client IP), on the
  work that costs; MCP tool calls take their token in the tool (server/tools/common.py).
- :class:`RpcBodyMiddleware`: MCP bodies read whole first; over-long names refused.
- :class:`BodyLimitMiddleware`: ``Content-Length`` checked before reading, streamed bodies
  counted and cut off at the limit.
- :class:`SearchGate`: a cap on concurrent searches and a deadline per search.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Final, TypeVar, TypeVarTuple

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.config import LoadedSettings, ServerSettings, Settings
from guaipeca.errors import SearchBusyError, SearchTimeoutError
from guaipeca.server.asgi import caller_of, error_response, refuse
from guaipeca.server.departure import current_departure

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_RPC_NAME_CHARS",
    "BodyLimitMiddleware",
    "RateLimitMiddleware",
    "RpcBodyMiddleware",
    "SearchBusyError",
    "SearchGate",
    "SearchTimeoutError",
    "TokenBucket",
    "json_body",
    "rate_counted",
    "reserved_share",
    "rpc_problem",
    "search_gate",
    "too_many_requests",
]

log = logging.getLogger("guaipeca.server")

T = TypeVar("T")
PosArgsT = TypeVarTuple("PosArgsT")


#: Deepest JSON a request body may nest (tool arguments need a handful of levels).
MAX_JSON_DEPTH: Final = 64


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels (iterative: never recurses)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def json_body(body: bytes) -> object:
    """A request body parsed as JSON.

    Raises:
        ValueError: not JSON, or nested deeper than :data:`MAX_JSON_DEPTH` (a body nested
            thousands of levels deep would otherwise exhaust the parser's recursion); the
            message is one line safe to show.
    """
    too_deep = ValueError(f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body)
    except RecursionError:
        raise too_deep from None
    except ValueError:  # UnicodeDecodeError included
        raise ValueError("the body is not valid JSON") from None
    if _depth_exceeds(value, MAX_JSON_DEPTH):
        raise too_deep
    return value


# -- rate limit --------------------------------------------------------------------------
class TokenBucket:
    """Token buckets per key: ``rate`` tokens a second, at most ``burst`` saved up.

    Each request takes one token; a key's bucket starts full. At most ``max_keys`` buckets
    are kept: the least recently used one is dropped first (it is forgotten as if full,
    which only ever errs towards letting a request through).
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
    ) -> None:
        if not (rate > 0 and math.isfinite(rate)) or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = float(rate)
        self.burst = float(burst)
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def wait(self, key: str) -> float:
        """Seconds until ``key`` has a token (0.0: it has one now); takes nothing."""
        if key not in self._buckets:
            return 0.0
        tokens, then = self._buckets[key]
        tokens = min(self.burst, tokens + (self.clock() - then) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, key: str) -> float:
        """Take one token for ``key``: 0.0 if granted, else seconds until one is free."""
        now = self.clock()
        tokens, then = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            wait = 0.0
        else:
            self._buckets[key] = (tokens, now)
            wait = (1.0 - tokens) / self.rate
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait


#: Set when :class:`RateLimitMiddleware` has counted the request being served, so that a
#: tool call it carries (the web API's) is not counted again by the tool's own check.
rate_counted: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "guaipeca_rate_counted", default=False
)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (the body limit, applied before, bounds it), or None when
    the client left (or was cut off) before sending it all."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def reserved_share(total: int) -> int:
    """How many of ``total`` sessions or streams are kept for callers that hold none, so
    that no one caller can take the last free ones."""
    return max(1, total // 10)


def too_many_requests(wait: float) -> str:
    """The message of a rate-limit refusal (HTTP 429, or a tool error over MCP)."""
    return f"too many requests; retry in {max(1, math.ceil(wait))} s"


#: Longest JSON-RPC method, tool name or string id accepted: the SDK echoes them in its
#: answers and logs ("Method not found", "Tool ... not found"), so a 20 MB name would come
#: back whole and be rendered into the log.
MAX_RPC_NAME_CHARS: Final = 256


def rpc_problem(body: bytes) -> str | None:
    """Why a JSON-RPC body is refused before the MCP SDK sees it, or None (invalid JSON is
    left to the SDK, which answers it without echoing it)."""
    try:
        value = json_body(body)
    except ValueError:
        return None
    for message in value if isinstance(value, list) else [value]:
        if not isinstance(message, dict):
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        for what, item in (("method", message.get("method")), ("id", message.get("id"))):
            if isinstance(item, str) and len(item) > MAX_RPC_NAME_CHARS:
                return f"the {what} is longer than {MAX_RPC_NAME_CHARS} characters"
        if isinstance(name, str) and len(name) > MAX_RPC_NAME_CHARS:
            return f"the tool name is longer than {MAX_RPC_NAME_CHARS} characters"
    return None


class RpcBodyMiddleware:
    """The MCP routes' request bodies (``POST`` to ``paths``), read whole before the MCP
    SDK sees them (the body limit, applied before, bounds them):

    - a client that leaves mid-body costs one log line and never reaches the SDK (which
      would log a traceback for it);
    - a method, tool name or id over :data:`MAX_RPC_NAME_CHARS` is refused with a 400
      JSON-RPC error that does not repeat it.
    """

    def __init__(self, app: ASGIApp, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            log.info("client disconnected during POST %s", scope["path"])
            return
        problem = rpc_problem(body)
        if problem is not None:
            error = {"code": -32600, "message": f"invalid request: {problem}"}
            answer = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, 400)
            await answer(scope, receive, send)
            return
        await self.app(scope, _replaying(body, receive), send)


class RateLimitMiddleware:
    """429 with ``Retry-After`` (whole seconds, at least 1) once a caller's bucket is empty.

    Only work that costs counts here: the web API (tool calls, uploads), downloads and
    deletes. ``exempt_paths``, ``GET`` of ``free_paths`` (the page, the tool list) and the
    MCP routes (``mcp_paths``) are never counted here: a 429 on a POST ends a legacy SSE
    session in the official client, whatever the message was. MCP tool calls take their
    token in the tool itself (a tool error saying when to retry), opening a session takes
    one in sessions.py and streams.py, and other MCP protocol messages (notifications,
    ping, lists) never take one.

    The caller is the identity :class:`AuthMiddleware` found, else the client IP.
    """

    def __init__(
        self,
        app: ASGIApp,
        bucket: TokenBucket,
        exempt_paths: Collection[str] = ("/health",),
        mcp_paths: Collection[str] = (),
        free_paths: Collection[str] = (),
    ) -> None:
        self.app = app
        self.bucket = bucket
        self.exempt_paths = frozenset(exempt_paths) | frozenset(mcp_paths)
        self.free_paths = frozenset(free_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or path in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        if method in ("GET", "HEAD", "OPTIONS") and path in self.free_paths:
            await self.app(scope, receive, send)
            return
        wait = self.bucket.take(caller_of(scope))
        if wait > 0:
            response = error_response(
                429, too_many_requests(wait), {"Retry-After": str(max(1, math.ceil(wait)))}
            )
            await refuse(scope, receive, send, response)
            return
        rate_counted.set(True)
        await self.app(scope, receive, send)


# -- body size ---------------------------------------------------------------------------
class BodyLimitMiddleware:
    """413 for bodies over ``max_bytes``.

    A declared ``Content-Length`` over the limit is refused before any byte is read; a
    streamed (chunked) body is counted as it arrives and cut off at the limit: the client
    gets 413 and the application sees a disconnect (whatever it sends after is dropped).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = -1
            if size < 0:
                await error_response(400, "invalid Content-Length")(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return

        received = 0
        cut_off = False
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if cut_off:
                return  # the 413 has been sent: drop the application's late answer
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        async def counting_receive() -> Message:
            nonlocal received, cut_off
            if cut_off:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if not started:
                        await self._too_large(scope, receive, send)
                    cut_off = True
                    return {"type": "http.disconnect"}
            return message

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not cut_off:
                raise
            # The application may fail on the disconnect it was handed; the client has
            # its 413 already.

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_bytes
        shown = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
        await error_response(413, f"request body too large (limit {shown})")(scope, receive, send)


# -- searches: concurrency cap and deadline ----------------------------------------------
class SearchGate:
    """At most ``max_concurrent`` searches at once, and at most ``per_identity`` of one
    caller (``caller()`` names it; default: all but the last tenth of the slots, so one
    caller's searches, abandoned ones included, never hold every slot), each with a
    deadline.

    :meth:`run` waits up to ``timeout`` seconds for a free slot (else
    :class:`SearchBusyError`), then runs the blocking ``fn`` in a worker thread so the
    event loop never blocks, for up to ``timeout`` seconds (else
    :class:`SearchTimeoutError`). A search that overruns is abandoned, not killed (Python
    threads cannot be): it keeps its slot until its thread really ends, so the cap holds
    for the CPU, not only for the callers.
    """

    def __init__(
        self,
        max_concurrent: int,
        timeout: float,
        *,
        per_identity: int | None = None,
        caller: Callable[[], str] = lambda: "",
    ) -> None:
        if max_concurrent < 1 or not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("max_concurrent must be >= 1 and timeout > 0")
        self.max_concurrent = max_concurrent
        self.timeout = float(timeout)
        if per_identity is None:
            per_identity = max(1, max_concurrent - reserved_share(max_concurrent))
        self.per_identity = min(per_identity, max_concurrent)
        self._caller = caller
        self._limiter = anyio.CapacityLimiter(max_concurrent)
        # Each caller's own cap, made when it first searches and dropped once it holds none.
        self._mine: dict[str, anyio.CapacityLimiter] = {}

    @property
    def running(self) -> int:
        """Searches holding a slot now (abandoned ones included)."""
        return int(self._limiter.borrowed_tokens)

    async def run(self, fn: Callable[[*PosArgsT], T], *args: *PosArgsT) -> T:
        """``fn(*args)`` in a worker thread, within the cap and the deadline.

        Raises:
            SearchBusyError: no slot became free within the deadline.
            SearchTimeoutError: ``fn`` did not finish within the deadline.
            Exception: whatever ``fn`` raised.
        """
        return await self.run_cancellable(lambda _cancel: fn(*args))

    async def run_cancellable(self, fn: Callable[[threading.Event], T]) -> T:
        """Like :meth:`run`, for a ``fn`` that takes a cancel event: once the deadline
        passes, the client leaves (:mod:`~guaipeca.server.departure`) or the call is
        cancelled, the event is set, so a search that checks it (``Index.search(cancel=)``)
        stops at its next checkpoint and gives its slot back at once, instead of running
        on unobserved.

        Raises:
            SearchBusyError: no slot became free within the deadline.
            SearchTimeoutError: ``fn`` did not finish within the deadline.
            Exception: whatever ``fn`` raised.
        """
        cancel = threading.Event()
        # A client that leaves stops its search too (its slot is free at the next checkpoint).
        departure = current_departure.get()
        unlink = departure.link(cancel) if departure is not None else (lambda: None)
        try:
            return await self._run_in_slot(fn, cancel)
        finally:
            unlink()
            cancel.set()  # answered, failed, cancelled or abandoned: nothing waits for more

    async def _acquire(self, who: str, holder: object) -> anyio.CapacityLimiter:
        """Take one of ``who``'s slots, then one of the server's, within the deadline;
        ``who``'s cap, to give back with :meth:`_release`.

        Raises:
            SearchBusyError: no slot became free within the deadline.
        """
        mine = self._mine.setdefault(who, anyio.CapacityLimiter(self.per_identity))
        try:
            with anyio.fail_after(self.timeout):
                await mine.acquire_on_behalf_of(holder)
        except TimeoutError:
            self._forget(who, mine)
            raise SearchBusyError(
                f"the server is busy: {self.running} searches are running; retry in a moment"
                if self.running >= self.max_concurrent
                else f"busy: {int(mine.borrowed_tokens)} searches of this caller are running "
                f"(at most {self.per_identity} at once); retry in a moment"
            ) from None
        try:
            with anyio.fail_after(self.timeout):
                await self._limiter.acquire_on_behalf_of(holder)
        except TimeoutError:
            self._release(who, mine, holder, server=False)
            raise SearchBusyError(
                f"the server is busy: {self.running} searches are running; retry in a moment"
            ) from None
        return mine

    def _release(
        self, who: str, mine: anyio.CapacityLimiter, holder: object, *, server: bool = True
    ) -> None:
        """Give back ``holder``'s slots (on the event loop)."""
        if server:
            self._limiter.release_on_behalf_of(holder)
        mine.release_on_behalf_of(holder)
        self._forget(who, mine)

    def _forget(self, who: str, mine: anyio.CapacityLimiter) -> None:
        if mine.borrowed_tokens == 0 and mine.statistics().tasks_waiting == 0:
            self._mine.pop(who, None)

    async def _run_in_slot(self, fn: Callable[[threading.Event], T], cancel: threading.Event) -> T:
        holder = object()
        who = self._caller()
        mine = await self._acquire(who, holder)

        # Who gives the slot back: the worker thread when it ran `fn` (even after the
        # caller gave up on it), else this task (the thread never started).
        lock = threading.Lock()
        state = ["pending"]

        def release_from_thread() -> None:
            try:
                anyio.from_thread.run_sync(functools.partial(self._release, who, mine, holder))
            except Exception:  # the event loop is gone (shutting down): nothing to free
                log.debug("search slot not released: event loop closed", exc_info=True)

        def work() -> T:
            with lock:
                if state[0] == "abandoned":  # the caller left first; nobody waits
                    raise RuntimeError("search abandoned before it started")
                state[0] = "running"
            try:
                return fn(cancel)
            finally:
                release_from_thread()

        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except TimeoutError:
            cancel.set()  # the abandoned search stops at its next checkpoint
            raise SearchTimeoutError(
                f"search took longer than {self.timeout:g} s; "
                "retry with a narrower query or smaller top_k"
            ) from None
        finally:
            with lock:
                never_started = state[0] == "pending"
                state[0] = "abandoned" if never_started else state[0]
            if never_started:
                self._release(who, mine, holder)


def search_gate(
    settings: ServerSettings | Settings | LoadedSettings, caller: Callable[[], str] = lambda: ""
) -> SearchGate:
    """A :class:`SearchGate` from ``server.max_concurrent_searches`` and
    ``server.search_timeout_seconds``, its per-caller cap counted by ``caller()``."""
    if isinstance(settings, LoadedSettings):
        settings = settings.settings
    if isinstance(settings, Settings):
        settings = settings.server
    return SearchGate(
        settings.max_concurrent_searches, settings.search_timeout_seconds, caller=caller
    )
