"""The write queue's one admission check (server/writes.py): a place is taken or refused in
one function, shared by the admissions nested in it, and a refusal for a full queue is a
typed error: HTTP 429 with Retry-After on the web API, a tool error over MCP, told apart
from other failures by its type, never by its text."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from guaipeca.errors import WriteQueueFullError
from guaipeca.server import Service
from guaipeca.server.http import build_app
from guaipeca.server.writes import WriteQueue
from support.http import LiveServer
from support.reliability import make_service

TOKEN = "write-queue-test-token-0123456789abcdef"
ALICE = {"Authorization": f"Bearer {TOKEN}"}


# -- the queue itself --------------------------------------------------------------------
def test_a_nested_admission_shares_its_callers_place() -> None:
    queue = WriteQueue(max_queued=4, per_caller=1)

    async def main() -> None:
        async with queue.admitted("alice"):
            async with queue.admitted("alice"):  # the tool inside the web API's call
                assert queue.queued == 1
            assert queue.queued == 1
        assert queue.queued == 0
        # Another call of hers (its own context) while the place is held is refused.
        held, release = anyio.Event(), anyio.Event()

        async def hold() -> None:
            async with queue.admitted("alice"):
                held.set()
                await release.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await held.wait()
            with pytest.raises(WriteQueueFullError) as refused:
                async with queue.admitted("alice"):
                    pass
            assert refused.value.retry_after >= 1
            release.set()
        assert queue.queued == 0

    anyio.run(main)


def test_another_callers_admission_is_its_own() -> None:
    queue = WriteQueue(max_queued=1, per_caller=1)

    async def main() -> None:
        async with queue.admitted("alice"):
            with pytest.raises(WriteQueueFullError):  # the queue is full in all
                async with queue.admitted("bob"):
                    pass
            assert queue.queued == 1

    anyio.run(main)


def test_a_task_started_inside_an_admission_keeps_the_place_until_it_ends() -> None:
    queue = WriteQueue(max_queued=4, per_caller=1)

    async def main() -> None:
        inside, release = anyio.Event(), anyio.Event()

        async def background() -> None:
            async with queue.admitted("alice"):
                inside.set()
                await release.wait()

        async with anyio.create_task_group() as tg:
            async with queue.admitted("alice"):
                tg.start_soon(background)
                await inside.wait()
            assert queue.queued == 1  # the background work still holds it
            with pytest.raises(WriteQueueFullError):
                async with queue.admitted("alice"):
                    pass
            release.set()
        assert queue.queued == 0

    anyio.run(main)


# -- over HTTP: a write waiting for another process's lock holds the only place ----------
_HOLD = """
import sys
from pathlib import Path
from guaipeca.index.corpora import hold_corpora
with hold_corpora(Path(sys.argv[1]), ["docs"], wait=30):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("writes")
    service = make_service(root, {"auth_token": TOKEN, "max_writes_per_caller": 1}, docs=2)
    yield service
    service.index.close()


def _wait_queued(service: Service, count: int) -> None:
    deadline = time.monotonic() + 30
    while service.writes.queued != count:
        assert time.monotonic() < deadline, f"{service.writes.queued} writes queued"
        time.sleep(0.02)


def _mcp_index(url: str) -> tuple[bool, object]:
    async def main() -> tuple[bool, object]:
        async with (
            httpx2.AsyncClient(headers=ALICE, timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as mcp,
        ):
            result = await mcp.call_tool("index", {})
            return result.is_error, result.structured_content

    return anyio.run(main)


def test_a_write_refused_by_a_full_queue_is_429_on_the_web_api_and_a_tool_error_on_mcp(
    service: Service,
) -> None:
    """Alice may have one write queued; hers waits for a CLI-like process that holds the
    corpus, so her next writes, on every door, are refused for the full queue."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(service.index.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    first: dict[str, httpx2.Response] = {}
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with (
            LiveServer(lambda p: build_app(service, host="127.0.0.1", port=p)) as live,
            httpx2.Client(base_url=live.url, headers=ALICE, timeout=90) as http,
        ):
            waiting = threading.Thread(
                target=lambda: first.update(index=http.post("/api/tools/index", json={}))
            )
            waiting.start()
            _wait_queued(service, 1)
            tool = http.post("/api/tools/delete", json={"corpus": "docs", "doc_id": "doc-0.md"})
            upload = http.put("/api/upload?corpus=docs&filename=u.md", content=b"# U\n\nu\n")
            plain = http.delete("/documents?corpus=docs&filename=doc-1.md")
            refused_on_mcp, structured = _mcp_index(live.url)
            assert service.writes.queued == 1  # the refused ones took no place
            holder.communicate("\n", timeout=30)
            waiting.join(90)
    finally:
        if holder.poll() is None:
            holder.kill()
    for answer in (tool, upload, plain):
        assert answer.status_code == 429, answer.text
        assert int(answer.headers["retry-after"]) >= 1
        assert answer.json()["error"]
    assert refused_on_mcp and structured is None
    assert first["index"].status_code == 200, first["index"].text
    assert service.writes.queued == 0
    root = Path(service.corpus_root("docs"))
    assert (root / "doc-0.md").exists() and (root / "doc-1.md").exists()  # never deleted
    assert not (root / "u.md").exists()
