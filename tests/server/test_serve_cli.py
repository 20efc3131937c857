"""``guaipeca serve`` as a user runs it: the installed script, the real bundled model, a real
stdio pipe and a real HTTP socket on 127.0.0.1; results equal the library's on the same index."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from guaipeca import Index
from support import free_port

SCRIPT = Path(sys.executable).parent / "guaipeca"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with one corpus indexed by the CLI (real model)."""
    root = tmp_path_factory.mktemp("serve")
    docs = root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Guide\n\n## Install\n\nRun the installer, then restart.\n\n"
        "## Usage\n\nSearch your notes from the command line."
    )
    (docs / "faq.md").write_text("# FAQ\n\nWhy is the sky blue? Rayleigh scattering of light.")
    (root / "home").mkdir()
    (root / "home" / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {docs}\n    topic: user guide\n"
        f"upload:\n  allow: [docs]\n"
    )
    env = {**os.environ, "GUAIPECA_HOME": str(root / "home")}
    done = subprocess.run([str(SCRIPT), "index"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return root


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "GUAIPECA_HOME": str(home / "home")}


def _library_ranking(home: Path, query: str) -> list[str]:
    with Index(home / "home" / "data" / "index") as index:
        return [h.chunk_id for h in index.search(query, top_k=3)]


@pytest.mark.anyio
async def test_serve_over_stdio_answers_like_the_library(home: Path) -> None:
    params = StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--transport", "stdio"], env=_env(home)
    )
    junk: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            junk.append(message)

    with anyio.fail_after(120), (home / "stdio.err").open("w") as err:
        async with Client(stdio_client(params, errlog=err), message_handler=on_message) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"search", "get_toc", "upload", "delete", "status"} <= tools
            found = await c.call_tool("search", {"query": "how do I install it", "top_k": 3})
            assert isinstance(found.structured_content, dict)
            ids = [h["chunk_id"] for h in found.structured_content["hits"]]
    assert junk == []
    assert ids == _library_ranking(home, "how do I install it")


@pytest.mark.anyio
async def test_serve_over_http_streamable_and_sse(home: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--transport", "http", "--port", str(port)],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx2.get(f"{base}/health", timeout=2)
                break
            except httpx2.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                await anyio.sleep(0.2)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        with anyio.fail_after(120):
            async with (
                httpx2.AsyncClient(timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as c,
            ):
                found = await c.call_tool("search", {"query": "sky colour", "top_k": 3})
                assert isinstance(found.structured_content, dict)
                http_ids = [h["chunk_id"] for h in found.structured_content["hits"]]
            async with Client(sse_client(f"{base}/sse"), mode="legacy") as c:
                found = await c.call_tool("search", {"query": "sky colour", "top_k": 3})
                assert isinstance(found.structured_content, dict)
                sse_ids = [h["chunk_id"] for h in found.structured_content["hits"]]
        assert http_ids == sse_ids == _library_ranking(home, "sky colour")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out = proc.stdout.read() if proc.stdout else b""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert out == b""  # nothing but logs, and logs go to stderr
    assert proc.returncode in (0, -15)


@pytest.mark.parametrize("transport", ["http", "both"])
def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_1(
    tmp_path: Path, transport: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(SCRIPT), "serve", "--transport", transport, "--port", str(port)],
            env={**os.environ, "GUAIPECA_HOME": str(tmp_path)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"error: port {port} on 127.0.0.1 is already in use (another guaipeca serve?): "
        "choose another with --port (or server.port), or stop the process that holds it"
    ]
    assert done.stdout == ""  # the URL is announced only once the port is bound


def _children_running(needle: str) -> list[int]:
    """PIDs of this process's children whose command line contains ``needle``."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if needle.encode() in cmdline:
                pids.append(int(pid))
    return pids


def _mapped_vector_kb(pid: int) -> int:
    """Resident kB of the process's mappings of vector files."""
    total, current = 0, ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and ":" not in fields[0]:
            current = fields[-1] if len(fields) > 5 else ""
        elif line.startswith("Rss:") and "vectors" in current and current.endswith(".f32"):
            total += int(fields[1])
    return total


@pytest.mark.anyio
async def test_an_idle_stdio_server_gives_memory_back(home: Path, tmp_path: Path) -> None:
    # The same corpus and index, with a short idle_trim_seconds.
    config = tmp_path / "guaipeca.yaml"
    original = (home / "home" / "guaipeca.yaml").read_text()
    config.write_text(original + "server:\n  idle_trim_seconds: 0.5\n")
    env = {
        **_env(home),
        "GUAIPECA_CONFIG": str(config),
        "GUAIPECA_DATA_DIR": str(home / "home" / "data"),
    }
    params = StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--transport", "stdio", "--no-watch"], env=env
    )
    with anyio.fail_after(120), (home / "stdio-idle.err").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as c:
            (pid,) = _children_running("serve --transport stdio --no-watch")
            found = await c.call_tool("search", {"query": "how do I install it", "top_k": 3})
            assert found.structured_content and found.structured_content["hits"]
            # The exact scan read the vectors through the map; after 0.5 s without a tool
            # call the server unmaps them (and trims the C heap), then answers as before.
            deadline = time.monotonic() + 20
            while _mapped_vector_kb(pid) > 0:
                assert time.monotonic() < deadline, "no trim after the server went idle"
                await anyio.sleep(0.1)
            again = await c.call_tool("search", {"query": "how do I install it", "top_k": 3})
            assert again.structured_content == found.structured_content
