"""The built-in web page (§7.3): a static page plus a small JSON API it calls.

- ``GET /`` and ``GET /ui/{app.js,app.css}``: the page, shipped as package data in
  ``server/web/`` (plain HTML/CSS/JS: no build step, nothing loaded from elsewhere). They
  hold no data, so they need no credentials: a browser cannot send a Bearer header when
  it opens a page. The page asks for the token and sends it on every API call.
- ``POST /api/tools/{name}``: calls one MCP tool with the JSON body as its arguments and
  answers its structured result, or ``{"error": ...}``. The same tools, validation, search
  gate and error sanitising as ``/mcp``, behind the same auth: nothing the caller could
  not do over MCP already. An ``upload`` accepted as a job answers 202 (``Location``).
- ``PUT /api/upload?corpus=&filename=[&subfolder=][&overwrite=true]``: the file's raw
  bytes as the body (no base64), then the same checks as the ``upload`` tool; converted
  outside the write turn, answered 202 with a job when not done within
  ``upload.answer_seconds`` (``GET /jobs/{id}``: server/uploads.py).
- ``GET /api/me``: who is signed in (the identity the credential proved, or none) and
  the corpora it may read and write, so the page can say so.
- ``POST /api/render``: Markdown the page already fetched (a document, snippets) as
  sanitised HTML, the hit's span marked (``webrender``). Behind the same auth, though it
  reads nothing: it keeps the server's unauthenticated surface to the static page.

Cross-site requests: both API routes need a request a web form cannot send (a JSON
``POST`` or a ``PUT``, so a browser preflights them and CORS refuses unlisted origins),
and an ``Origin`` header, when sent, must be this server's own or a configured CORS origin.
"""

from __future__ import annotations

import functools
import logging
import threading
from importlib import resources
from typing import Any, Final
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from guaipeca.errors import (
    DISK_FULL_HINT,
    UPLOAD_QUOTA_HINT,
    GuaipecaError,
    NotFoundError,
    StoppedError,
    WriteQueueFullError,
)
from guaipeca.server.asgi import error_response, principal_of, queue_full_response
from guaipeca.server.files import PreparedUpload
from guaipeca.server.limits import json_body
from guaipeca.server.service import Service
from guaipeca.server.uploads import answer_upload, convert_then_store, job_routes
from guaipeca.server.webrender import MAX_RENDER_CHARS, render_markdown
from guaipeca.server.writes import WRITE_TOOLS

__all__ = ["WEB_PAGE_PATHS", "web_routes"]

log = logging.getLogger("guaipeca.server")

_ASSETS: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
#: Paths served without credentials: the page and its assets, which hold no data.
WEB_PAGE_PATHS: Final = ("/", *(f"/ui/{name}" for name in _ASSETS))
#: Scripts and styles only from this server, no framing, no form posts elsewhere.
_PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_TRUE: Final = ("1", "true", "yes", "on")


@functools.cache
def _asset(name: str) -> bytes:
    return resources.files("guaipeca.server").joinpath("web", name).read_bytes()


def _origin_allowed(request: Request, cors_origins: list[str]) -> bool:
    """No ``Origin`` (not a browser's cross-site request), this server's own origin (its
    host is already checked against the allowed hosts), or a configured CORS origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    if origin in cors_origins:
        return True
    parts = urlsplit(origin)
    host = request.headers.get("host", "")
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def _tool_error_status(name: str, message: str) -> int:
    """A write that failed on a full disk, or over its identity's upload budget: HTTP's
    "insufficient storage"; any other tool error: 400."""
    full = message.endswith(DISK_FULL_HINT) or message.endswith(UPLOAD_QUOTA_HINT)
    return 507 if name in WRITE_TOOLS and full else 400


def _tool_error_message(name: str, exc: Exception) -> str:
    message = str(exc)
    prefix = f"Error executing tool {name}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _render_request(body: Any) -> tuple[list[str], list[tuple[int, int] | None], bool] | str:
    """The parts of a ``/api/render`` body, or what is wrong with it."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    texts, spans = body.get("texts"), body.get("spans")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return "texts must be a list of strings"
    if sum(len(t) for t in texts) > MAX_RENDER_CHARS:
        return f"at most {MAX_RENDER_CHARS:,} characters in one call"
    spans = [None] * len(texts) if spans is None else spans
    if not isinstance(spans, list) or len(spans) != len(texts):
        return "spans must be a list as long as texts"
    parsed: list[tuple[int, int] | None] = []
    for span in spans:
        if span is None:
            parsed.append(None)
        elif (
            isinstance(span, list)
            and len(span) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in span)
        ):
            parsed.append((span[0], span[1]))
        else:
            return "each span is null or [start, end]"
    return texts, parsed, body.get("snippet") is True


async def _page(request: Request) -> Response:
    return Response(_asset("index.html"), media_type="text/html", headers=_PAGE_HEADERS)


