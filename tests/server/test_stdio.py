"""The MCP server over a real stdio pipe: a subprocess serves a real index, and nothing but
JSON-RPC may reach its stdout (logs go to stderr)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

SERVER = """
import sys
from guaipeca import Index
from guaipeca.config import load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server

loaded = load_settings(sys.argv[1])
index = Index(
    loaded.data_dir / "index", embedder=HashingEmbedder(64), settings=loaded.settings.engine()
)
service = Service(index, loaded)
service.reindex("docs")
build_server(service).run("stdio")
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def params(tmp_path: Path) -> StdioServerParameters:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Guide\n\n## Install\n\nRun the installer with care.\n\n"
        "## Usage\n\nSearch the index with filters.\n",
        encoding="utf-8",
    )
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        f"corpora:\n  - name: docs\n    path: {docs}\n    topic: guides\n", encoding="utf-8"
    )
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", SERVER, str(config)],
        env={"GUAIPECA_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
    )


@pytest.mark.anyio
async def test_sdk_client_over_stdio_lists_tools_searches_and_reads_status(
    params: StdioServerParameters, tmp_path: Path
) -> None:
    junk: list[object] = []

    async def on_message(message: object) -> None:
        # The transport hands over an Exception for every stdout line that is not JSON-RPC.
        if isinstance(message, Exception):
            junk.append(message)

    errlog = tmp_path / "server.stderr"
    with anyio.fail_after(120), errlog.open("w", encoding="utf-8") as err:
        transport = stdio_client(params, errlog=err)
        async with Client(transport, message_handler=on_message) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[:3] == ["search", "get_chunk", "get_document"]
            found = await client.call_tool("search", {"query": "installer", "top_k": 2})
            assert not found.is_error and isinstance(found.structured_content, dict)
            top = found.structured_content["hits"][0]
            assert (top["doc_id"], top["source_path"]) == ("guide.md", "guide.md")
            assert top["heading_path"] == ["Guide", "Install"]
            status = await client.call_tool("status", {})
            assert isinstance(status.structured_content, dict)
            assert status.structured_content["model"] == "hashing-64"
            assert status.structured_content["corpora"][0]["documents"] == 1
            bad = await client.call_tool("search", {"query": "x", "top_k": 0})
            assert bad.is_error and isinstance(bad.content[0], TextContent)
            assert "top_k: Input should be greater than or equal to 1" in bad.content[0].text
    assert junk == []
    # The server did log, to stderr.
    assert "Tool 'search' rejected arguments" in errlog.read_text(encoding="utf-8")


async def _raw_session(params: StdioServerParameters, requests: list[dict[str, Any]]) -> list[str]:
    """Send JSON-RPC lines to the server's stdin; return every stdout line until each
    request has its answer and stdin is closed."""
    assert params.env is not None
    env = {**params.env, "PATH": "/usr/bin:/bin"}
    lines: list[str] = []
    async with await anyio.open_process(
        [params.command, *params.args], env=env, cwd=params.cwd, stderr=None
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for request in requests:
            await proc.stdin.send((json.dumps(request) + "\n").encode())
        waiting = {r["id"] for r in requests if "id" in r}
        buffer = b""
        while waiting:
            buffer += await proc.stdout.receive()
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8")
                lines.append(line)
                waiting.discard(json.loads(line).get("id"))
        await proc.stdin.aclose()
        async for rest in proc.stdout:
            buffer += rest
        assert await proc.wait() == 0
    lines.extend(line for line in buffer.decode("utf-8").split("\n") if line)
    return lines


@pytest.mark.anyio
async def test_stdout_carries_only_json_rpc_even_for_errors(
    params: StdioServerParameters,
) -> None:
    call = "tools/call"
    requests: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": call, "params": {"name": "index", "arguments": {}}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": call,
            "params": {"name": "get_document", "arguments": {"doc_id": "../../etc/passwd"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": call,
            "params": {"name": "search", "arguments": {"query": "installer", "mode": "fuzzy"}},
        },
    ]
    with anyio.fail_after(120):
        lines = await _raw_session(params, requests)
    answers = {}
    for line in lines:
        message = json.loads(line)  # every stdout line is one JSON-RPC message
        assert message["jsonrpc"] == "2.0"
        answers[message.get("id")] = message
    assert answers[1]["result"]["serverInfo"]["name"] == "guaipeca"
    assert answers[2]["result"]["structuredContent"]["corpora"][0]["unchanged"] == 1
    missing = answers[3]["result"]
    assert missing["isError"] is True
    assert missing["content"][0]["text"] == (
        "Error executing tool get_document: no document '../../etc/passwd'"
    )
    assert answers[4]["result"]["isError"] is True
    assert (
        "mode: Input should be 'hybrid', 'dense' or 'keyword'"
        in (answers[4]["result"]["content"][0]["text"])
    )
