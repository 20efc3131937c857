"""Load: 32 MCP clients (the official SDK, Streamable HTTP, 127.0.0.1) search a real
``guaipeca serve`` (bundled model) for a fixed time while another client uploads and indexes
documents. No request may fail (429s from the rate limit are counted apart); every hit must
be an exact span of a document as it was written (never a half-written state); uploads are
searchable as soon as they return. Reports p50/p95/p99 latency and throughput."""

from __future__ import annotations

import base64
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import free_port
from support.reliability import (
    SCRIPT,
    doc_text,
    drain,
    folder_state,
    marker,
    report,
    scaled,
    start_server,
)

pytestmark = pytest.mark.slow  # load: a real server under concurrent clients

CLIENTS = 32
WORDS = ["river stone", "glacier ember", "quartz beacon harbor", "meadow copper", "signal canyon"]


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.rate_limited = 0
        self.bad_hits: list[str] = []
        self.hits_checked = 0


def _check_hits(result: Any, known: dict[str, str], tally: Tally) -> None:
    for hit in result.structured_content["hits"]:
        text = known.get(hit["doc_id"])
        tally.hits_checked += 1
        if text is None or text[hit["start"] : hit["end"]] != hit["text"]:
            tally.bad_hits.append(f"{hit['chunk_id']} of {hit['doc_id']}")


async def _searcher(
    url: str, seed: int, deadline: float, known: dict[str, str], tally: Tally
) -> None:
    rng = random.Random(seed)
    names = sorted(known)
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as mcp,
    ):
        while time.monotonic() < deadline:
            query = rng.choice(WORDS) if rng.random() < 0.6 else marker(rng.choice(names))
            started = time.perf_counter()
            try:
                result = await mcp.call_tool("search", {"query": query, "top_k": 10})
            except Exception as exc:
                if "429" in str(exc):
                    tally.rate_limited += 1
                else:
                    tally.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            tally.latencies.append(time.perf_counter() - started)
            if result.is_error:
                text = str(result.content[0].text if result.content else "")
                if "rate limit" in text.lower() or "429" in text:
                    tally.rate_limited += 1
                else:
                    tally.failures.append(text[:200])
                continue
            _check_hits(result, known, tally)


async def _uploader(
    url: str, deadline: float, plan: list[tuple[str, str]], done: list[str], tally: Tally
) -> None:
    async with (
        httpx2.AsyncClient(timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as mcp,
    ):
        for name, text in plan:
            if time.monotonic() >= deadline:
                break
            content = base64.b64encode(text.encode("utf-8")).decode("ascii")
            result = await mcp.call_tool(
                "upload", {"corpus": "docs", "filename": name, "content_base64": content}
            )
            if result.is_error:
                tally.failures.append(f"upload {name}: {result.content}")
                continue
            done.append(name)
            found = await mcp.call_tool(
                "search", {"query": marker(name), "top_k": 3, "mode": "keyword"}
            )
            if name not in {h["doc_id"] for h in found.structured_content["hits"]}:
                tally.failures.append(f"{name}: not searchable right after its upload returned")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def test_32_clients_search_while_one_uploads(tmp_path: Path) -> None:
    seconds = scaled(10, 60)
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    rng = random.Random(4)
    for i in range(40):
        name = f"base-{i}.md"
        (folder / name).write_text(doc_text(rng, name, 1), encoding="utf-8")
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\nupload:\n  allow: [docs]\n"
        "server:\n  rate_limit_rps: 5000\n  rate_limit_burst: 5000\n  max_concurrent_searches: 8\n"
        # 32 clients and an uploader share one token: more sessions than one identity's
        # default budget (the budget is tested in test_budgets.py)
        "  max_sessions_per_identity: 64\n",
        encoding="utf-8",
    )
    plan = [(f"load-{k}.md", doc_text(rng, f"load-{k}.md", 1, paragraphs=4)) for k in range(400)]
    known = {**folder_state(folder), **dict(plan)}
    env = {**os.environ, "GUAIPECA_HOME": str(home)}
    first = subprocess.run(
        [str(SCRIPT), "index"], env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr
    port = free_port()
    server = start_server(home, port)
    url = f"http://127.0.0.1:{port}/mcp"
    tally, uploaded = Tally(), []

    async def main() -> float:
        started = time.monotonic()
        deadline = started + seconds
        with anyio.fail_after(seconds + 300):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_uploader, url, deadline, plan, uploaded, tally)
                for c in range(CLIENTS):
                    tg.start_soon(_searcher, url, c, deadline, known, tally)
        return time.monotonic() - started

    try:
        elapsed = anyio.run(main)
    finally:
        server.terminate()
        server.wait(60)
        _, err = drain(server)
    assert "Traceback" not in err
    served = len(tally.latencies)
    figures = {
        "clients": CLIENTS,
        "seconds": round(elapsed, 1),
        "searches_served": served,
        "failed": len(tally.failures),
        "rate_limited_429": tally.rate_limited,
        "throughput_per_s": round(served / elapsed, 1),
        "p50_ms": round(_percentile(tally.latencies, 0.50), 1),
        "p95_ms": round(_percentile(tally.latencies, 0.95), 1),
        "p99_ms": round(_percentile(tally.latencies, 0.99), 1),
        "hits_checked": tally.hits_checked,
        "hits_from_half_written_state": len(tally.bad_hits),
        "uploads_indexed": len(uploaded),
    }
    report("load", **figures)
    assert tally.failures == []
    assert tally.bad_hits == []
    assert served > CLIENTS and uploaded
