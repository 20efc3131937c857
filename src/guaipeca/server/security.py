"""HTTP security pieces, each a small pure-ASGI middleware or helper (§7.4).

- :class:`Authenticator` and :class:`AuthMiddleware`: a Bearer token compared in constant
  time and/or an HS256 JWT (as OpenWebUI sends it) on every route but the public ones.
- :class:`AllowedHostsMiddleware`: DNS-rebinding protection for the plain HTTP routes (the
  MCP SDK checks its own routes the same way).
- :func:`cors_middleware`: only the configured origins, never ``*`` while auth is on.
- :class:`TokenBucket` and :class:`RateLimitMiddleware`: per identity (or client IP).
- :class:`BodyLimitMiddleware`: ``Content-Length`` checked before reading, streamed bodies
  counted and cut off at the limit.
- :class:`SanitizedErrorsMiddleware`: any exception becomes ``{"error": "internal error"}``.
- :func:`safe_relative_path` and :func:`resolve_inside`: user-given file paths that cannot
  leave a corpus folder.
- :class:`SearchGate`: a cap on concurrent searches and a deadline per search.

Every refusal is JSON ``{"error": "..."}`` and names no internal path.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import logging
import math
import os
import stat
import threading
import time
import unicodedata
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Final, TypeVar, TypeVarTuple
from urllib.parse import unquote

import anyio
import anyio.from_thread
import anyio.to_thread
import jwt
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.config import LoadedSettings, ServerSettings, Settings
from guaipeca.errors import (
    AuthError,
    ConfigError,
    SearchBusyError,
    SearchTimeoutError,
    UnsafePathError,
)

__all__ = [
    "IDENTITY_SCOPE_KEY",
    "AllowedHostsMiddleware",
    "AuthError",
    "AuthMiddleware",
    "Authenticator",
    "BodyLimitMiddleware",
    "RateLimitMiddleware",
    "SanitizedErrorsMiddleware",
    "SearchBusyError",
    "SearchGate",
    "SearchTimeoutError",
    "TokenBucket",
    "UnsafePathError",
    "cors_middleware",
    "error_response",
    "identity_of",
    "resolve_inside",
    "safe_relative_path",
    "search_gate",
]

log = logging.getLogger("guaipeca.server")

#: Where :class:`AuthMiddleware` leaves the caller's identity in the ASGI scope.
IDENTITY_SCOPE_KEY: Final = "guaipeca.identity"
#: HS256 keys shorter than this are weak (RFC 7518 §3.2); PyJWT warns on every decode.
_MIN_HMAC_KEY_BYTES: Final = 32
_MAX_IDENTITY_CHARS: Final = 128

T = TypeVar("T")
PosArgsT = TypeVarTuple("PosArgsT")


def error_response(
    status_code: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The one shape of every refusal: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status_code, headers=headers)


def identity_of(scope: Scope) -> str | None:
    """The identity :class:`AuthMiddleware` found for this request (None without auth)."""
    value = scope.get(IDENTITY_SCOPE_KEY)
    return value if isinstance(value, str) else None


async def _refuse(scope: Scope, receive: Receive, send: Send, response: JSONResponse) -> None:
    """Send a refusal: the response over HTTP; a policy-violation close to a WebSocket
    (none is served today, but a middleware must not let one slip past)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
    else:
        await response(scope, receive, send)


