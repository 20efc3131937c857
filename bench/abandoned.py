"""Abandoned searches (issue 29, item 9): do searches whose clients left still hold the
search slots?

    PYTHONPATH=src .venv/bin/python bench/abandoned.py [--docs 200] [--chars 40000]
        [--transport mcp|api] [--load 0|2] [--out bench/results/abandoned.json] [--label X]

A real server (``make_server``, what ``guaipeca serve`` runs) on 127.0.0.1 over a corpus of
``--docs`` Markdown files of ``--chars`` characters each, indexed with the hashing embedder
(the dense model is not what this measures). Eight clients send a search with
``top_k=100`` and ``return_mode="documents"`` (``max_chars`` 400,000) and leave after 3 s;
2 s later a plain search (``top_k=5``) is sent. Reported: how long that plain search took,
and when the first answer came after the clients left. ``--load 2`` runs two busy
processes alongside (a loaded 2-core machine). Run it with ``PYTHONPATH`` at an older
checkout to measure the code before the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service
from guaipeca.server.http import make_server

WORDS = ("river", "stone", "cedar", "lantern", "harbor", "meadow")
WORDS += ("copper", "violet", "falcon", "orchard", "glacier", "ember")  # as measured
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HEAVY = {"query": "river stone", "top_k": 100, "return_mode": "documents", "max_chars": 400_000}


def build(root: Path, docs: int, chars: int) -> Service:
    folder = root / "docs"
    folder.mkdir(parents=True)
    rng = random.Random(7)
    for i in range(docs):
        paras = [
            f"## Part {p}\n\n" + " ".join(rng.choice(WORDS) for _ in range(80))
            for p in range(chars // 500)
        ]
        (folder / f"doc-{i}.md").write_text(f"# Doc {i}\n\n" + "\n\n".join(paras) + "\n")
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(folder)}],
            "storage": {"data_dir": str(root / "data")},
            "server": {"rate_limit_rps": 1000, "rate_limit_burst": 1000},
        },
        env={},
        cwd=root,
    )
    index = Index(root / "data" / "index", embedder=HashingEmbedder(), settings=settings.engine())
    service = Service(index, LoadedSettings(settings, None, root / "data"))
    service.reindex("docs")
    assert service.index.wait_for_embedding(600)
    return service


def mcp_session(url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    answer = httpx2.post(f"{url}/mcp", json=init, headers=ACCEPT, timeout=30)
    session = {**ACCEPT, "Mcp-Session-Id": answer.headers["mcp-session-id"]}
    session["Mcp-Protocol-Version"] = "2025-06-18"
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx2.post(f"{url}/mcp", json=done, headers=session, timeout=30)
    return session


def search(url: str, transport: str, args: dict[str, Any], timeout: float) -> float:
    """Seconds until the answer (or a refusal) came; the client leaves at ``timeout``
    (raises ``httpx2.TimeoutException``)."""
    started = time.monotonic()
    if transport == "api":
        httpx2.post(f"{url}/api/tools/search", json=args, timeout=timeout)
    else:
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "search", "arguments": args}
        session = mcp_session(url)
        httpx2.post(f"{url}/mcp", json=call, headers=session, timeout=timeout)
    return time.monotonic() - started


def scenario(url: str, transport: str) -> dict[str, Any]:
    def leave_after_3s() -> None:
        with contextlib.suppress(httpx2.TimeoutException):
            search(url, transport, HEAVY, 3.0)

    clients = [threading.Thread(target=leave_after_3s) for _ in range(8)]
    started = time.monotonic()
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    left = time.monotonic()
    time.sleep(max(0.0, started + 5.0 - time.monotonic()))  # 2 s after they left
    try:
        plain = search(url, transport, {"query": "river", "top_k": 5}, 120.0)
        answer = time.monotonic() - left
    except httpx2.TimeoutException:
        plain, answer = float("nan"), float("nan")
    return {
        "clients_left_s": round(left - started, 2),
        "plain_search_s": round(plain, 2),
        "first_answer_after_left_s": round(answer, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--chars", type=int, default=40_000)
    parser.add_argument("--transport", choices=["mcp", "api"], default="mcp")
    parser.add_argument("--load", type=int, default=0, help="busy processes alongside")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--label", help="what code was measured (kept in the results line)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        service = build(Path(tmp), a.docs, a.chars)
        print(f"indexed in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        server = make_server(service, "127.0.0.1", 0)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not (server.started and server.servers):
            time.sleep(0.05)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)
        ]
        try:
            timed = search(url, a.transport, HEAVY, 300.0)
            result = scenario(url, a.transport)
        finally:
            for b in burners:
                b.kill()
            server.should_exit = True
            thread.join(60)
            service.index.close()
    out = {"docs": a.docs, "chars": a.chars, "transport": a.transport, "load": a.load}
    out |= {"label": a.label} if a.label else {}
    out |= {"one_heavy_search_s": round(timed, 2), **result}
    print(json.dumps(out))
    if a.out:
        with a.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
