"""The MCP protocol versions the server answers: 2026-07-28 (stateless, ``server/discover``,
no session id), 2025-11-25 and 2025-06-18 (the ``initialize`` handshake and a session bound
to the identity that opened it), each spoken by the official SDK client pinned to it
(tests/support/mcp.py), over Streamable HTTP and over stdio (``guaipeca serve``).

The SDK serves every version; these tests prove it for Guaipeca's app, with its auth and
body middlewares in front, and its tools and resources behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import jwt
import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceLink, TextContent, TextResourceContents

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service
from guaipeca.server.http import build_app
from support.http import LiveServer
from support.mcp import PROTOCOL_VERSIONS, pinned_session

TOKEN = "protocol-versions-token-0123456789"
JWT_SECRET = "a-jwt-secret-long-enough-for-hs256-and-hs512-0123456789abcdefghij"
MODERN = "2026-07-28"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
SCRIPT = Path(sys.executable).parent / "guaipeca"
DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun the zebra installer twice.\n\n## Use\n\nAsk.\n",
    "notes/tax.txt": "Tax notes: the quokka rule applies to every receipt.\n",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("versions")
    for rel, text in DOCS.items():
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / rel).write_text(text, encoding="utf-8")
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(root / "docs")}],
            "upload": {"allow": ["docs"]},
            "storage": {"data_dir": str(root / "data")},
            "server": {
                "auth_token": TOKEN,
                "jwt_secret": JWT_SECRET,
                "rate_limit_rps": 1000,
                "rate_limit_burst": 1000,
            },
        },
        env={},
        cwd=root,
    )
    index = Index(root / "data" / "index", embedder=HashingEmbedder(), settings=settings.engine())
    service = Service(index, LoadedSettings(settings, None, root / "data"))
    service.reindex("docs")
    assert index.wait_for_embedding(60)
    yield service
    index.close()


@pytest.fixture(scope="module")
def live(service: Service) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live:
        yield live


@asynccontextmanager
async def http_session(
    live: LiveServer, version: str, session_ids: list[str | None]
) -> AsyncIterator[ClientSession]:
    """A pinned SDK session over Streamable HTTP with the token; ``session_ids`` collects
    the ``Mcp-Session-Id`` header of every response."""

    async def record(response: httpx2.Response) -> None:
        session_ids.append(response.headers.get("mcp-session-id"))

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]}, timeout=30) as http,
        pinned_session(streamable_http_client(f"{live.url}/mcp", http_client=http), version) as s,
    ):
        yield s


async def search_and_read(session: ClientSession) -> None:
    """What every version must carry: tools with output schemas, a search whose structured
    result names hits, resource links to them, and resources/read of those links."""
    tools = (await session.list_tools()).tools
    assert tools and all(t.output_schema is not None for t in tools)
    templates = (await session.list_resource_templates()).resource_templates
    assert {t.uri_template for t in templates} == {
        "guaipeca://corpus/{corpus}/doc/{doc_id}",
        "guaipeca://corpus/{corpus}/chunk/{chunk}",
    }
    found = await session.call_tool("search", {"query": "zebra installer", "top_k": 2})
    assert not found.is_error and isinstance(found.structured_content, dict)
    top = found.structured_content["hits"][0]
    links = [b for b in found.content if isinstance(b, ResourceLink)]
    assert links[0].name == top["chunk_id"]
    chunk = (await session.read_resource(links[0].uri)).contents[0]
    assert isinstance(chunk, TextResourceContents) and chunk.text == top["text"]
    doc_link = next(link for link in links if link.name == top["doc_id"])
    doc = (await session.read_resource(doc_link.uri)).contents[0]
    assert isinstance(doc, TextResourceContents)
    assert doc.text[top["start"] : top["end"]] == top["text"]


# -- Streamable HTTP -------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
async def test_http_answers_the_sdk_client_pinned_to_each_version(
    live: LiveServer, version: str
) -> None:
    session_ids: list[str | None] = []
    with anyio.fail_after(60):
        async with http_session(live, version, session_ids) as session:
            assert session.protocol_version == version
            await search_and_read(session)
    if version == MODERN:  # stateless: no response ever names a session
        assert session_ids and not any(session_ids)
    else:
        assert any(session_ids)


@pytest.mark.anyio
async def test_the_sdk_client_in_auto_mode_discovers_the_newest_version(live: LiveServer) -> None:
    from mcp.client import Client

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client,
    ):
        assert client.protocol_version == MODERN
        discovered = client.session.discover_result
        assert discovered is not None
        # server/discover lists the stateless versions; the older ones are reached by the
        # initialize handshake (the tests above).
        assert MODERN in discovered.supported_versions


def discover_body() -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}


def test_a_stateless_request_still_needs_the_credential(live: LiveServer) -> None:
    headers = {**MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "server/discover"}
    with httpx2.Client(base_url=live.url, timeout=30) as http:
        refused = http.post("/mcp", json=discover_body(), headers=headers)
        assert refused.status_code == 401
        answered = http.post(
            "/mcp", json=discover_body(), headers={**headers, "Authorization": f"Bearer {TOKEN}"}
        )
    assert answered.status_code == 200, answered.text
    assert "mcp-session-id" not in answered.headers


@pytest.mark.parametrize("version", [v for v in PROTOCOL_VERSIONS if v != MODERN])
def test_a_handshake_session_stays_bound_to_the_identity_that_opened_it(
    live: LiveServer, version: str
) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    mine = {"Authorization": f"Bearer {TOKEN}"}
    other = jwt.encode({"sub": "mallory", "exp": int(time.time()) + 600}, JWT_SECRET)
    with httpx2.Client(base_url=live.url, timeout=30) as http:
        opened = http.post("/mcp", json=init, headers={**MCP_HEADERS, **mine})
        assert opened.status_code == 200
        assert version in opened.text
        headers = {
            **MCP_HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": version,
        }
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        stolen = http.post(
            "/mcp", json=ping, headers={**headers, "Authorization": f"Bearer {other}"}
        )
        assert stolen.status_code == 404
        assert http.post("/mcp", json=ping, headers={**headers, **mine}).status_code == 200


# -- every tool: an output schema and a structured result that fits it -----------------------
def sample_calls(chunk_id: str, version: str) -> dict[str, dict[str, Any]]:
    """One valid call of each tool; a new tool fails the test below until it has one."""
    uploaded = f"uploaded-{version}.md"
    return {
        "search": {"query": "zebra"},
        "get_chunk": {"chunk_ids": [chunk_id]},
        "get_document": {"doc_id": "guide.md"},
        "list_documents": {},
        "get_toc": {"doc_id": "guide.md"},
        "index": {"corpus": "docs"},
        "status": {},
        "list_folders": {},
        "upload": {"corpus": "docs", "filename": uploaded, "content_base64": "IyBVcAo="},
        "delete": {"corpus": "docs", "doc_id": uploaded},
        "keyword_search": {"query": "zebra"},
        "keyword_and_semantic_search": {"query": "zebra"},
        "semantic_search": {"query": "zebra"},
        "filtered_search": {"query": "zebra"},
        "read_chunk": {"chunk_ids": [chunk_id]},
        "read_neighbors": {"chunk_ids": [chunk_id]},
        "find_related": {"chunk_ids": [chunk_id]},
    }


@pytest.mark.anyio
@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
async def test_every_listed_tool_returns_structured_content_fitting_its_output_schema(
    live: LiveServer, version: str
) -> None:
    with anyio.fail_after(120):
        async with http_session(live, version, []) as session:
            tools = (await session.list_tools()).tools
            found = await session.call_tool("search", {"query": "quokka", "top_k": 1})
            assert isinstance(found.structured_content, dict)
            calls = sample_calls(found.structured_content["hits"][0]["chunk_id"], version)
            assert sorted(t.name for t in tools) == sorted(calls), "a tool without a sample call"
            for tool in tools:  # in listed order: upload comes before delete
                assert tool.output_schema is not None, tool.name
                result = await session.call_tool(tool.name, calls[tool.name])
                assert not result.is_error, (tool.name, result.content)
                assert isinstance(result.structured_content, dict), tool.name
                jsonschema.validate(result.structured_content, tool.output_schema)
                assert isinstance(result.content[0], TextContent), tool.name


# -- stdio: guaipeca serve ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GUAIPECA_HOME with one corpus indexed by the CLI (the real bundled model)."""
    root = tmp_path_factory.mktemp("stdio-versions")
    for rel, text in DOCS.items():
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / rel).write_text(text, encoding="utf-8")
    (root / "home").mkdir()
    (root / "home" / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {root / 'docs'}\n", encoding="utf-8"
    )
    env = {**os.environ, "GUAIPECA_HOME": str(root / "home")}
    done = subprocess.run([str(SCRIPT), "index"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return root


@pytest.mark.anyio
@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
async def test_stdio_answers_the_sdk_client_pinned_to_each_version(
    home: Path, version: str
) -> None:
    params = StdioServerParameters(
        command=str(SCRIPT),
        args=["serve", "--transport", "stdio"],
        env={**os.environ, "GUAIPECA_HOME": str(home / "home")},
    )
    with anyio.fail_after(120), (home / f"stdio-{version}.err").open("w") as err:
        async with pinned_session(stdio_client(params, errlog=err), version) as session:
            assert session.protocol_version == version
            if version == MODERN:
                discovered = await session.discover()
                assert MODERN in discovered.supported_versions
            await search_and_read(session)
