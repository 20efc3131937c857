"""An idle server gives memory back: mapped vector pages and the C heap's free pages
(``server.idle_trim_seconds``), once per quiet spell, never while a request or a tool call
runs. The stdio server's trim, end to end: tests/server/test_serve_cli.py."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx2

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from guaipeca.server.http import _InFlight, make_server
from guaipeca.server.idle import IdleTrim, ToolCalls, trim_when_idle
from support.reliability import make_service


def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path``."""
    total, current = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and ":" not in fields[0]:
            current = fields[-1] if len(fields) > 5 else ""
        elif line.startswith("Rss:") and current == str(path):
            total += int(fields[1])
    return total


def test_release_memory_unmaps_vector_pages_and_searches_stay_the_same(tmp_path: Path) -> None:
    with Index(tmp_path / "index", embedder=HashingEmbedder()) as index:
        index.add_documents({f"d{i}": f"# Doc {i}\n\nword{i} shared text {i}" for i in range(300)})
        vectors = next((tmp_path / "index").rglob("vectors*.f32"))
        before = index.search("shared text 7", top_k=5)
        assert _mapped_kb(vectors) > 0  # the exact scan read every row through the map
        index.release_memory()
        assert _mapped_kb(vectors) == 0
        assert index.search("shared text 7", top_k=5) == before


class _Clock:
    """In-flight counters the test moves by hand."""

    def __init__(self) -> None:
        self.in_flight = _InFlight(app=None)  # type: ignore[arg-type]
        self.released = 0

    def release(self) -> None:
        self.released += 1


def test_one_trim_per_quiet_spell_and_none_while_busy() -> None:
    async def scenario() -> list[int]:
        c = _Clock()
        trim = IdleTrim(c.in_flight, c.release, seconds=0.05)
        seen = []
        c.in_flight.count = 1  # a request is running: never trim
        c.in_flight.last_done -= 10
        trim.tick()
        seen.append(trim.trims)
        c.in_flight.count = 0
        trim.tick()  # idle long enough: trim once
        trim.tick()  # same quiet spell: no second trim
        await asyncio.sleep(0.05)
        seen.append(trim.trims)
        c.in_flight.finished += 1  # a request came and went just now
        c.in_flight.last_done = time.monotonic()
        trim.tick()  # not idle long enough yet
        seen.append(trim.trims)
        await asyncio.sleep(0.06)
        trim.tick()
        await asyncio.sleep(0.05)
        seen.append(trim.trims)
        seen.append(c.released)
        return seen

    assert asyncio.run(scenario()) == [0, 1, 1, 2, 2]


def test_trim_off_when_seconds_is_zero() -> None:
    async def scenario() -> int:
        c = _Clock()
        trim = IdleTrim(c.in_flight, c.release, seconds=0)
        c.in_flight.last_done -= 100
        trim.tick()
        await asyncio.sleep(0.02)
        return c.released

    assert asyncio.run(scenario()) == 0


def test_a_real_server_trims_after_requests_stop(tmp_path: Path) -> None:
    service = make_service(tmp_path, {"idle_trim_seconds": 0.3})
    server = make_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not (server.started and server.servers):
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        assert httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        service.index.search("document", top_k=3)  # maps vector pages in this process
        vectors = next((tmp_path / "data").rglob("vectors*.f32"))
        assert _mapped_kb(vectors) > 0
        started = server.idle_trim.trims if server.idle_trim else 0
        deadline = time.monotonic() + 10
        while _mapped_kb(vectors) > 0:
            assert time.monotonic() < deadline, "no trim after the server went idle"
            time.sleep(0.1)
        assert server.idle_trim is not None and server.idle_trim.trims >= started
        # Still serving afterwards.
        assert httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
    finally:
        server.should_exit = True
        thread.join(30)
        service.index.close()


def test_tool_calls_hold_off_the_trim_until_they_end() -> None:
    async def scenario() -> list[int]:
        calls, released = ToolCalls(), []
        trim = IdleTrim(calls, lambda: released.append(1), seconds=0.05)
        seen = []
        async with asyncio.timeout(5):
            task = asyncio.ensure_future(trim_when_idle(trim, interval=0.01))
            calls.started()  # a long tool call: no trim however long it runs
            await asyncio.sleep(0.2)
            seen.append(trim.trims)
            calls.done()
            await asyncio.sleep(0.2)  # quiet for longer than 0.05 s: one trim
            seen.append(trim.trims)
            await asyncio.sleep(0.1)  # still the same quiet spell: no second trim
            seen.append(len(released))
            task.cancel()
        return seen

    assert asyncio.run(scenario()) == [0, 1, 1]
