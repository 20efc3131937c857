"""HTTP security pieces, each a small pure-ASGI middleware or helper (§7.4).

- :class:`AuthMiddleware`: the Bearer credential every route but the public ones needs,
  checked by :class:`~guaipeca.server.auth.Authenticator` (tokens, named tokens, HS256
  JWTs as OpenWebUI sends them, an OpenID provider's tokens).
- :class:`AllowedHostsMiddleware`: DNS-rebinding protection for the plain HTTP routes (the
  MCP SDK checks its own routes the same way).
- :func:`cors_middleware`: only the configured origins, never ``*`` while auth is on.
- :class:`SanitizedErrorsMiddleware`: any exception becomes ``{"error": "internal error"}``.
- :func:`safe_relative_path` and :func:`resolve_inside`: user-given file paths that cannot
  leave a corpus folder.

Limits on what a request may cost (rate, bodies, searches) are in server/limits.py. Every
refusal is JSON ``{"error": "..."}`` and names no internal path.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import math
import os
import stat
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Final
from urllib.parse import unquote

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.errors import (
    DISK_FULL_HINT,
    AuthError,
    ConfigError,
    IdentityProviderError,
    UnsafePathError,
    is_disk_full,
)
from guaipeca.server.asgi import (
    IDENTITY_SCOPE_KEY,
    PRINCIPAL_SCOPE_KEY,
    client_ip,
    error_response,
    refuse,
)
from guaipeca.server.auth import Authenticator
from guaipeca.server.limits import TokenBucket

__all__ = [
    "AllowedHostsMiddleware",
    "AuthError",
    "AuthMiddleware",
    "Authenticator",
    "SanitizedErrorsMiddleware",
    "UnsafePathError",
    "cors_middleware",
    "failure_bucket",
    "resolve_inside",
    "safe_relative_path",
]

log = logging.getLogger("guaipeca.server")


# -- authentication ----------------------------------------------------------------------
def failure_bucket(per_minute: int) -> TokenBucket:
    """The bucket of wrong credentials per client address: ``per_minute`` at once, then
    refilled at that many a minute."""
    return TokenBucket(per_minute / 60.0, per_minute)


def _too_many(wait: float, what: str) -> JSONResponse:
    retry = max(1, math.ceil(wait))
    return error_response(429, f"{what}; retry in {retry} s", {"Retry-After": str(retry)})


class AuthMiddleware:
    """Refuses requests without valid credentials (401, ``WWW-Authenticate: Bearer``).

    ``public_paths`` (exact paths, e.g. ``/health``) pass without credentials. With auth
    off (:attr:`Authenticator.enabled` false) every request passes. The identity is left
    in the scope: its key under :data:`IDENTITY_SCOPE_KEY`, the whole
    :class:`~guaipeca.server.asgi.Identity` under :data:`PRINCIPAL_SCOPE_KEY`. A 401 names
    the protected resource metadata when there is some (MCP clients discover the
    provider from it); a provider that cannot be reached is a 503, not the caller's fault.

    Wrong credentials are throttled per client address (``failures``: a bucket per
    address, from ``server.auth_failures_per_minute``): once an address has used it up,
    every request of it that carries credentials gets 429 with ``Retry-After`` *before*
    they are checked (a right guess must not show through), and the log says so once per
    episode.
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        public_paths: Collection[str] = ("/health",),
        failures: TokenBucket | None = None,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.public_paths = frozenset(public_paths)
        self.failures = failures or failure_bucket(20)
        self._throttled: dict[str, int] = {}  # address -> requests refused this episode

    def _throttle(self, address: str) -> float:
        wait = self.failures.wait(address)
        if wait <= 0:
            if self._throttled.pop(address, 0):
                log.info("failed-authentication throttle for %s lifted", address)
            return 0.0
        if address not in self._throttled:
            self._throttled[address] = 0
            log.warning(
                "throttling authentication from %s: more than %d wrong credentials in a "
                "minute (server.auth_failures_per_minute)",
                address,
                int(self.failures.burst),
            )
            while len(self._throttled) > self.failures.max_keys:
                self._throttled.pop(next(iter(self._throttled)))
        self._throttled[address] += 1
        return wait

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or not self.authenticator.enabled
            or scope["path"] in self.public_paths
        ):
            await self.app(scope, receive, send)
            return
        address = client_ip(scope)
        authorization = Headers(scope=scope).get("authorization")
        if authorization:
            wait = self._throttle(address)
            if wait > 0:
                response = _too_many(wait, "too many failed authentication attempts")
                await refuse(scope, receive, send, response)
                return
        try:
            if self.authenticator.may_block:  # the provider's keys may need fetching
                identity = await anyio.to_thread.run_sync(
                    self.authenticator.identify, authorization
                )
            else:
                identity = self.authenticator.identify(authorization)
        except AuthError as exc:
            error = None
            if str(exc) != "missing bearer token":
                error = "invalid_token"
                self.failures.take(address)
            challenge = self.authenticator.challenge(error)
            response = error_response(401, str(exc), {"WWW-Authenticate": challenge})
            await refuse(scope, receive, send, response)
            return
        except IdentityProviderError as exc:  # not the caller's fault: no throttling
            log.warning("cannot check an OpenID token: %s", exc)
            response = error_response(
                503, "the identity provider cannot be reached; retry later", {"Retry-After": "5"}
            )
            await refuse(scope, receive, send, response)
            return
        scope[IDENTITY_SCOPE_KEY] = identity.key
        scope[PRINCIPAL_SCOPE_KEY] = identity
        await self.app(scope, receive, send)


