"""Seeing who the server thinks a caller is: the real MCP server plus a ``whoami`` tool that
reports the identity the auth middleware left in the request's scope, and an MCP client
that calls it over Streamable HTTP."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request

from guaipeca.server import Service, build_server
from guaipeca.server.asgi import principal_of


def whoami_server(service: Service) -> MCPServer:
    """Guaipeca's MCP server with one more tool, ``whoami``: the caller's identity."""
    server = build_server(service)

    @server.tool()
    def whoami(ctx: Context) -> dict[str, Any]:
        request = ctx.request_context.request
        assert isinstance(request, Request)
        identity = principal_of(request.scope)
        if identity is None:
            return {"key": None}
        return {
            "key": identity.key,
            "source": identity.source,
            "subject": identity.subject,
            "claims": {kind: sorted(values) for kind, values in identity.claims.items()},
        }

    return server


async def call_whoami(url: str, http_client: httpx2.AsyncClient) -> dict[str, Any]:
    """``whoami`` over Streamable HTTP at ``url`` (…/mcp), through ``http_client``."""
    async with Client(streamable_http_client(url, http_client=http_client), mode="legacy") as mcp:
        result = await mcp.call_tool("whoami", {})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return dict(result.structured_content)


def whoami(url: str, token: str) -> dict[str, Any]:
    """``whoami`` over Streamable HTTP at ``url`` with ``Authorization: Bearer token``."""

    async def main() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            return await call_whoami(url, client)

    return anyio.run(main)
