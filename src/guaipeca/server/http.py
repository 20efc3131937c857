"""The HTTP face: one Starlette app for MCP (Streamable HTTP and legacy SSE) and the plain
routes (§7.2-7.4), served by uvicorn.

Routes:

- ``/mcp``: Streamable HTTP (POST JSON-RPC, GET stream, DELETE ends a session), from the
  SDK's session manager, whose lifespan the app runs;
- ``GET /sse`` + ``POST /messages/`` (and ``/messages``): the legacy SSE transport;
- ``GET /health`` (no auth): status, version, backend, corpora; ``GET /tools``: the tool list;
- ``GET /download/{corpus}/{path}``: a file of a configured corpus folder;
- ``DELETE /documents?corpus=&filename=``: removes a file and its document.

Middleware, outermost first: sanitised errors, allowed hosts (DNS rebinding), CORS, 401s to
the audit log, auth (wrong credentials throttled), session owner (binds MCP sessions to the
identity, sets the write queue's caller), access (the caller's grants, server/access.py),
departure (a tool call's client leaving stops its search), event streams per caller and in
all (streams.py), body size limit, rate limit (not MCP routes: limited in the tool), MCP
bodies (read whole; over-long names refused). ``/mcp`` sessions are budgeted per caller
(sessions.py); the open-files limit is raised at start and bounds connections and streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Final

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from guaipeca import __version__
from guaipeca.errors import (
    BackendUnavailableError,
    GuaipecaError,
    NotFoundError,
    WriteQueueFullError,
)
from guaipeca.server.access import AccessMiddleware, AuditRefusals
from guaipeca.server.asgi import caller_of, error_response, identity_of, queue_full_response
from guaipeca.server.bind import listen
from guaipeca.server.connections import TimedH11Protocol
from guaipeca.server.departure import DepartureMiddleware
from guaipeca.server.health import SERVER_NAME, health_body
from guaipeca.server.idle import IdleTrim, ToolCalls
from guaipeca.server.limits import BodyLimitMiddleware, RateLimitMiddleware, RpcBodyMiddleware
from guaipeca.server.resource import ProtectedResource
from guaipeca.server.security import (
    AllowedHostsMiddleware,
    Authenticator,
    AuthMiddleware,
    SanitizedErrorsMiddleware,
    UnsafePathError,
    cors_middleware,
    failure_bucket,
    resolve_inside,
    safe_relative_path,
)
from guaipeca.server.service import Service
from guaipeca.server.sessions import SessionBudget
from guaipeca.server.streams import (
    StreamBudget,
    connection_budget,
    open_files_limit,
    quiet_descriptor_errors,
    raise_open_files_limit,
    stream_budget,
)
from guaipeca.server.tools import build_server
from guaipeca.server.webui import WEB_PAGE_PATHS, web_routes
from guaipeca.server.writes import caller
from guaipeca.types import IndexStats

__all__ = ["allowed_hosts", "build_app", "make_server", "serve_http"]

log = logging.getLogger("guaipeca.server")

PUBLIC_PATHS: Final = ("/health",)
#: Where MCP traffic arrives (Streamable HTTP, the legacy SSE stream and its messages).
MCP_PATHS: Final = ("/mcp", "/sse", "/messages", "/messages/")
_LOOPBACK: Final = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_BINDS: Final = ("", "0.0.0.0", "::", "[::]")
#: How long, after the shutdown, a write told to stop may take before the process exits.
_WRITE_STOP_SECONDS: Final = 5.0
#: Headers on every downloaded file: never rendered in the server's origin (an HTML
#: document of a corpus must not run scripts next to the API), never cached.
_DOWNLOAD_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "no-store",
}


# -- hosts -------------------------------------------------------------------------------
def _host_name(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _extra_host(entry: str) -> list[str]:
    """Patterns for one ``server.allowed_hosts`` entry: ``name:port`` and ``name:*`` as
    they are; a bare name (or ``[v6]``) at any port, and without one (ports 80/443)."""
    entry = entry.strip().lower()
    if entry == "*":
        return ["*"]
    if entry.startswith("["):
        bare = entry.endswith("]")
    else:
        bare = entry.count(":") != 1  # none, or a bare IPv6 address
        if entry.count(":") > 1:
            entry = f"[{entry}]"
    return [f"{entry}:*", entry] if bare else [entry]


def allowed_hosts(host: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """``Host`` header values accepted: the loopback names and ``host``, at ``port``.

    Port 0 (an ephemeral port, tests) accepts any port. A wildcard bind (``0.0.0.0``)
    adds nothing: clients reaching it by another name must be listed in ``extra``
    (``server.allowed_hosts``: ``name`` for any port, ``name:port``, or ``*`` for any
    host, which turns the check off).
    """
    suffix = "*" if port == 0 else str(port)
    names = list(_LOOPBACK)
    if host not in _WILDCARD_BINDS and _host_name(host) not in names:
        names.append(_host_name(host))
    hosts = [f"{name}:{suffix}" for name in names]
    if port == 80:  # browsers leave the default port out of Host
        hosts.extend(names)
    for entry in extra:
        hosts.extend(h for h in _extra_host(entry) if h not in hosts)
    return hosts


def _transport_security(
    hosts: Sequence[str], cors_origins: Sequence[str]
) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding checks for ``/mcp``, ``/sse`` and ``/messages``: the same
    hosts as the plain routes; as origins, pages served from those hosts (the built-in
    web page) and the configured CORS origins."""
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    origins.extend(o for o in cors_origins if o != "*")
    return TransportSecuritySettings(
        # server.allowed_hosts: ["*"] (behind a trusted reverse proxy) turns the check off.
        enable_dns_rebinding_protection="*" not in hosts,
        allowed_hosts=list(hosts),
        allowed_origins=origins,
    )


