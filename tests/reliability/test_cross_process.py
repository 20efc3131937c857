"""Cross-process safety: the real CLI ``guaipeca index`` runs again and again on the data
folder of a running server while an agent uploads files to it and searches. Each writer
waits for the other (or refuses with a clear message); searches never fail; nothing is
lost and the index passes its check afterwards."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from guaipeca import Index
from guaipeca.store.embedded.lock import read_holder
from support import MemoEmbedder, free_port
from support.reliability import (
    SCRIPT,
    assert_index_holds,
    doc_text,
    drain,
    folder_state,
    report,
    scaled,
    start_server,
)

pytestmark = pytest.mark.slow  # cross-process: several real processes on one index


def _agent(port: int, folder: Path, uploads: int, acked: dict[str, str], errors: list[str]) -> None:
    """Upload files one by one, searching between uploads; record every failure."""

    async def run() -> None:
        rng = random.Random(3)
        async with (
            httpx2.AsyncClient(timeout=300) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                mode="legacy",
            ) as mcp,
        ):
            for k in range(uploads):
                name = f"agent-{k}.md"
                text = doc_text(rng, name, 1, paragraphs=3)
                content = base64.b64encode(text.encode("utf-8")).decode("ascii")
                done = await mcp.call_tool(
                    "upload", {"corpus": "docs", "filename": name, "content_base64": content}
                )
                if done.is_error:
                    errors.append(f"upload {name}: {done.content}")
                else:
                    acked[name] = text
                for q in ("river stone", "glacier ember"):
                    found = await mcp.call_tool("search", {"query": q, "top_k": 5})
                    if found.is_error:
                        errors.append(f"search: {found.content}")

    try:
        anyio.run(run)
    except Exception as exc:  # pragma: no cover - reported through errors
        errors.append(f"{type(exc).__name__}: {exc}")


def test_cli_index_next_to_a_running_server(tmp_path: Path, real_embedder: MemoEmbedder) -> None:
    rounds = scaled(2, 10)
    rng = random.Random(11)
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\nupload:\n  allow: [docs]\n"
        "server:\n  rate_limit_rps: 1000\n  rate_limit_burst: 1000\n",
        encoding="utf-8",
    )
    env = {**os.environ, "GUAIPECA_HOME": str(home)}
    for i in range(5):
        (folder / f"seed-{i}.md").write_text(doc_text(rng, f"seed-{i}.md", 1), encoding="utf-8")
    first = subprocess.run(
        [str(SCRIPT), "index"], env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr
    port = free_port()
    server = start_server(home, port)
    acked: dict[str, str] = {}
    errors: list[str] = []
    agent = threading.Thread(target=_agent, args=(port, folder, scaled(5, 30), acked, errors))
    agent.start()
    waited = refused = 0
    try:
        for r in range(rounds):
            for k in range(3):
                name = f"cli-{r}-{k}.md"
                (folder / name).write_text(doc_text(rng, name, 1), encoding="utf-8")
            done = subprocess.run(
                [str(SCRIPT), "index", "docs"], env=env, capture_output=True, text=True, timeout=600
            )
            assert "Traceback" not in done.stderr
            if done.returncode == 0:
                waited += 1
            else:
                assert "another process is writing" in done.stderr, done.stderr
                refused += 1
        agent.join(600)
    finally:
        server.terminate()
        server.wait(60)
        _, server_err = drain(server)
    assert not agent.is_alive()
    assert errors == []
    assert "Traceback" not in server_err
    final = subprocess.run(
        [str(SCRIPT), "index", "docs"], env=env, capture_output=True, text=True, timeout=600
    )
    assert final.returncode == 0, final.stderr
    check = subprocess.run(
        [str(SCRIPT), "check"], env=env, capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stdout + check.stderr
    disk = folder_state(folder)
    assert set(acked) <= set(disk)
    with Index(home / "data" / "index", embedder=real_embedder) as index:
        assert_index_holds(index, dict(disk), {}, corpus="docs")
    report(
        "cross-process",
        cli_runs=rounds,
        cli_completed=waited,
        cli_refused=refused,
        uploads=len(acked),
        failed_requests=len(errors),
        documents=len(disk),
    )


def test_the_cli_is_told_when_the_server_writes_the_corpus(tmp_path: Path) -> None:
    """The server holds the corpus while it indexes and embeds (frozen there with SIGSTOP,
    so the test does not race it): ``guaipeca index`` names it and exits 1, and with
    ``--wait`` it runs once the server has finished."""
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    rng = random.Random(7)
    for i in range(40):
        (folder / f"s-{i}.md").write_text(doc_text(rng, f"s-{i}.md", 1, paragraphs=3))
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\n", encoding="utf-8"
    )
    env = {**os.environ, "GUAIPECA_HOME": str(home)}
    lock = home / "data" / "index" / "corpora" / "docs" / "writer.lock"
    port = free_port()
    server = start_server(home, port)
    try:
        call = threading.Thread(
            target=httpx2.post,
            args=(f"http://127.0.0.1:{port}/api/tools/index",),
            kwargs={"json": {"corpus": "docs"}, "timeout": 600},
        )
        call.start()
        deadline = time.monotonic() + 300
        while True:  # until the server is frozen while it holds the corpus
            holder = read_holder(lock)
            if holder is not None and holder.pid == server.pid:
                os.kill(server.pid, signal.SIGSTOP)
                holder = read_holder(lock)  # a release clears the file
                if holder is not None and holder.pid == server.pid:
                    break
                os.kill(server.pid, signal.SIGCONT)
            assert time.monotonic() < deadline, "the server never held the corpus"
            time.sleep(0.01)
        try:
            refused = subprocess.run(
                [str(SCRIPT), "index", "docs"], env=env, capture_output=True, text=True, timeout=300
            )
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert refused.returncode == 1
        assert f"another process is writing to corpus 'docs': pid {server.pid}" in refused.stderr
        assert "(guaipeca serve" in refused.stderr and "Traceback" not in refused.stderr
        waited = subprocess.run(
            [str(SCRIPT), "index", "docs", "--wait"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        call.join(600)
    finally:
        server.terminate()
        server.wait(60)
        _, server_err = drain(server)
    assert waited.returncode == 0, waited.stderr
    assert "0 added, 0 changed, 40 unchanged" in waited.stdout
    assert "Traceback" not in server_err
