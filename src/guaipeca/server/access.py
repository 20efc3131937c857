"""Who may read and write which corpora: the ``access:`` grants turned into the rights of
one caller, and the middleware that leaves them where the tools run.

:class:`AccessPolicy` maps an :class:`~guaipeca.server.asgi.Identity` to its
:class:`Rights` (the corpora it reads and writes). :class:`AccessMiddleware` computes them
once per HTTP request and sets :data:`rights` (and the audit's door) in the request's
context: an MCP session runs its tool calls in the context of the request that opened it,
and the web API calls tools in its own, so every tool sees its caller's rights. Over stdio
(one local agent) nothing sets them: full rights. The checks themselves are made in one
place below every door, the service (server/guard.py).
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.config import ALL_CORPORA, AccessGrant, Who
from guaipeca.server.asgi import Identity, caller_of, principal_of
from guaipeca.server.audit import AuditLog, door

__all__ = [
    "FULL",
    "AccessMiddleware",
    "AccessPolicy",
    "AuditRefusals",
    "Rights",
    "current_rights",
    "rights",
]


@dataclass(frozen=True, slots=True)
class Rights:
    """The corpora a caller reads and writes (None: every corpus)."""

    read: frozenset[str] | None
    write: frozenset[str] | None

    @property
    def limited(self) -> bool:
        return self.read is not None or self.write is not None

    def may_read(self, corpus: str) -> bool:
        return self.read is None or corpus in self.read

    def may_write(self, corpus: str) -> bool:
        return self.write is None or corpus in self.write


#: Every corpus, read and write: no ``access:`` section, or a call over stdio.
FULL: Final = Rights(None, None)
#: The current caller's rights, set per HTTP request by :class:`AccessMiddleware`.
rights: contextvars.ContextVar[Rights] = contextvars.ContextVar("guaipeca_rights", default=FULL)


def current_rights() -> Rights:
    return rights.get()


def _matches(who: Who, identity: Identity | None) -> bool:
    kind, value = who.kind, who.value
    if kind == "anyone":
        return True
    if identity is None:
        return False
    if kind == "token":
        return identity.source == "token" and identity.subject == value
    if kind == "subject":
        return identity.source != "token" and identity.subject == value
    return identity.has(kind, value)


class AccessPolicy:
    """The grants of the ``access:`` section; without one (None), everyone has
    :data:`FULL` rights, as before grants existed."""

    def __init__(self, grants: Sequence[AccessGrant] | None) -> None:
        self.grants = None if grants is None else tuple(grants)

    @property
    def enabled(self) -> bool:
        return self.grants is not None

    def rights_of(self, identity: Identity | None) -> Rights:
        """What ``identity`` (None: a caller without credentials) may read and write: the
        union of the grants that name it. ``write`` includes read."""
        if self.grants is None:
            return FULL
        read: set[str] = set()
        write: set[str] = set()
        read_all = write_all = False
        for grant in self.grants:
            if not _matches(grant.who, identity):
                continue
            every = ALL_CORPORA in grant.corpora
            read_all |= every
            read.update(grant.corpora)
            if "write" in grant.can:
                write_all |= every
                write.update(grant.corpora)
        return Rights(
            None if read_all else frozenset(read), None if write_all else frozenset(write)
        )


class AccessMiddleware:
    """Sets :data:`rights` (from ``policy`` and the identity the auth middleware proved,
    its group, role and scope claims included) and the audit's door for the rest of the
    request."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            door.set(f"{scope['method']} {scope['path']}"[:200])
            rights.set(self.policy.rights_of(principal_of(scope)))
        await self.app(scope, receive, send)


class AuditRefusals:
    """Writes each 401 (missing or wrong credentials) to the audit log, with the client's
    address as the identity; the auth middleware's throttle bounds how many one address
    can cause. Placed outside the auth middleware, which answers them."""

    def __init__(self, app: ASGIApp, audit: AuditLog) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.audit.path is None:
            await self.app(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                where = f"{scope['method']} {scope['path']}"[:200]
                self.audit.record(caller_of(scope), "denied", None, "HTTP 401", where=where)
            await send(message)

        await self.app(scope, receive, watch)