# -- Host header (DNS rebinding) ---------------------------------------------------------
def _host_allowed(host: str, allowed: Iterable[str]) -> bool:
    host = host.lower()
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*":  # server.allowed_hosts: ["*"], the check turned off
            return True
        if host == pattern or (pattern.endswith(":*") and host.startswith(pattern[:-1])):
            return True
    return False


class AllowedHostsMiddleware:
    """Answers 421 when the ``Host`` header is not one of ``allowed_hosts``.

    A DNS-rebinding page reaches a localhost server under the attacker's host name; the
    MCP SDK refuses such requests on its routes, and this does the same for the plain
    routes (``/download`` would otherwise hand documents to any web page). Patterns are
    ``host:port`` or ``host:*`` (any port), compared case-insensitively.
    """

    def __init__(
        self, app: ASGIApp, allowed_hosts: Sequence[str], exempt_paths: Collection[str] = ()
    ) -> None:
        self.app = app
        self.allowed_hosts = tuple(allowed_hosts)
        self.exempt_paths = frozenset(exempt_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if not _host_allowed(host, self.allowed_hosts):
            log.warning("refused a request for host %r (not an allowed host)", host[:100])
            await refuse(scope, receive, send, error_response(421, "invalid Host header"))
            return
        await self.app(scope, receive, send)


# -- CORS --------------------------------------------------------------------------------
#: Request headers a browser client of the MCP endpoint and the plain routes may send.
CORS_ALLOW_HEADERS: Final = (
    "Authorization",
    "Content-Type",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
)
#: Response headers a browser script may read.
CORS_EXPOSE_HEADERS: Final = ("Mcp-Session-Id", "WWW-Authenticate", "Retry-After")


def cors_middleware(origins: Sequence[str], *, auth_enabled: bool) -> Middleware:
    """Starlette's CORS middleware for exactly ``origins``.

    Preflights from other origins get 400 with no ``Access-Control-Allow-Origin``. No
    credentials mode: clients authenticate with a Bearer header, not cookies.

    Raises:
        ConfigError: ``*`` is listed while auth is on (settings validation already
            refuses it; this guards callers that build settings by hand).
    """
    if auth_enabled and "*" in origins:
        raise ConfigError(
            "server.cors_origins: '*' is not allowed when server.auth_token or "
            "server.jwt_secret is set (list the origins)"
        )
    return Middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=list(CORS_ALLOW_HEADERS),
        expose_headers=list(CORS_EXPOSE_HEADERS),
        allow_credentials=False,
        max_age=600,
    )