async def _ui_asset(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in _ASSETS:
        return error_response(404, "not found")
    return Response(_asset(name), media_type=_ASSETS[name], headers=_PAGE_HEADERS)


async def _limited_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it is larger than ``limit`` bytes (declared or
    sent): no more of it is read then."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    data = bytearray()
    async for part in request.stream():
        data.extend(part)
        if len(data) > limit:
            return None
    return bytes(data)


class _WebApi:
    """The page's JSON API over ``service`` and its MCP ``server``: one method per route."""

    def __init__(self, service: Service, server: MCPServer[Any]) -> None:
        self.service = service
        self.server = server
        self.cors_origins = list(service.settings.server.cors_origins)
        self.tool_names: set[str] = set()  # filled on the first call

    async def call_tool(self, request: Request) -> Response:
        service, server = self.service, self.server
        name = str(request.path_params["name"])
        if not _origin_allowed(request, self.cors_origins):
            return error_response(403, "origin not allowed")
        content_type = request.headers.get("content-type", "")
        if not content_type.lower().startswith("application/json"):
            return error_response(415, "send the tool's arguments as application/json")
        if not self.tool_names:
            self.tool_names.update(t.name for t in await server.list_tools())
        if name not in self.tool_names:
            return error_response(404, f"no tool named {name[:60]!r}")
        try:
            arguments = json_body(await request.body())
        except ClientDisconnect:
            raise
        except ValueError as exc:
            return error_response(400, str(exc))
        if not isinstance(arguments, dict):
            return error_response(400, "the body must be a JSON object of tool arguments")
        if name not in WRITE_TOOLS:
            return await self._run_tool(name, arguments)
        try:
            # The call's one admission to the write queue: the tool runs in this place.
            async with service.writes.admitted():
                return await self._run_tool(name, arguments)
        except WriteQueueFullError as exc:
            return queue_full_response(exc)
        except StoppedError as exc:
            return error_response(503, str(exc))

    async def _run_tool(self, name: str, arguments: dict[str, Any]) -> Response:
        """The tool's structured result, or its error as one line."""
        service = self.service
        try:
            result = await self.server.call_tool(name, arguments)
        except (ToolError, MCPError) as exc:
            message = service.sanitise(_tool_error_message(name, exc))
            return error_response(_tool_error_status(name, message), message)
        if not isinstance(result, CallToolResult):  # no tool of ours asks for input
            return error_response(500, "internal error")
        if result.is_error:
            text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
            status = _tool_error_status(name, text)
            return error_response(status, service.sanitise(text or "the tool failed"))
        out = result.structured_content or {}
        if name == "upload" and out.get("state") == "running":  # accepted as a job
            return JSONResponse(out, status_code=202, headers={"Location": str(out["poll"])})
        return JSONResponse(out)

    async def me(self, request: Request) -> Response:
        guard, who = self.service.guard, principal_of(request.scope)

        def rights() -> tuple[list[str], list[str]]:
            readable = guard.readable()
            return readable, [n for n in readable if guard.rights.may_write(n)]

        read, write = await anyio.to_thread.run_sync(rights)
        return JSONResponse(
            {
                "identity": who.key if who else None,
                "subject": who.subject if who else None,
                "source": who.source if who else None,
                "groups": sorted(who.claims.get("group", ())) if who else [],
                "grants": guard.policy.enabled,
                "read": read,
                "write": write,
            }
        )

    async def render(self, request: Request) -> Response:
        if not _origin_allowed(request, self.cors_origins):
            return error_response(403, "origin not allowed")
        if not request.headers.get("content-type", "").lower().startswith("application/json"):
            return error_response(415, "send application/json")
        try:
            parsed = _render_request(await request.json())
        except ClientDisconnect:
            raise
        except ValueError:
            return error_response(400, "the body is not valid JSON")
        if isinstance(parsed, str):
            return error_response(400, parsed)
        texts, spans, snippet = parsed

        def run() -> list[str]:
            return [
                render_markdown(t, s, snippet=snippet) for t, s in zip(texts, spans, strict=True)
            ]

        return JSONResponse({"html": await anyio.to_thread.run_sync(run)})

    async def upload(self, request: Request) -> Response:
        service = self.service
        if not _origin_allowed(request, self.cors_origins):
            return error_response(403, "origin not allowed")
        query = request.query_params
        corpus, filename = query.get("corpus"), query.get("filename")
        if not corpus or not filename:
            return error_response(400, "give corpus and filename as query parameters")
        try:
            service.writable_corpus(corpus)
        except NotFoundError:
            return error_response(404, f"no corpus named {corpus[:60]!r}")
        except GuaipecaError as exc:  # not in upload.allow
            return error_response(403, service.sanitise(str(exc)))
        limit = service.settings.upload.max_file_size
        data = await _limited_body(request, limit)
        if data is None:
            return error_response(413, f"the file is larger than upload.max_file_size ({limit})")
        subfolder = query.get("subfolder") or None
        overwrite = query.get("overwrite", "").lower() in _TRUE

        def prepare(cancel: threading.Event) -> PreparedUpload:
            return service.prepare_upload(
                corpus, filename, data, subfolder=subfolder, overwrite=overwrite, cancel=cancel
            )

        cancel = threading.Event()
        work = convert_then_store(service, prepare, index=None, cancel=cancel)
        return await answer_upload(request, service, work)


def web_routes(service: Service, server: MCPServer[Any]) -> list[BaseRoute]:
    """The page's routes over ``service`` and its MCP ``server``."""
    api = _WebApi(service, server)
    return [
        Route("/", endpoint=_page, methods=["GET"]),
        Route("/ui/{name}", endpoint=_ui_asset, methods=["GET"]),
        Route("/api/tools/{name}", endpoint=api.call_tool, methods=["POST"]),
        Route("/api/upload", endpoint=api.upload, methods=["PUT"]),
        Route("/api/render", endpoint=api.render, methods=["POST"]),
        Route("/api/me", endpoint=api.me, methods=["GET"]),
        *job_routes(service),
    ]
