"""Memory pressure: the HTTP server (the same app as ``guaipeca serve``, with the bundled
model for queries) under ``ulimit -v 1G`` (RLIMIT_AS: stricter than systemd's MemoryMax,
which counts resident memory only) keeps serving searches over a large index — 100k chunks
in the long run — and its query cache, which reads the process's own limit, shrinks when
the process nears it."""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import free_port
from support.reliability import drain, report, scaled, wait_for_line

pytestmark = pytest.mark.slow  # memory: a real server indexing thousands of chunks under a limit

DRIVER = Path(__file__).with_name("driver_server.py")
LIMIT = 1 << 30  # 1 GiB of address space


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_serves_under_a_one_gigabyte_limit(tmp_path: Path) -> None:
    chunks, seconds, clients = scaled(5_000, 100_000), scaled(6, 40), 16
    built = subprocess.run(
        [sys.executable, str(DRIVER), "build", str(tmp_path), str(chunks)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, built.stderr
    indexed = int(built.stdout.split()[-1])
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(DRIVER), "serve", str(tmp_path), str(port)],
        # The settings docs/reliability.md gives for an address-space limit: one OpenBLAS
        # thread (each reserves big buffers) and two malloc arenas.
        env={**os.environ, "MALLOC_ARENA_MAX": "2", "OPENBLAS_NUM_THREADS": "1"},
        preexec_fn=_limit_memory,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_line(server, "ready", timeout=120)
    cache_lines: list[str] = []
    threading.Thread(target=lambda: cache_lines.extend(server.stdout), daemon=True).start()  # type: ignore[arg-type]
    peak = {"rss": 0, "vms": 0}
    served, failed = [0], []

    def sample() -> None:
        proc = psutil.Process(server.pid)
        while server.poll() is None:
            try:
                info = proc.memory_info()
            except psutil.Error:
                return
            peak["rss"], peak["vms"] = max(peak["rss"], info.rss), max(peak["vms"], info.vms)
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()

    async def client(seed: int, deadline: float) -> None:
        rng = random.Random(seed)
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                mode="legacy",
            ) as mcp,
        ):
            while time.monotonic() < deadline:
                # Unique queries: every one is a cache miss that the cache must then hold.
                query = f"river stone {rng.random():.12f} doc{rng.randrange(1000)}"
                try:
                    result = await mcp.call_tool("search", {"query": query, "top_k": 10})
                except Exception as exc:
                    failed.append(f"{type(exc).__name__}: {exc}")
                    continue
                if result.is_error:
                    failed.append(str(result.content)[:200])
                else:
                    served[0] += 1

    async def main() -> None:
        deadline = time.monotonic() + seconds
        with anyio.fail_after(seconds + 120):
            async with anyio.create_task_group() as tg:
                for c in range(clients):
                    tg.start_soon(client, c, deadline)

    try:
        anyio.run(main)
        alive = server.poll() is None
    finally:
        server.terminate()
        server.wait(60)
        _, err = drain(server)
    assert "Traceback" not in err and "MemoryError" not in err
    sizes = [tuple(map(int, line.split()[1:])) for line in cache_lines if line.startswith("cache")]
    report(
        "memory",
        limit="ulimit -v 1 GiB (RLIMIT_AS)",
        chunks=indexed,
        clients=clients,
        seconds=seconds,
        searches_served=served[0],
        failed=len(failed),
        peak_rss_mb=round(peak["rss"] / 2**20),
        peak_address_space_mb=round(peak["vms"] / 2**20),
        cache_entries_max=max((s[0] for s in sizes), default=0),
        cache_pressure_evictions=max((s[1] for s in sizes), default=0),
    )
    assert alive and failed == [] and served[0] > clients


def test_the_cache_sees_the_process_limit() -> None:
    """Under ``ulimit -v`` the machine may be nearly empty while the process is nearly out
    of address space: the cache's pressure reading must follow the tighter one, and a cache
    under pressure gives back half of its entries."""
    child = """
import resource, numpy as np, psutil
from guaipeca.embed.cache import QueryCache, _system_memory_percent
vms = psutil.Process().memory_info().vms
resource.setrlimit(resource.RLIMIT_AS, (int(vms * 1.05), resource.RLIM_INFINITY))
cache = QueryCache(1000, check_every=10)
for i in range(40):
    cache.put(("m", str(i)), np.ones(4, np.float32))
print(round(_system_memory_percent()), len(cache), cache.pressure_evictions)
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    percent, entries, evictions = map(int, done.stdout.split())
    assert percent > 90
    assert evictions > 0 and entries < 40