# -- MCP session ownership -----------------------------------------------------------------
class _SessionOwnerMiddleware:
    """Presents the authenticated identity to the MCP SDK as ``scope["user"]``.

    The SDK binds each Streamable HTTP and SSE session to the principal that opened it
    and answers 404 to anyone else, so one client cannot ride on another's session id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity = identity_of(scope)
        if identity is not None:
            # No raw credential is kept: the SDK compares principals, not tokens.
            token = AccessToken(token="", client_id=identity, scopes=[], subject=identity)
            scope["user"] = AuthenticatedUser(token)
        if scope["type"] == "http":
            # Whom the write queue counts a tool call against (an MCP session runs its
            # calls in the context of the request that opened it).
            caller.set(caller_of(scope))
        await self.app(scope, receive, send)


# -- the plain routes --------------------------------------------------------------------
class _NotFound(Exception):
    pass


def _locate(service: Service, corpus: str, raw: str) -> tuple[str, Path]:
    """``(relative path, resolved file)`` of an indexed file of a configured corpus.

    Blocking (file system and catalog).

    Raises:
        UnsafePathError: ``raw`` is not a safe relative path.
        _NotFound: no such corpus, file or indexed document (one reason for all).
    """
    try:
        config = service.corpus(corpus)
    except GuaipecaError:
        raise _NotFound from None
    relative = safe_relative_path(raw)
    try:
        root = service.corpus_root(corpus)
        target = resolve_inside(
            root, relative, extensions=config.extensions, exclude=config.exclude
        )
        # Only files the index holds: never one the scan skipped (the data folder, a
        # linked folder, a file written after the last run).
        found = service.index.list_documents(corpus=corpus, where={"doc_id": relative}, limit=1)
    except (UnsafePathError, GuaipecaError, OSError):
        raise _NotFound from None
    if not found or found[0].source_path is None:
        raise _NotFound
    return relative, target


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))


class _PlainRoutes:
    """The plain routes over ``service`` and its MCP ``server``: one method per route."""

    def __init__(self, service: Service, server: MCPServer) -> None:
        self.service = service
        self.server = server
        self._health_threads: anyio.CapacityLimiter | None = None

    async def health(self, request: Request) -> Response:
        index = self.service.index
        backend = self.service.loaded.settings.storage.backend

        def probe() -> IndexStats:
            down = index.backend_error
            if down is not None:
                raise BackendUnavailableError(down)
            return index.stats()

        if self._health_threads is None:  # made in the event loop, as anyio wants
            self._health_threads = anyio.CapacityLimiter(2)
        try:
            # One thread hop, on threads of its own: /health never waits behind the worker
            # threads searches, reads and conversions hold.
            stats = await anyio.to_thread.run_sync(probe, limiter=self._health_threads)
        except BackendUnavailableError:
            # No details without auth: the message names the server's address.
            down_body = {
                "status": "error",
                "server": SERVER_NAME,
                "version": __version__,
                "backend": backend,
            }
            return JSONResponse({**down_body, "backend_status": "down"}, status_code=503)
        except Exception:
            log.exception("health check failed")
            failed = {"status": "error", "server": SERVER_NAME, "version": __version__}
            return JSONResponse(failed, status_code=503)
        body = health_body(self.service, backend, stats)
        problem = self.service.disk_problem()
        if problem is not None:  # searches work; writes fail until space is freed
            body.update(status="degraded", reason=problem)
        return JSONResponse(body)

    async def tools(self, request: Request) -> Response:
        listed = await self.server.list_tools()
        return JSONResponse(
            {
                "tools": [
                    {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                    for t in listed
                ]
            }
        )

    async def download(self, request: Request) -> Response:
        corpus = str(request.path_params["corpus"])
        try:
            relative, target = await anyio.to_thread.run_sync(
                _locate, self.service, corpus, str(request.path_params["path"])
            )
        except UnsafePathError:
            return error_response(400, "invalid path")
        except _NotFound:
            return error_response(404, "not found")
        return FileResponse(
            target,
            filename=Path(relative).name,
            media_type="application/octet-stream",
            headers=_DOWNLOAD_HEADERS,
        )

    async def delete_document(self, request: Request) -> Response:
        service = self.service
        corpus = request.query_params.get("corpus")
        filename = request.query_params.get("filename")
        if not corpus or not filename:
            return error_response(400, "give corpus and filename as query parameters")
        try:
            service.writable_corpus(corpus)
        except NotFoundError:
            return error_response(404, "not found")
        except GuaipecaError as exc:  # not in upload.allow
            return error_response(403, service.sanitise(str(exc)))
        try:
            relative, _ = await anyio.to_thread.run_sync(_locate, service, corpus, filename)
            out = await service.writes.run(functools.partial(service.delete, corpus, relative))
        except WriteQueueFullError as exc:
            return queue_full_response(exc)
        except UnsafePathError:
            return error_response(400, "invalid path")
        except (_NotFound, NotFoundError):
            return error_response(404, "not found")
        return JSONResponse(out.model_dump(mode="json"))


def _routes(service: Service, server: MCPServer, mcp_app: ASGIApp) -> list[BaseRoute]:
    plain = _PlainRoutes(service, server)
    return [
        Route("/mcp", endpoint=mcp_app),
        Route("/health", endpoint=plain.health, methods=["GET"]),
        Route("/tools", endpoint=plain.tools, methods=["GET"]),
        Route("/download/{corpus}/{path:path}", endpoint=plain.download, methods=["GET"]),
        Route("/documents", endpoint=plain.delete_document, methods=["DELETE"]),
    ]


class _AsgiEndpoint:
    """An ASGI callable as a route endpoint (Starlette calls plain functions and bound
    methods as request -> response handlers instead)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _sse_routes(sse_app: Starlette) -> list[BaseRoute]:
    """The SDK's SSE routes (``GET /sse``, ``/messages/``, and any custom routes the
    server registered), plus ``POST /messages`` without the slash, which some clients use."""
    routes = list(sse_app.routes)
    for route in sse_app.routes:
        if isinstance(route, Mount) and route.path == "/messages":
            routes.append(Route("/messages", endpoint=_AsgiEndpoint(route.app), methods=["POST"]))
    return routes


