"""The HTTP face over real sockets: a uvicorn server on 127.0.0.1 (ephemeral port) in a
background thread, the official MCP SDK clients (Streamable HTTP and SSE) and plain
HTTP requests.

Every response read here is checked for leaks (the tmp folder's path, a traceback).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service
from guaipeca.server.http import allowed_hosts, build_app
from support import free_port
from support.http import LiveServer

PROTOCOL = "2025-06-18"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


# -- a live server -------------------------------------------------------------------------


def leak_checker(*secrets: str) -> Callable[[httpx2.Response], None]:
    """A response hook: no body may contain a server path or a traceback."""

    def check(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return  # a stream; its messages are checked where they are parsed
        response.read()
        assert_clean(response.text, *secrets)

    return check


def async_leak_checker(*secrets: str) -> Callable[[httpx2.Response], Awaitable[None]]:
    async def check(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return
        await response.aread()
        assert_clean(response.text, *secrets)

    return check


def assert_clean(text: str, *secrets: str) -> None:
    assert "Traceback" not in text
    for secret in secrets:
        assert secret not in text


# -- a corpus, an index, a service ---------------------------------------------------------
DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun the zebra installer twice.\n\n## Use\n\nAsk away.\n",
    "notes/tax.txt": "Tax notes: the quokka rule applies to every receipt.\n",
    "removable.md": "# Removable\n\nThis pangolin page will be deleted over HTTP.\n",
    "spare.md": "# Spare\n\nA page that stays.\n",
}
SECRET_TEXT = "TOP SECRET: the launch code is 0000"


def make_service(
    root: Path, server: dict[str, Any] | None = None, *, allow: tuple[str, ...] = ("docs",)
) -> Service:
    """A corpus ``docs`` at ``root/docs`` (uploads and deletes allowed), indexed with the
    deterministic hashing embedder, plus a secret file beside the corpus folder."""
    docs = root / "docs"
    for rel, text in DOCS.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    (docs / ".hidden.md").write_text("# Hidden\n\nnot indexed\n", encoding="utf-8")
    (docs / "unsupported.xyz").write_text("not a document\n", encoding="utf-8")
    (root / "secret.md").write_text(SECRET_TEXT + "\n", encoding="utf-8")
    (docs / "link.md").symlink_to(root / "secret.md")  # indexed, but leads outside
    data = root / "data"
    server_section: dict[str, Any] = {"rate_limit_rps": 1000, "rate_limit_burst": 1000}
    server_section.update(server or {})
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(docs)}],
            "upload": {"allow": list(allow)},
            "storage": {"data_dir": str(data)},
            "server": server_section,
        },
        env={},
        cwd=root,
    )
    loaded = LoadedSettings(settings, None, data)
    index = Index(data / "index", embedder=HashingEmbedder(), settings=settings.engine())
    service = Service(index, loaded)
    service.reindex("docs")
    assert service.index.wait_for_embedding(60)  # the embedding phase runs behind the server
    return service


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http")


@pytest.fixture(scope="module")
def service(root: Path) -> Iterator[Service]:
    service = make_service(root)
    yield service
    service.index.close()


@pytest.fixture(scope="module")
def live(service: Service) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live:
        yield live


@pytest.fixture
def http(live: LiveServer, root: Path) -> Iterator[httpx2.Client]:
    hooks = {"response": [leak_checker(str(root))]}
    with httpx2.Client(base_url=live.url, event_hooks=hooks, timeout=30) as client:
        yield client


def sse_json(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert data, response.text
    return dict(json.loads(data[-1]))


def initialize(http: httpx2.Client) -> str:
    """Open a Streamable HTTP session by hand; its id."""
    response = http.post(
        "/mcp",
        headers=MCP_HEADERS,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
    )
    assert response.status_code == 200, response.text
    assert sse_json(response)["result"]["serverInfo"]["name"] == "guaipeca"
    session = response.headers["mcp-session-id"]
    assert session
    done = http.post(
        "/mcp",
        headers={**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL},
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    assert done.status_code == 202
    return session


def list_tools_raw(http: httpx2.Client, session: str) -> httpx2.Response:
    return http.post(
        "/mcp",
        headers={**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL},
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )


# -- MCP over Streamable HTTP --------------------------------------------------------------
def test_streamable_http_client_lists_and_calls_tools(live: LiveServer, root: Path) -> None:
    async def main() -> tuple[list[str], dict[str, Any], str]:
        hooks = {"response": [async_leak_checker(str(root))]}
        async with (
            httpx2.AsyncClient(event_hooks=hooks, timeout=30) as client,
            Client(
                streamable_http_client(f"{live.url}/mcp", http_client=client), mode="legacy"
            ) as mcp,
        ):
            tools = await mcp.list_tools()
            result = await mcp.call_tool("search", {"query": "zebra installer", "top_k": 3})
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return (
                [t.name for t in tools.tools],
                result.structured_content,
                json.dumps([c.model_dump() for c in result.content]),
            )

    names, structured, content = anyio.run(main)
    assert {"search", "get_chunk", "get_document", "status", "delete"} <= set(names)
    hits = structured["hits"]
    assert hits and hits[0]["doc_id"] == "guide.md"
    assert_clean(json.dumps(structured) + content, str(root))


def test_streamable_http_auto_mode_negotiates(live: LiveServer) -> None:
    async def main() -> list[str]:
        async with Client(f"{live.url}/mcp") as mcp:
            return [t.name for t in (await mcp.list_tools()).tools]

    assert "search" in anyio.run(main)


def test_initialize_issues_a_session_and_delete_ends_it(http: httpx2.Client) -> None:
    session = initialize(http)
    listed = list_tools_raw(http, session)
    assert listed.status_code == 200
    assert any(t["name"] == "search" for t in sse_json(listed)["result"]["tools"])

    ended = http.delete(
        "/mcp", headers={"mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
    )
    assert ended.status_code == 200
    after = list_tools_raw(http, session)
    assert after.status_code == 404


def test_a_refused_initialize_opens_no_session(http: httpx2.Client, service: Service) -> None:
    # Issue 38: Accept without text/event-stream got 406 and an mcp-session-id all the same.
    response = http.post(
        "/mcp",
        headers={"Accept": "application/json"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
    )
    assert response.status_code == 406
    assert "mcp-session-id" not in response.headers


def test_unknown_session_is_404(http: httpx2.Client) -> None:
    response = list_tools_raw(http, "0123456789abcdef0123456789abcdef")
    assert response.status_code == 404


def test_get_without_a_session_is_refused_per_spec(http: httpx2.Client) -> None:
    # GET opens the server-to-client stream of an existing session only.
    response = http.get("/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code in (400, 404)


def test_foreign_host_header_is_refused_on_mcp(http: httpx2.Client) -> None:
    response = http.post(
        "/mcp",
        headers={**MCP_HEADERS, "Host": "attacker.example"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
    )
    assert response.status_code == 421


# -- MCP over legacy SSE -------------------------------------------------------------------
def test_sse_client_lists_and_calls_tools(live: LiveServer, root: Path) -> None:
    async def main() -> tuple[list[str], dict[str, Any]]:
        async with Client(sse_client(f"{live.url}/sse"), mode="legacy") as mcp:
            tools = await mcp.list_tools()
            result = await mcp.call_tool("search", {"query": "quokka receipt", "top_k": 2})
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return [t.name for t in tools.tools], result.structured_content

    names, structured = anyio.run(main)
    assert "search" in names
    assert structured["hits"][0]["doc_id"] == "notes/tax.txt"
    assert_clean(json.dumps(structured), str(root))


def test_sse_post_to_unknown_session_is_404(http: httpx2.Client) -> None:
    for path in ("/messages/", "/messages"):
        response = http.post(
            f"{path}?session_id={'0' * 32}", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        )
        assert response.status_code == 404, path


# -- plain routes --------------------------------------------------------------------------
def test_health_reports_version_backend_and_counts(http: httpx2.Client) -> None:
    response = http.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["version"]
    assert body["backend"] == "embedded"
    (docs,) = body["corpora"]
    assert docs["name"] == "docs"
    assert docs["documents"] >= len(DOCS)
    assert docs["chunks"] >= docs["documents"]
    # Progressive indexing: chunks searchable by keyword only, and the time left.
    assert docs["pending_chunks"] >= 0 and body["pending_chunks"] == docs["pending_chunks"]
    assert "pending_seconds" in body


def test_health_is_503_when_the_index_fails(
    http: httpx2.Client, service: Service, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise OSError(f"{root}/data/index: disk I/O error")

    monkeypatch.setattr(service.index, "stats", broken)
    response = http.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "error"


def test_tools_lists_names_descriptions_and_schemas(http: httpx2.Client) -> None:
    response = http.get("/tools")
    assert response.status_code == 200
    tools = {t["name"]: t for t in response.json()["tools"]}
    search = tools["search"]
    assert search["description"]
    assert search["inputSchema"]["type"] == "object"
    assert "query" in search["inputSchema"]["properties"]


def test_download_serves_an_indexed_file_as_an_attachment(http: httpx2.Client) -> None:
    response = http.get("/download/docs/notes/tax.txt")
    assert response.status_code == 200
    assert response.text == DOCS["notes/tax.txt"]
    assert response.headers["content-disposition"].startswith("attachment")
    assert response.headers["x-content-type-options"] == "nosniff"


def test_download_of_unknown_things_is_404(http: httpx2.Client) -> None:
    for path in (
        "/download/docs/missing.md",
        "/download/nope/guide.md",
        "/download/docs/unsupported.xyz",
        "/download/docs/link.md",  # indexed, but the link leads out of the folder
        "/download/docs/notes",  # a folder
    ):
        response = http.get(path)
        assert response.status_code == 404, path
        assert response.json() == {"error": "not found"}
        assert SECRET_TEXT not in response.text


def test_unknown_route_is_json_404(http: httpx2.Client) -> None:
    response = http.get("/nowhere")
    assert response.status_code == 404
    assert "error" in response.json()


def test_delete_documents_removes_the_file_and_its_document(
    http: httpx2.Client, service: Service
) -> None:
    target = Path(service.corpus_root("docs")) / "removable.md"
    assert target.exists()
    response = http.delete("/documents", params={"corpus": "docs", "filename": "removable.md"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["file_deleted"] is True
    assert body["removed_from_index"] is True
    assert not target.exists()
    assert service.index.list_documents(corpus="docs", where={"doc_id": "removable.md"}) == []
    again = http.delete("/documents", params={"corpus": "docs", "filename": "removable.md"})
    assert again.status_code == 404
    assert http.get("/download/docs/removable.md").status_code == 404


def test_delete_documents_needs_both_parameters(http: httpx2.Client) -> None:
    assert http.delete("/documents", params={"corpus": "docs"}).status_code == 400
    assert http.delete("/documents", params={"filename": "spare.md"}).status_code == 400


def test_delete_is_refused_in_a_corpus_without_uploads(root: Path) -> None:
    service = make_service(root / "readonly", allow=())
    try:
        with (
            LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live,
            httpx2.Client(base_url=live.url) as http,
        ):
            response = http.delete("/documents", params={"corpus": "docs", "filename": "spare.md"})
            assert response.status_code == 403
            assert "upload.allow" in response.json()["error"]
            assert str(root) not in response.text
            assert (root / "readonly" / "docs" / "spare.md").exists()
    finally:
        service.index.close()


def test_allowed_hosts_cover_loopback_and_the_configured_host() -> None:
    assert allowed_hosts("127.0.0.1", 8090) == ["127.0.0.1:8090", "localhost:8090", "[::1]:8090"]
    assert "rag.lan:8090" in allowed_hosts("rag.lan", 8090)
    assert allowed_hosts("0.0.0.0", 8090) == allowed_hosts("127.0.0.1", 8090)
    assert "[fe80::1]:8090" in allowed_hosts("fe80::1", 8090)
    assert "127.0.0.1:*" in allowed_hosts("127.0.0.1", 0)
    assert "box:*" in allowed_hosts("127.0.0.1", 8090, ["box:*"])


# -- serve_http: a real process, SIGTERM, graceful shutdown ----------------------------------
_SERVE = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path[:0] = [sys.argv[3], str(Path(sys.argv[3]).parent)]  # tests/server and tests/
    from test_http import make_service
    from guaipeca.server.http import serve_http

    service = make_service(Path(sys.argv[1]))
    asyncio.run(serve_http(service, "127.0.0.1", int(sys.argv[2])))
    """
)


def test_serve_http_finishes_requests_in_flight_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "GUAIPECA_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(tmp_path), str(port), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            while True:
                assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
                try:
                    if http.get("/health").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.05)

        # A request whose body is half sent when SIGTERM arrives must still be answered.
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        ).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(head + body[:20])
            # Once another request has been answered, the server has read this one's
            # headers: it is in flight.
            with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
                assert http.get("/health").status_code == 200
            proc.send_signal(signal.SIGTERM)
            # Once new connections are refused, the server is shutting down.
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=5).close()
                except ConnectionRefusedError:
                    break
                assert time.monotonic() < deadline, "server did not start shutting down"
                time.sleep(0.01)
            sock.sendall(body[20:])
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b"mcp-session-id" in answer.lower()
        assert b'"serverInfo"' in answer
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode in (0, -signal.SIGTERM), err.decode()[-2000:]
    assert out == b"", "stdout must stay clean (it carries the stdio transport)"
    assert b"Shutting down" in err