# -- errors ------------------------------------------------------------------------------
class SanitizedErrorsMiddleware:
    """Any exception becomes a 500 ``{"error": "internal error"}``; the traceback goes to
    the log (stderr), never to the client, so no internal path leaks.

    Two endings are not errors and log one line, no traceback: a client that disconnects
    before its body is read, and a request cancelled by the server's shutdown (after the
    drain): it gets a JSON 503 if nothing was sent yet, and a started stream (SSE) is
    ended cleanly.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = finished = False

        async def watching_send(message: Message) -> None:
            nonlocal started, finished
            if finished:
                # A late answer after a completed one: the SDK's SSE endpoint returns an
                # empty response once its stream has ended (at shutdown, say).
                return
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        where = f"{scope.get('method')} {str(scope.get('path'))[:200]}"
        try:
            await self.app(scope, receive, watching_send)
        except ClientDisconnect:
            log.info("client disconnected during %s", where)
        except anyio.get_cancelled_exc_class():
            # uvicorn cancels what still runs once the shutdown's grace is over.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                if not started:
                    log.info("shutting down: %s cancelled", where)
                    await error_response(503, "the server is shutting down; retry later")(
                        scope, receive, send
                    )
                elif not finished:
                    log.info("shutting down: closed the stream of %s", where)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception as exc:
            if is_disk_full(exc):  # not a bug: one line, and HTTP's "insufficient storage"
                log.warning("%s failed: the disk is full (%s)", where, exc)
                if not started:
                    await error_response(507, f"the server's disk is full; {DISK_FULL_HINT}")(
                        scope, receive, send
                    )
                return
            log.exception("unhandled error on %s", where)
            if not started:
                await error_response(500, "internal error")(scope, receive, send)
            # else: the response is half sent; the server closes the connection.


# -- paths given by clients --------------------------------------------------------------
_DRIVE_PREFIX_LEN: Final = 2


def safe_relative_path(raw: str) -> str:
    """A client-given relative file path, NFC-normalised, or :class:`UnsafePathError`.

    Refused: empty; absolute (``/x``, ``C:x``); backslashes; NUL and other control
    characters; ``.``, ``..`` and empty segments; hidden segments (``.git``, never
    indexed); anything still percent-encoded after the one decoding the server did
    (double encoding such as ``%252e%252e``); Unicode look-alikes that compatibility
    normalisation (NFKC) turns into ``/``, ``\\`` or ``.`` (``／``, ``．．``, ``․``).

    Raises:
        UnsafePathError: the message says what is wrong, without echoing the path.
    """
    if not raw or len(raw) > 4096:
        raise UnsafePathError("empty or overlong path")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in raw):
        raise UnsafePathError("control characters in path")
    if unquote(raw) != raw:
        raise UnsafePathError("percent-encoded characters in path")
    path = unicodedata.normalize("NFC", raw)
    folded = unicodedata.normalize("NFKC", path)
    for c in ("/", "\\", "."):
        if folded.count(c) != path.count(c):
            raise UnsafePathError("look-alike characters in path")
    if "\\" in path:
        raise UnsafePathError("backslash in path")
    if path.startswith("/") or (len(path) >= _DRIVE_PREFIX_LEN and path[1] == ":"):
        raise UnsafePathError("absolute path")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise UnsafePathError("empty, '.' or '..' segment in path")
        if segment.startswith("."):
            raise UnsafePathError("hidden file or folder in path")
    return path


def resolve_inside(
    root: Path, relative: str, *, extensions: Collection[str], exclude: Sequence[str] = ()
) -> Path:
    """The regular file ``root/relative`` (from :func:`safe_relative_path`), resolved.

    It must exist, resolve (symlinks followed) to a regular file inside ``root``'s real
    folder, have one of ``extensions`` (lowercase, with the dot) and match none of the
    ``exclude`` globs. Blocking: it touches the file system.

    Raises:
        UnsafePathError: any of these fails (one generic message: which check failed is
            not told to clients).
    """
    not_found = UnsafePathError("no such file")
    if Path(relative).suffix.lower() not in extensions:
        raise not_found
    if any(fnmatch.fnmatch(relative, p) for p in exclude):
        raise not_found
    try:
        base = root.resolve(strict=True)
        target = (base / relative).resolve(strict=True)
        mode = os.stat(target).st_mode
    except (OSError, RuntimeError, ValueError):
        raise not_found from None
    if not target.is_relative_to(base) or target == base or not stat.S_ISREG(mode):
        raise not_found
    if target.suffix.lower() not in extensions:  # a symlink to another type of file
        raise not_found
    return target