# -- the app -----------------------------------------------------------------------------
def _warn_on_limits(service: Service) -> None:
    """Log when an upload of the largest allowed size, base64-encoded in a JSON-RPC
    request, could not fit in ``server.max_body_bytes`` (the web page sends raw bytes)."""
    s = service.settings
    needed = -(-s.upload.max_file_size // 3) * 4 + 64 * 1024
    if s.upload.allow and s.server.max_body_bytes < needed:
        log.warning(
            "server.max_body_bytes (%d) is below what an MCP upload of upload.max_file_size "
            "needs as base64 (%d): large uploads through the upload tool will get 413",
            s.server.max_body_bytes,
            needed,
        )


def _middleware(
    service: Service, hosts: Sequence[str], authenticator: Authenticator
) -> list[Middleware]:
    """The middleware stack, outermost first (see the module docstring)."""
    settings = service.settings.server
    return [
        Middleware(SanitizedErrorsMiddleware),
        Middleware(AllowedHostsMiddleware, allowed_hosts=hosts, exempt_paths=PUBLIC_PATHS),
        cors_middleware(settings.cors_origins, auth_enabled=authenticator.enabled),
        Middleware(AuditRefusals, audit=service.audit),
        Middleware(
            AuthMiddleware,
            authenticator=authenticator,
            public_paths=(*PUBLIC_PATHS, *WEB_PAGE_PATHS, *ProtectedResource(settings.oidc).paths),
            failures=failure_bucket(settings.auth_failures_per_minute),
        ),
        Middleware(_SessionOwnerMiddleware),
        Middleware(AccessMiddleware, policy=service.guard.policy),
        # Tool calls see their client leave (a search then frees its slot at once).
        Middleware(DepartureMiddleware, paths=MCP_PATHS, prefixes=("/api/tools/",)),
        Middleware(
            StreamBudget,
            bucket=service.rate_bucket,
            total=stream_budget(settings.max_streams, open_files_limit()),
            per_identity=settings.max_streams_per_identity,
        ),
        # Before the MCP routes' body check, which reads their bodies whole: no body past
        # the limit is ever buffered.
        Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        Middleware(
            RateLimitMiddleware,
            bucket=service.rate_bucket,
            exempt_paths=(*PUBLIC_PATHS, *ProtectedResource(settings.oidc).paths),
            mcp_paths=MCP_PATHS,
            free_paths=(*WEB_PAGE_PATHS, "/tools"),
        ),
        Middleware(RpcBodyMiddleware, paths=MCP_PATHS),
    ]


def build_app(
    service: Service,
    *,
    mcp_server: MCPServer | None = None,
    host: str | None = None,
    port: int | None = None,
    extra_allowed_hosts: Sequence[str] = (),
) -> Starlette:
    """The whole HTTP face over ``service`` (its MCP server: ``mcp_server`` or
    :func:`~guaipeca.server.tools.server.build_server`).

    ``host`` and ``port`` (default: ``server.host`` and ``server.port``) are where the
    app is served; they set the ``Host`` headers accepted (DNS-rebinding protection,
    see :func:`allowed_hosts`).

    Raises:
        ConfigError: ``server.cors_origins`` holds ``*`` while auth is on.
    """
    settings = service.loaded.settings.server
    if mcp_server is None:
        mcp_server = build_server(service)
    host = settings.host if host is None else host
    port = settings.port if port is None else port
    hosts = allowed_hosts(host, port, [*settings.allowed_hosts, *extra_allowed_hosts])
    _warn_on_limits(service)
    security = _transport_security(hosts, settings.cors_origins)
    authenticator = Authenticator.from_settings(settings, service.loaded.data_dir)

    # streamable_http_app() creates the session manager; only its route handler is used.
    mcp_server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=security,
        max_request_body_size=settings.max_body_bytes,
        session_idle_timeout=settings.session_idle_seconds,
        max_sessions=settings.max_sessions,
        host=host,
    )
    session_manager = mcp_server.session_manager
    sse_app = mcp_server.sse_app(
        sse_path="/sse",
        message_path="/messages/",
        transport_security=security,
        max_request_body_size=settings.max_body_bytes,
        host=host,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with session_manager.run():
            yield

    sessions = SessionBudget(
        StreamableHTTPASGIApp(session_manager),
        service.rate_bucket,
        total=settings.max_sessions,
        per_identity=settings.max_sessions_per_identity,
        idle_seconds=settings.session_idle_seconds,
    )
    routes = _routes(service, mcp_server, sessions)
    routes.extend(_sse_routes(sse_app))
    routes.extend(web_routes(service, mcp_server))
    routes.extend(ProtectedResource(settings.oidc).routes())
    middleware = _middleware(service, hosts, authenticator)
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )


