"""The server as an OAuth protected resource (MCP authorization, 2025-06-18 and later):
its Protected Resource Metadata (RFC 9728), which names the authorization server(s) an MCP
client gets tokens from, and the URL a 401's ``WWW-Authenticate`` points clients to.

Served only while ``server.oidc.issuer`` is set, without auth (a client reads it before it
has a token), at ``/.well-known/oauth-protected-resource`` and at the same path followed by
the resource's own path (``…/oauth-protected-resource/mcp``), where RFC 9728 §3.1 puts it.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from guaipeca.config import OidcSettings

__all__ = ["METADATA_PATH", "ProtectedResource"]

#: Where RFC 9728 puts a protected resource's metadata (before the resource's path).
METADATA_PATH: Final = "/.well-known/oauth-protected-resource"


class ProtectedResource:
    """The metadata document, its routes and its URL, from ``server.oidc``."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings

    @property
    def enabled(self) -> bool:
        return self.settings.issuer is not None and self.settings.resource is not None

    def _resource_path(self) -> str:
        return urlsplit(str(self.settings.resource)).path.rstrip("/")

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths the document is served at (none while off)."""
        if not self.enabled:
            return ()
        own = self._resource_path()
        return (METADATA_PATH, METADATA_PATH + own) if own else (METADATA_PATH,)

    @property
    def metadata_url(self) -> str | None:
        """The document's URL as clients reach the server (None while off)."""
        if not self.enabled:
            return None
        parts = urlsplit(str(self.settings.resource))
        return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{self._resource_path()}"

    def document(self) -> dict[str, Any]:
        """The metadata (RFC 9728 §2): the resource, its authorization servers and the
        scopes clients should ask for (MCP clients request these)."""
        document: dict[str, Any] = {
            "resource": self.settings.resource,
            "authorization_servers": self.settings.named_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "Guaipeca",
        }
        if self.settings.scopes:
            document["scopes_supported"] = list(self.settings.scopes)
        return document

    async def _serve(self, request: Request) -> Response:
        return JSONResponse(self.document(), headers={"Cache-Control": "max-age=300"})

    def routes(self) -> list[BaseRoute]:
        """``GET`` routes serving the document at :attr:`paths`."""
        return [Route(path, endpoint=self._serve, methods=["GET"]) for path in self.paths]
