"""Resource limits against a live server on 127.0.0.1: a 100 MB request body, 10,000 tool
calls in one batch, a 1 MB query, ``top_k=10**9``, JSON nested 100,000 deep. Each gets a
clear error, memory stays bounded, and the server keeps answering afterwards."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import InvalidArgumentError
from guaipeca.server import Service
from guaipeca.server.http import build_app
from support.http import LiveServer
from support.reliability import make_service, report, rss_bytes

PROTOCOL = "2025-06-18"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MB = 1024 * 1024


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = make_service(tmp_path_factory.mktemp("limits"))
    yield service
    service.index.close()


@pytest.fixture(scope="module")
def live(service: Service) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live:
        yield live


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=live.url, timeout=120) as client:
        yield client


def _message(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def _session(http: httpx2.Client) -> dict[str, str]:
    response = http.post(
        "/mcp",
        headers=HEADERS,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "limits", "version": "1"},
            },
        },
    )
    assert response.status_code == 200, response.text
    headers = {
        **HEADERS,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": PROTOCOL,
    }
    http.post(
        "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    return headers


def _search(http: httpx2.Client, headers: dict[str, str], **arguments: Any) -> dict[str, Any]:
    response = http.post(
        "/mcp",
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "search", "arguments": arguments},
        },
    )
    assert response.status_code == 200, response.text
    return _message(response)


def _still_serving(http: httpx2.Client) -> None:
    headers = _session(http)
    found = _search(http, headers, query="river stone", top_k=3)
    assert not found["result"]["isError"]
    assert found["result"]["structuredContent"]["count"] == 3


def _clean(text: str) -> None:
    assert "Traceback" not in text and "/tmp" not in text


def _bounded(name: str, before: int, started: float, **figures: Any) -> None:
    grown = max(0, rss_bytes() - before)
    report(
        "limits",
        case=name,
        rss_growth_mb=round(grown / MB, 1),
        seconds=round(time.monotonic() - started, 2),
        **figures,
    )
    assert grown < 200 * MB, f"{name}: memory grew by {grown / MB:.0f} MB"


def test_a_100_mb_body_is_refused(http: httpx2.Client) -> None:
    before, started = rss_bytes(), time.monotonic()

    def body() -> Iterator[bytes]:
        chunk = b"x" * MB
        for _ in range(100):
            yield chunk

    # Declared: refused from the header, before a byte is read.
    declared = http.post(
        "/mcp", headers={**HEADERS, "Content-Length": str(100 * MB)}, content=body()
    )
    assert declared.status_code == 413
    assert "request body too large" in declared.json()["error"]
    _clean(declared.text)
    # Streamed (chunked, no length): cut off once the limit is crossed.
    try:
        streamed = http.post("/mcp", headers=HEADERS, content=body())
        assert streamed.status_code == 413
        _clean(streamed.text)
    except httpx2.TransportError:
        pass  # the server closed the connection after its 413, mid-upload: also a refusal
    _bounded("100 MB request body", before, started, status=413)
    _still_serving(http)


def test_ten_thousand_calls_in_one_batch(http: httpx2.Client) -> None:
    headers = _session(http)
    batch = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": f"river {i}", "top_k": 1000}},
        }
        for i in range(10_000)
    ]
    before, started = rss_bytes(), time.monotonic()
    response = http.post("/mcp", headers=headers, content=json.dumps(batch))
    assert response.status_code in (400, 413), response.status_code
    _clean(response.text)
    _bounded("10,000 tool calls in one batch", before, started, status=response.status_code)
    _still_serving(http)


def test_a_one_megabyte_query(http: httpx2.Client) -> None:
    headers = _session(http)
    before, started = rss_bytes(), time.monotonic()
    found = _search(http, headers, query="river " * (MB // 6), top_k=5)
    assert found["result"]["isError"]
    text = found["result"]["content"][0]["text"]
    assert "8192" in text
    _clean(text)
    _bounded("1 MB query", before, started, error=text[:120])


def test_top_k_of_a_billion(http: httpx2.Client) -> None:
    headers = _session(http)
    before, started = rss_bytes(), time.monotonic()
    found = _search(http, headers, query="river", top_k=10**9)
    assert found["result"]["isError"]
    text = found["result"]["content"][0]["text"]
    assert "top_k" in text and "less than or equal" in text
    _bounded("top_k=10**9", before, started, error=text[:120])


def test_json_nested_a_hundred_thousand_deep(http: httpx2.Client) -> None:
    headers = _session(http)
    before, started = rss_bytes(), time.monotonic()
    deep = "[" * 100_000 + "]" * 100_000
    response = http.post("/mcp", headers=headers, content=deep)
    assert response.status_code in (400, 422), response.status_code
    _clean(response.text)
    # A where filter nested 5,000 deep, as raw JSON (the client's encoder would recurse).
    where = '{"$and": [' * 5_000 + "{}" + "]}" * 5_000
    raw = (
        '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "search", '
        f'"arguments": {{"query": "river", "where": {where}}}}}}}'
    )
    nested = http.post("/mcp", headers=headers, content=raw)
    assert nested.status_code in (200, 400), nested.status_code
    _clean(nested.text)
    if nested.status_code == 200:
        answer = _message(nested)
        assert "error" in answer or answer["result"]["isError"], answer
    _bounded("JSON nested 100,000 deep", before, started, status=response.status_code)
    _still_serving(http)


def test_library_limits(tmp_path: Path) -> None:
    with Index(tmp_path / "i", embedder=HashingEmbedder()) as index:
        index.add_documents({"a": "river stone"})
        for kwargs in (
            {"top_k": 10**9},
            {"candidates": 10**9},
            {"top_k": -1},
        ):
            with pytest.raises(InvalidArgumentError):
                index.search("river", **kwargs)
        with pytest.raises(InvalidArgumentError, match="8192"):
            index.search("river " * (MB // 6))