# -- serving -----------------------------------------------------------------------------
def _log_config() -> dict[str, Any]:
    """uvicorn's logging, all of it on stderr: with ``--transport both`` stdout carries
    the stdio MCP stream, and an access-log line there would corrupt it."""
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config["loggers"]["guaipeca.server"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


class _InFlight(ToolCalls):
    """Counts requests being served, except the long-lived streams (``GET /mcp``,
    ``GET /sse``) that only end when the client or the server closes them."""

    STREAMS: Final = frozenset({"/mcp", "/sse"})

    def __init__(self, app: ASGIApp) -> None:
        super().__init__()
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"] == "GET" and scope["path"] in self.STREAMS):
            await self.app(scope, receive, send)
            return
        self.started()
        try:
            await self.app(scope, receive, send)
        finally:
            self.done()


class _DrainingServer(uvicorn.Server):
    """uvicorn, with a drain before the shutdown.

    On the first SIGTERM/SIGINT it stops accepting connections and waits, up to
    ``drain_seconds``, for the requests in flight (tool calls streaming their answer
    included) to finish; only then does uvicorn's own shutdown run, which ends the
    long-lived streams. Without the drain, uvicorn's shutdown would also cut the
    streamed answers of tool calls still running. A second signal skips the drain.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        in_flight: _InFlight,
        drain_seconds: float,
        idle_trim: IdleTrim | None = None,
        on_drain: Callable[[], None] | None = None,
    ):
        super().__init__(config)
        self.in_flight = in_flight
        self.drain_seconds = drain_seconds
        self.idle_trim = idle_trim
        self.on_drain = on_drain
        self._drain: tuple[int, float] | None = None  # the signal, the deadline
        self.stopped_by: list[int] = []  # the signals that stopped it
        self._listening = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        quiet_descriptor_errors(asyncio.get_running_loop())
        await super().startup(sockets=sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain is None and not self.should_exit:
            self._drain = (sig, time.monotonic() + self.drain_seconds)
            return
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises the signal once it has shut down, which kills the process
        # before the caller can close the index; a graceful stop returns instead.
        with super().capture_signals():
            try:
                yield
            finally:
                self.stopped_by = list(self._captured_signals)
                self._captured_signals.clear()

    async def on_tick(self, counter: int) -> bool:
        if self.idle_trim is not None and self._drain is None:
            self.idle_trim.tick()
        if self._drain is not None and not self.should_exit:
            sig, deadline = self._drain
            if self._listening:
                self._listening = False
                for server in self.servers:
                    server.close()
                log.info(
                    "draining: %d request(s) in flight, for at most %g s",
                    self.in_flight.count,
                    self.drain_seconds,
                )
                if self.on_drain is not None:
                    self.on_drain()
            if self.in_flight.count == 0 or time.monotonic() >= deadline:
                super().handle_exit(sig, None)
        return await super().on_tick(counter)


def make_server(
    service: Service,
    host: str,
    port: int,
    *,
    mcp_server: MCPServer | None = None,
    graceful_timeout: float | None = None,
) -> uvicorn.Server:
    """A uvicorn server for :func:`build_app` (not started).

    On SIGTERM or SIGINT it stops accepting connections, stops the writes (queued ones are
    refused, a running index run ends at its next file or batch) and lets requests in
    flight finish, for at most ``graceful_timeout`` seconds (default:
    ``server.shutdown_grace_seconds``); then the streams (``GET /sse``, ``GET /mcp``) end
    and the app shuts down, whatever still runs 5 s later being cancelled (with a JSON
    503). A second signal skips the wait.
    """
    settings = service.loaded.settings.server
    before, nofile = raise_open_files_limit()  # before build_app derives the stream budget
    app = build_app(service, mcp_server=mcp_server, host=host, port=port)
    connections = connection_budget(nofile)
    log.info(
        "open files: limit %d%s; up to %d connections, %d event streams (%d per caller), "
        "%d MCP sessions (%d per caller)",
        nofile,
        f" (raised from {before})" if nofile > before else "",
        connections,
        stream_budget(settings.max_streams, nofile),
        settings.max_streams_per_identity,
        settings.max_sessions,
        settings.max_sessions_per_identity,
    )
    if graceful_timeout is None:
        graceful_timeout = settings.shutdown_grace_seconds
    in_flight = _InFlight(app)
    protocol = type(
        "TimedH11Protocol",
        (TimedH11Protocol,),
        {
            "header_timeout": settings.header_timeout_seconds,
            "body_timeout": settings.body_timeout_seconds,
            "max_connections": connections,
        },
    )
    config = uvicorn.Config(
        in_flight,
        host=host,
        port=port,
        log_config=_log_config(),
        ws="none",
        http=protocol,
        lifespan="on",
        server_header=False,
        # Past this many connections uvicorn answers 503 instead of running out of files.
        limit_concurrency=connections,
        # After the drain only streams remain, and they end at once.
        timeout_graceful_shutdown=5,
    )
    idle_trim = IdleTrim(in_flight, service.index.release_memory, settings.idle_trim_seconds)
    return _DrainingServer(
        config, in_flight, graceful_timeout, idle_trim, on_drain=service.writes.stop
    )


async def serve_http(
    service: Service, host: str, port: int, sockets: list[socket.socket] | None = None
) -> None:
    """Serve :func:`build_app` on ``host:port`` until SIGTERM/SIGINT (graceful: requests
    in flight finish), then return, so that the caller closes the index. Logs go to
    stderr. ``sockets``: bound by ``bind.listen`` (else here), before the URL is announced.
    Raises:
        GuaipecaError: the port is in use or the address cannot be bound (``bind.listen``).
    """
    if sockets is None:
        sockets = listen(host, port)
    server = make_server(service, host, port)
    shown = f"{_host_name('127.0.0.1' if host in _WILDCARD_BINDS else host)}:{port}"
    log.info("MCP at http://%s/mcp, web page at http://%s/", shown, shown)
    await server.serve(sockets=sockets)
    # A write told to stop ends at its next file or batch; a long embedding batch must not
    # keep the process alive for minutes. Committed state is crash-safe.
    deadline = time.monotonic() + _WRITE_STOP_SECONDS
    while service.writes.running and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    if service.writes.running:
        log.warning(
            "a write is still running %g s after the shutdown; exiting without it "
            "(the next index run completes it)",
            _WRITE_STOP_SECONDS,
        )
        logging.shutdown()
        os._exit(0)
