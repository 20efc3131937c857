"""``guaipeca serve`` started as users of the replaced systems start theirs, with the installed
script, the real bundled model, a real stdio pipe and real sockets on 127.0.0.1:

- the original Guaipeca's sample config (``server.transport: both``): one process answers an
  MCP client over stdio (the official SDK's) and over HTTP, and /health names the server;
- A-RAG-OG's ``.env`` in the working folder, no YAML: HOST, PORT, JWT_SECRET and its limits
  are taken from it, and what Guaipeca does not use is said on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from support import free_port
from support.legacy import AUDIT, ORIGINAL_SAMPLE

SCRIPT = Path(sys.executable).parent / "guaipeca"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed"),
]
JWT_SECRET = "an-openwebui-secret-of-enough-length-123"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _health(base: str, proc: subprocess.Popen[bytes] | None = None) -> httpx2.Response:
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx2.get(f"{base}/health", timeout=2)
        except httpx2.TransportError:
            assert proc is None or proc.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "no answer on /health"
            await anyio.sleep(0.2)


async def _http_search(base: str, query: str, headers: dict[str, str] | None = None) -> list[str]:
    async with (
        httpx2.AsyncClient(timeout=30, headers=headers) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as c,
    ):
        found = await c.call_tool("search", {"query": query, "top_k": 2})
        assert isinstance(found.structured_content, dict)
        return [h["chunk_id"] for h in found.structured_content["hits"]]


@pytest.mark.anyio
async def test_the_original_config_serves_stdio_and_http_from_one_process(
    tmp_path: Path,
) -> None:
    for folder, name, text in (("epm", "audit.md", AUDIT), ("finance", "ifrs.md", "# IFRS 16")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text(text)
    port = free_port()
    config = tmp_path / "guaipeca.yaml"
    config.write_text(ORIGINAL_SAMPLE.replace("port: 8090", f"port: {port}"))
    env = {**os.environ, "GUAIPECA_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [str(SCRIPT), "--config", str(config), "index"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # As the original's systemd unit runs it: --config FILE serve (transport from the file).
    params = StdioServerParameters(
        command=str(SCRIPT), args=["--config", str(config), "serve"], env=env
    )
    base = f"http://127.0.0.1:{port}"
    with anyio.fail_after(120), (tmp_path / "stdio.err").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as c:
            found = await c.call_tool("search", {"query": "HFM data audit", "top_k": 2})
            assert isinstance(found.structured_content, dict)
            stdio_ids = [h["chunk_id"] for h in found.structured_content["hits"]]
            health = await _health(base)
            assert health.status_code == 200
            assert health.json()["server"] == "guaipeca" and health.json()["status"] == "ok"
            assert await _http_search(base, "HFM data audit") == stdio_ids
        # The agent closed stdio: the HTTP side stops with it (one process, one lifetime).
        with pytest.raises(httpx2.TransportError):
            for _ in range(100):
                httpx2.get(f"{base}/health", timeout=1)
                await anyio.sleep(0.2)
    assert stdio_ids and stdio_ids[0].startswith("epm-docs")


@pytest.mark.anyio
async def test_a_server_starts_from_an_aragog_env(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / ".env").write_text(
        f"HOST=127.0.0.1\nPORT={port}\nJWT_SECRET={JWT_SECRET}\nJWT_ALGORITHM=HS256\n"
        "RATE_LIMIT_RPS=50\nRATE_LIMIT_BURST=60\nSEARCH_MAX_CONCURRENCY=4\nSEARCH_TIMEOUT=20\n"
        "MINIO_ENDPOINT=localhost:9000\nDOCLING_URL=http://localhost:5001\n"
    )
    (tmp_path / "doc1.md").write_text("# Leave policy\n\nStaff get 25 days of paid leave a year.")
    env = {**os.environ, "GUAIPECA_HOME": str(tmp_path / "home")}
    # A-RAG-OG indexed with `python index.py doc1.pdf ...`: the same list of files here.
    done = subprocess.run(
        [str(SCRIPT), "index", "doc1.md"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(
        [str(SCRIPT), "serve"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,  # transport http, as A-RAG-OG's: stdin is not read
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        health = await _health(base, proc)
        assert health.status_code == 200 and health.json()["server"] == "guaipeca"
        refused = httpx2.post(f"{base}/mcp", json={}, timeout=5)
        assert refused.status_code == 401  # JWT_SECRET: every MCP call needs a token
        token = jwt.encode({"sub": "alice"}, JWT_SECRET, algorithm="HS256")
        with anyio.fail_after(60):
            ids = await _http_search(base, "paid leave", {"Authorization": f"Bearer {token}"})
        assert ids and ids[0].startswith("default")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode() if proc.stderr else ""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    lines = err.splitlines()
    taken = [line for line in lines if "A-RAG-OG settings read" in line]
    assert len(taken) == 1
    for name in ("HOST", "PORT", "JWT_SECRET", "RATE_LIMIT_RPS", "SEARCH_TIMEOUT"):
        assert name in taken[0]
    assert sum("MINIO_ENDPOINT: not used" in line for line in lines) == 1
    assert sum("DOCLING_URL: not used" in line for line in lines) == 1
    assert not any("JWT_ALGORITHM" in line for line in lines)  # HS256 is what we verify