def _client_ip(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


# -- authentication ----------------------------------------------------------------------
class Authenticator:
    """Checks ``Authorization: Bearer <credential>`` against a static token and/or JWTs.

    The static token is compared in constant time (:func:`hmac.compare_digest`). A JWT
    must be HS256 and signed with ``jwt_secret``; ``exp``/``nbf``/``iat`` are enforced when
    present (OpenWebUI issues tokens without ``exp`` unless told to). Any other algorithm,
    ``none`` included, is refused.

    The identity is ``token:<first 16 hex of SHA-256>`` for the static token and
    ``jwt:<sub or id>`` for a JWT (``jwt:#<hash>`` when it names no subject).
    """

    def __init__(self, token: str | None = None, jwt_secret: str | None = None) -> None:
        self._token = token.encode("utf-8") if token else None
        self._jwt_secret = jwt_secret.encode("utf-8") if jwt_secret else None
        self._short_secret = (
            self._jwt_secret is not None and len(self._jwt_secret) < _MIN_HMAC_KEY_BYTES
        )
        if self._short_secret:
            log.warning(
                "server.jwt_secret is shorter than %d bytes: such JWTs are easy to forge; "
                "use a longer secret",
                _MIN_HMAC_KEY_BYTES,
            )

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> Authenticator:
        token = settings.auth_token.get_secret_value() if settings.auth_token else None
        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        return cls(token, secret)

    @property
    def enabled(self) -> bool:
        """False when neither a token nor a JWT secret is configured: no auth at all."""
        return self._token is not None or self._jwt_secret is not None

    def authenticate(self, authorization: str | None) -> str:
        """The caller's identity from an ``Authorization`` header value.

        Raises:
            AuthError: no Bearer credential, or one that matches neither the token nor a
                valid JWT.
        """
        if not authorization:
            raise AuthError("missing bearer token")
        scheme, _, credential = authorization.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise AuthError("missing bearer token")
        raw = credential.encode("utf-8", "surrogateescape")
        if self._token is not None and hmac.compare_digest(raw, self._token):
            return f"token:{hashlib.sha256(raw).hexdigest()[:16]}"
        if self._jwt_secret is not None and credential.count(".") == 2:
            return self._jwt_identity(credential, raw)
        raise AuthError("invalid token")

    def _jwt_identity(self, credential: str, raw: bytes) -> str:
        assert self._jwt_secret is not None
        try:
            if self._short_secret:  # logged once at start-up, not on every request
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
                    claims = jwt.decode(credential, self._jwt_secret, algorithms=["HS256"])
            else:
                claims = jwt.decode(credential, self._jwt_secret, algorithms=["HS256"])
        except jwt.ExpiredSignatureError:
            raise AuthError("token expired") from None
        except jwt.PyJWTError:
            raise AuthError("invalid token") from None
        subject = claims.get("sub", claims.get("id"))
        if isinstance(subject, str | int) and not isinstance(subject, bool) and str(subject):
            return f"jwt:{str(subject)[:_MAX_IDENTITY_CHARS]}"
        return f"jwt:#{hashlib.sha256(raw).hexdigest()[:16]}"


class AuthMiddleware:
    """Refuses requests without valid credentials (401, ``WWW-Authenticate: Bearer``).

    ``public_paths`` (exact paths, e.g. ``/health``) pass without credentials. With auth
    off (:attr:`Authenticator.enabled` false) every request passes. The identity is left
    in the scope under :data:`IDENTITY_SCOPE_KEY`.
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        public_paths: Collection[str] = ("/health",),
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.public_paths = frozenset(public_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or not self.authenticator.enabled
            or scope["path"] in self.public_paths
        ):
            await self.app(scope, receive, send)
            return
        try:
            identity = self.authenticator.authenticate(Headers(scope=scope).get("authorization"))
        except AuthError as exc:
            challenge = 'Bearer realm="guaipeca"'
            if str(exc) != "missing bearer token":
                challenge += ', error="invalid_token"'
            response = error_response(401, str(exc), {"WWW-Authenticate": challenge})
            await _refuse(scope, receive, send, response)
            return
        scope[IDENTITY_SCOPE_KEY] = identity
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
            await _refuse(scope, receive, send, error_response(421, "invalid Host header"))
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


class RateLimitMiddleware:
    """429 with ``Retry-After`` (whole seconds, at least 1) once a caller's bucket is empty.

    The caller is the identity :class:`AuthMiddleware` found, else the client IP.
    """

    def __init__(
        self, app: ASGIApp, bucket: TokenBucket, exempt_paths: Collection[str] = ("/health",)
    ) -> None:
        self.app = app
        self.bucket = bucket
        self.exempt_paths = frozenset(exempt_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        key = identity_of(scope) or f"ip:{_client_ip(scope)}"
        wait = self.bucket.take(key)
        if wait > 0:
            retry = max(1, math.ceil(wait))
            response = error_response(
                429,
                f"too many requests; retry in {retry} s",
                {"Retry-After": str(retry)},
            )
            await _refuse(scope, receive, send, response)
            return
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


# -- errors ------------------------------------------------------------------------------
class SanitizedErrorsMiddleware:
    """Any exception becomes a 500 ``{"error": "internal error"}``; the traceback goes to
    the log (stderr), never to the client, so no internal path leaks."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
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


# -- searches: concurrency cap and deadline ----------------------------------------------
class SearchGate:
    """At most ``max_concurrent`` searches at once, each with a deadline.

    :meth:`run` waits up to ``timeout`` seconds for a free slot (else
    :class:`SearchBusyError`), then runs the blocking ``fn`` in a worker thread so the
    event loop never blocks, for up to ``timeout`` seconds (else
    :class:`SearchTimeoutError`). A search that overruns is abandoned, not killed (Python
    threads cannot be): it keeps its slot until its thread really ends, so the cap holds
    for the CPU, not only for the callers.
    """

    def __init__(self, max_concurrent: int, timeout: float) -> None:
        if max_concurrent < 1 or not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("max_concurrent must be >= 1 and timeout > 0")
        self.max_concurrent = max_concurrent
        self.timeout = float(timeout)
        self._limiter = anyio.CapacityLimiter(max_concurrent)

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
        holder = object()
        try:
            with anyio.fail_after(self.timeout):
                await self._limiter.acquire_on_behalf_of(holder)
        except TimeoutError:
            raise SearchBusyError(
                f"the server is busy: {self.running} searches are running; retry in a moment"
            ) from None

        # Who gives the slot back: the worker thread when it ran `fn` (even after the
        # caller gave up on it), else this task (the thread never started).
        lock = threading.Lock()
        state = ["pending"]

        def release_from_thread() -> None:
            try:
                anyio.from_thread.run_sync(self._limiter.release_on_behalf_of, holder)
            except Exception:  # the event loop is gone (shutting down): nothing to free
                log.debug("search slot not released: event loop closed", exc_info=True)

        def work() -> T:
            with lock:
                if state[0] == "abandoned":  # the caller left first; nobody waits
                    raise RuntimeError("search abandoned before it started")
                state[0] = "running"
            try:
                return fn(*args)
            finally:
                release_from_thread()

        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except TimeoutError:
            raise SearchTimeoutError(
                f"search took longer than {self.timeout:g} s; "
                "retry with a narrower query or smaller top_k"
            ) from None
        finally:
            with lock:
                never_started = state[0] == "pending"
                state[0] = "abandoned" if never_started else state[0]
            if never_started:
                self._limiter.release_on_behalf_of(holder)


def search_gate(settings: ServerSettings | Settings | LoadedSettings) -> SearchGate:
    """A :class:`SearchGate` from ``server.max_concurrent_searches`` and
    ``server.search_timeout_seconds``."""
    if isinstance(settings, LoadedSettings):
        settings = settings.settings
    if isinstance(settings, Settings):
        settings = settings.server
    return SearchGate(settings.max_concurrent_searches, settings.search_timeout_seconds)
