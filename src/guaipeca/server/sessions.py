"""A budget of MCP sessions per identity (issue 29, item 3), around the SDK's Streamable
HTTP app (``/mcp``), which it wraps without changing.

- Opening a session (a ``POST`` without ``Mcp-Session-Id``: ``initialize``) takes a token
  from the caller's rate-limit bucket.
- One identity holds at most ``per_identity`` sessions, and the last tenth of ``total`` is
  kept for identities that hold none, so no identity can take the last free sessions.
  When an identity is at its budget, its session idle longest closes to make room; when
  none of them is idle, the answer is 429.
- A refused opening request (4xx, 5xx) names no session: the SDK has discarded the one it
  made, so its id is taken out of the answer.
- Sessions idle ``idle_seconds`` expire (the SDK's own idle timeout, set to the same value,
  ends them; the budget forgets them at the same time).

A session is closed the way a client closes it, with a ``DELETE`` (sent to the SDK's app
directly), so the SDK's bookkeeping stays its own.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.server.asgi import caller_of
from guaipeca.server.limits import TokenBucket, reserved_share, too_many_requests

__all__ = ["SessionBudget", "rpc_refusal"]

log = logging.getLogger("guaipeca.server")

_SESSION_HEADER: Final = "mcp-session-id"
#: Headers of the opening request a closing DELETE repeats (the SDK checks Host and Origin).
_KEPT_HEADERS: Final = (b"host", b"origin", b"mcp-protocol-version")


def rpc_refusal(status: int, message: str, wait: float | None = None) -> JSONResponse:
    """A JSON-RPC error with no id (what MCP clients read on ``/mcp``), with
    ``Retry-After`` (whole seconds, at least 1) when ``wait`` is given."""
    headers = {"Retry-After": str(max(1, math.ceil(wait)))} if wait is not None else None
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def _without_session(message: Message) -> list[tuple[bytes, bytes]]:
    """The response headers of ``message`` without ``Mcp-Session-Id``."""
    name = _SESSION_HEADER.encode()
    return [(k, v) for k, v in message.get("headers", []) if k.lower() != name]


@dataclass
class _Session:
    owner: str
    scope: dict[str, Any]  # the opening request's, to close the session with
    last_used: float
    active: int = 0  # requests in flight (an open GET stream included)


class SessionBudget:
    """The SDK's ``/mcp`` app ``app`` with sessions budgeted per identity (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        bucket: TokenBucket,
        *,
        total: int,
        per_identity: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.bucket = bucket
        self.total = total
        self.per_identity = min(per_identity, total)
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.sessions: dict[str, _Session] = {}
        self._opening: Counter[str] = Counter()  # opening requests in flight, per identity
        self.closed_for_room = 0  # idle sessions closed to make room (for tests and logs)

    def held(self, owner: str) -> int:
        """Sessions ``owner`` holds now (being opened included)."""
        return self._opening[owner] + sum(1 for s in self.sessions.values() if s.owner == owner)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sid = Headers(scope=scope).get(_SESSION_HEADER)
        if sid is None and scope["method"] == "POST":
            await self._open(scope, receive, send)
            return
        session = self.sessions.get(sid) if sid is not None else None
        if session is None or sid is None:
            await self.app(scope, receive, send)
            return
        await self._use(sid, session, scope, receive, send)

    async def _use(
        self, sid: str, session: _Session, scope: Scope, receive: Receive, send: Send
    ) -> None:
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        session.active += 1
        try:
            await self.app(scope, receive, watch)
        finally:
            session.active -= 1
            session.last_used = self.clock()
        # Ended by its owner (another identity's request gets 404 and changes nothing).
        ended = status and ((scope["method"] == "DELETE" and status[0] < 300) or status[0] == 404)
        if ended and caller_of(scope) == session.owner:
            self.sessions.pop(sid, None)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = caller_of(scope)
        wait = self.bucket.take(owner)
        if wait > 0:
            await rpc_refusal(429, too_many_requests(wait), wait)(scope, receive, send)
            return
        self._expire()
        problem = await self._make_room(owner)
        if problem is not None:
            log.warning("refused a new MCP session for %s: %s", owner, problem)
            await rpc_refusal(429, problem, self.idle_seconds)(scope, receive, send)
            return
        opened: list[tuple[int, str | None]] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                sid = Headers(raw=message.get("headers", [])).get(_SESSION_HEADER)
                opened.append((int(message["status"]), sid))
                if int(message["status"]) >= 400:
                    # The SDK discards a session whose opening request it refused (a 406
                    # for Accept, say) yet names it in the answer: a refusal names none.
                    message = {**message, "headers": _without_session(message)}
            await send(message)

        self._opening[owner] += 1
        try:
            await self.app(scope, receive, watch)
        finally:
            self._opening[owner] -= 1
            if self._opening[owner] <= 0:
                del self._opening[owner]
        if opened and opened[0][0] < 400 and opened[0][1] is not None:
            self.sessions[opened[0][1]] = _Session(owner, dict(scope), self.clock())

    def _expire(self) -> None:
        """Forget the sessions idle past ``idle_seconds`` (the SDK has ended them)."""
        now = self.clock()
        for sid, s in list(self.sessions.items()):
            if s.active == 0 and now - s.last_used >= self.idle_seconds:
                del self.sessions[sid]

    async def _make_room(self, owner: str) -> str | None:
        """Room for one more session of ``owner`` (closing its session idle longest when
        it is at its budget), or why there is none."""
        held = self.held(owner)
        open_now = len(self.sessions) + sum(self._opening.values())
        at_budget = held >= self.per_identity
        # The last free sessions are kept for identities that hold none.
        in_reserve = held > 0 and open_now >= self.total - reserved_share(self.total)
        if not (at_budget or in_reserve):
            return None
        idle = [(s.last_used, sid) for sid, s in self.sessions.items() if s.owner == owner]
        idle = sorted(item for item in idle if self.sessions[item[1]].active == 0)
        if idle:
            await self._close(idle[0][1])
            self.closed_for_room += 1
            return None
        if at_budget:
            return (
                f"too many open MCP sessions for this caller ({held}, "
                f"server.max_sessions_per_identity = {self.per_identity}), none of them idle; "
                "end one (DELETE /mcp) or retry later"
            )
        return (
            f"the server's last free MCP sessions (server.max_sessions = {self.total}) are "
            "kept for other callers; end one of yours (DELETE /mcp) or retry later"
        )

    async def _close(self, sid: str) -> None:
        """End session ``sid`` as its client would: a DELETE with its owner's scope."""
        session = self.sessions.pop(sid)
        kept = [(k, v) for k, v in session.scope.get("headers", []) if k in _KEPT_HEADERS]
        scope = {
            **session.scope,
            "method": "DELETE",
            "headers": [*kept, (_SESSION_HEADER.encode(), sid.encode())],
            "query_string": b"",
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        await self.app(scope, receive, discard)
        log.info("closed an idle MCP session of %s to make room for a new one", session.owner)
