"""The official MCP SDK client pinned to one protocol version (shared by the server tests).

How the SDK client (``mcp`` 2.3) picks a version: ``Client(mode="auto")``, the default,
probes ``server/discover`` and adopts the newest modern version (2026-07-28) or falls back
to the ``initialize`` handshake; ``mode="2026-07-28"`` adopts that version with no probe;
``mode="legacy"`` runs the handshake, offering its newest handshake version (2025-11-25).
It has no switch for an older handshake version, so :func:`pinned_session` runs the
handshake's two steps itself (what ``ClientSession.initialize`` does) with the version
asked for, through the same public session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import mcp_types as types
from mcp.client import Client, ClientSession, Transport
from mcp.types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

#: The versions the server is held to answer, newest first.
PROTOCOL_VERSIONS: Final = ("2026-07-28", "2025-11-25", "2025-06-18")


@asynccontextmanager
async def pinned_session(transport: Transport, version: str) -> AsyncIterator[ClientSession]:
    """An SDK client session over ``transport`` speaking exactly ``version``.

    Raises:
        AssertionError: the server answered the handshake with another version.
    """
    if version in MODERN_PROTOCOL_VERSIONS or version == LATEST_HANDSHAKE_VERSION:
        mode = "legacy" if version == LATEST_HANDSHAKE_VERSION else version
        async with Client(transport, mode=mode) as client:
            assert client.protocol_version == version
            yield client.session
        return
    async with transport as (read, write), ClientSession(read, write) as session:
        offer = types.InitializeRequestParams(
            protocol_version=version,
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="guaipeca-tests", version="1"),
        )
        result = await session.send_request(
            types.InitializeRequest(params=offer), types.InitializeResult
        )
        assert result.protocol_version == version, result.protocol_version
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())
        yield session


def tool_data(result: types.CallToolResult) -> dict[str, Any]:
    """A tool result's structured content; its text content carries the same JSON, for
    clients that read only text."""
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    return result.structured_content


def tool_error(result: types.CallToolResult) -> str:
    """A failed tool call's message: one line, no traceback, no structured content."""
    assert result.is_error
    assert result.structured_content is None
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    assert "\n" not in block.text and "Traceback" not in block.text
    return block.text
