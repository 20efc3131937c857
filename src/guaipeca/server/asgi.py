"""ASGI basics the HTTP middlewares share: the one shape of a refusal, and who is calling.

Every refusal is JSON ``{"error": "..."}`` and names no internal path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from guaipeca.errors import WriteQueueFullError

__all__ = [
    "IDENTITY_SCOPE_KEY",
    "PRINCIPAL_SCOPE_KEY",
    "Identity",
    "IdentitySource",
    "caller_of",
    "client_ip",
    "error_response",
    "identity_of",
    "principal_of",
    "queue_full_response",
    "refuse",
]

#: Where the auth middleware leaves the caller's identity in the ASGI scope.
IDENTITY_SCOPE_KEY: Final = "guaipeca.identity"
#: Where it leaves the whole :class:`Identity` (the key above is its ``key``).
PRINCIPAL_SCOPE_KEY: Final = "guaipeca.principal"

IdentitySource = Literal["token", "jwt", "oidc"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request is, as the auth middleware proved it (§7.4, access §7.6).

    ``key`` is the stable string that rate limits, MCP session owners, write queues and
    the audit log count against (``token:<name or hash>``, ``jwt:<sub>``,
    ``oidc:<sub>``). ``subject`` is the JWT ``sub`` or the named token's name.
    ``claims`` holds the values of the configured group, role and scope claims, keyed
    ``"group"``, ``"role"`` and ``"scope"``: what access grants match on.
    """

    key: str
    source: IdentitySource
    subject: str | None = None
    claims: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def has(self, kind: str, value: str) -> bool:
        """True when the claim ``kind`` (group, role or scope) includes ``value``."""
        return value in self.claims.get(kind, frozenset())


def error_response(
    status_code: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The one shape of every refusal: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status_code, headers=headers)


def queue_full_response(exc: WriteQueueFullError) -> JSONResponse:
    """The one answer to a write refused for a full write queue, on every HTTP route:
    429 with ``Retry-After``."""
    return error_response(429, str(exc), {"Retry-After": str(exc.retry_after)})


def identity_of(scope: Scope) -> str | None:
    """The identity the auth middleware found for this request (None without auth)."""
    value = scope.get(IDENTITY_SCOPE_KEY)
    return value if isinstance(value, str) else None


def principal_of(scope: Scope) -> Identity | None:
    """The whole identity the auth middleware proved (None without auth)."""
    value = scope.get(PRINCIPAL_SCOPE_KEY)
    return value if isinstance(value, Identity) else None


async def refuse(scope: Scope, receive: Receive, send: Send, response: JSONResponse) -> None:
    """Send a refusal: the response over HTTP; a policy-violation close to a WebSocket
    (none is served today, but a middleware must not let one slip past)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
    else:
        await response(scope, receive, send)


def client_ip(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def caller_of(scope: Scope) -> str:
    """Who a request counts against: its identity, else ``ip:<client address>``."""
    return identity_of(scope) or f"ip:{client_ip(scope)}"
