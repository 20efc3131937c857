"""Crash safety: a child process writes to an index and is killed with SIGKILL at a random
moment, over and over on the same index. After every kill the index opens, passes its
integrity check, holds every document whose write had returned, and each document of the
interrupted write is wholly old or wholly new. Three paths: the library, the real CLI
(``guaipeca index``, bundled model) and the real server (``upload`` over Streamable HTTP)."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from support import MemoEmbedder, free_port
from support.reliability import (
    SCRIPT,
    assert_index_holds,
    doc_text,
    drain,
    folder_state,
    kill,
    marker,
    report,
    scaled,
    start_server,
    wait_for_line,
)

pytestmark = pytest.mark.slow  # crash loops: real processes killed again and again

DRIVER = Path(__file__).with_name("driver_library.py")


def _replay(lines: list[str], state: dict[str, str]) -> tuple[int, dict[str, str | None] | None]:
    """Apply every acknowledged operation to ``state``; return how many, and the docs of the
    operation that was running when the child died (None if it died between operations)."""
    done, current = 0, None
    for line in lines:
        if line.startswith("begin "):
            current = json.loads(line[len("begin ") :])["docs"]
        elif line == "done" and current is not None:
            for doc_id, text in current.items():
                if text is None:
                    state.pop(doc_id, None)
                else:
                    state[doc_id] = text
            done, current = done + 1, None
    return done, current


def test_library_writes_survive_sigkill(tmp_path: Path) -> None:
    kills = scaled(20, 150)
    rng = random.Random(20261203)
    path = tmp_path / "index"
    state: dict[str, str] = {}
    ops = killed = mid_write = in_write = 0
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(path), str(rng.randrange(2**31))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_line(proc, "ready")
        # Read while the child runs: a full pipe would stall it in print(), not in a write.
        lines: list[str] = []
        reader = threading.Thread(target=lines.extend, args=(proc.stdout or (),))
        reader.start()
        time.sleep(rng.uniform(0.0, 1.0))
        was_killed = kill(proc)
        killed += was_killed
        in_write += was_killed and _marked_dirty(path / "corpora" / "default" / "lexical.state")
        reader.join(30)
        _, err = drain(proc)
        assert "Traceback" not in err, err
        # A line cut by the kill has no newline: a cut "begin" never started its operation.
        done, current = _replay([x.rstrip("\n") for x in lines if x.endswith("\n")], state)
        ops += done
        in_flight = {d: (state.get(d), t) for d, t in (current or {}).items()}
        mid_write += current is not None
        acknowledged: dict[str, str | None] = {k: v for k, v in state.items() if k not in in_flight}
        with Index(path, embedder=HashingEmbedder()) as index:
            found = assert_index_holds(index, acknowledged, in_flight)
        for doc_id, text in found.items():
            if text is None:
                state.pop(doc_id, None)
            else:
                state[doc_id] = text
    assert killed >= kills * 0.9  # the kills really landed while the child was running
    report(
        "crash-library",
        kills=killed,
        survived=killed,
        tried=kills,
        killed_during_an_operation=mid_write,
        killed_inside_write=in_write,
        acknowledged_operations=ops,
        documents_at_end=len(state),
    )


# -- the real CLI and the real server (bundled model) ----------------------------------------


def _mutate(rng: random.Random, folder: Path, round_no: int) -> None:
    """New files, an edited one and a removed one, as a user's folder changes."""
    files = sorted(folder.glob("*.md"))
    for k in range(rng.randint(1, 3)):
        name = f"r{round_no}-{k}.md"
        (folder / name).write_text(doc_text(rng, name, 1), encoding="utf-8")
    if files and rng.random() < 0.5:
        edited = rng.choice(files)
        edited.write_text(doc_text(rng, edited.name, round_no), encoding="utf-8")
    if len(files) > 8 and rng.random() < 0.4:
        rng.choice(files).unlink()


def _check_against_folder(
    index: Index, state: dict[str, str], disk: dict[str, str], finished: bool
) -> dict[str, str | None]:
    """Unchanged files must be indexed as they were; files that changed since the last
    check are old or new (only new when the run finished)."""
    in_flight: dict[str, tuple[str | None, str | None]] = {}
    acknowledged: dict[str, str | None] = {}
    for doc_id in set(state) | set(disk):
        old, new = state.get(doc_id), disk.get(doc_id)
        if old == new:
            acknowledged[doc_id] = old
        elif finished:
            acknowledged[doc_id] = new
        else:
            in_flight[doc_id] = (old, new)
    return assert_index_holds(index, acknowledged, in_flight)


def _marked_dirty(state_file: Path) -> bool:
    """True when the kill landed inside the write protocol (the lexical marker is dirty)."""
    try:
        return json.loads(state_file.read_text()).get("clean") is not True
    except (OSError, ValueError):
        return False


def test_cli_index_survives_sigkill(tmp_path: Path, real_embedder: MemoEmbedder) -> None:
    kills = scaled(6, 100)
    rng = random.Random(8)
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    env = {**os.environ, "GUAIPECA_HOME": str(home)}
    state: dict[str, str] = {}
    killed = finished = in_write = 0
    full_run = 0.0  # how long an uninterrupted run takes; kills land across it
    marker_file = home / "data" / "index" / "corpora" / "default" / "lexical.state"
    round_no = 0
    while killed < kills:
        round_no += 1
        _mutate(rng, folder, round_no)
        disk = folder_state(folder)
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(SCRIPT), "index", "--path", str(folder)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if round_no % 3 == 1:  # every third run finishes: it times a run, drains the backlog
            proc.wait(120)
            full_run = time.monotonic() - started
        else:
            time.sleep(rng.uniform(0.3, 1.1) * full_run)
        was_killed = kill(proc)
        _, err = drain(proc)
        killed += was_killed
        in_write += was_killed and _marked_dirty(marker_file)
        if not was_killed:
            assert proc.returncode == 0, err
            finished += 1
        assert "Traceback" not in err, err
        with Index(home / "data" / "index", embedder=real_embedder) as index:
            found = _check_against_folder(index, state, disk, finished=not was_killed)
        state = {k: v for k, v in found.items() if v is not None}
    done = subprocess.run(
        [str(SCRIPT), "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report(
        "crash-cli",
        kills=killed,
        survived=killed,
        killed_inside_write=in_write,
        runs=round_no,
        finished_runs=finished,
        documents_at_end=len(state),
    )


async def _upload_until_killed(
    port: int, rng: random.Random, trial: int, acked: dict[str, str]
) -> None:
    """Upload new files one after another until the server dies under us."""
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        Client(
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), mode="legacy"
        ) as mcp,
    ):
        for k in range(1000):
            name = f"up{trial}-{k}.md"
            text = doc_text(rng, name, 1, paragraphs=rng.randint(1, 6))
            content = base64.b64encode(text.encode("utf-8")).decode("ascii")
            result = await mcp.call_tool(
                "upload", {"corpus": "docs", "filename": name, "content_base64": content}
            )
            assert not result.is_error, result.content
            acked[name] = text


def test_server_upload_survives_sigkill(tmp_path: Path, real_embedder: MemoEmbedder) -> None:
    kills = scaled(6, 100)
    rng = random.Random(77)
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\nupload:\n  allow: [docs]\n"
        "server:\n  rate_limit_rps: 1000\n  rate_limit_burst: 1000\n",
        encoding="utf-8",
    )
    state: dict[str, str] = {}
    killed = in_write = uploads = 0
    marker_file = home / "data" / "index" / "corpora" / "docs" / "lexical.state"
    for trial in range(kills):
        port = free_port()
        proc = start_server(home, port)
        acked: dict[str, str] = {}
        timer = threading.Timer(rng.uniform(0.2, 4.0), kill, args=(proc,))
        timer.start()
        try:
            anyio.run(_upload_until_killed, port, rng, trial, acked)
        except Exception:  # the connection breaks when the server dies: expected
            pass
        finally:
            timer.join()
        assert proc.returncode is not None
        killed += proc.returncode == -signal.SIGKILL
        in_write += _marked_dirty(marker_file)
        _, err = drain(proc)
        assert "Traceback" not in err, err
        uploads += len(acked)
        disk = folder_state(folder)
        acknowledged: dict[str, str | None] = {}
        in_flight: dict[str, tuple[str | None, str | None]] = {}
        for doc_id in set(state) | set(disk):
            old, new = state.get(doc_id), disk.get(doc_id)
            if doc_id in acked:
                assert new == acked[doc_id]
                acknowledged[doc_id] = new
            elif old == new:
                acknowledged[doc_id] = old
            else:
                in_flight[doc_id] = (old, new)
        with Index(home / "data" / "index", embedder=real_embedder) as index:
            found = assert_index_holds(index, acknowledged, in_flight, corpus="docs")
        state = {k: v for k, v in found.items() if v is not None}
    report(
        "crash-server-upload",
        kills=killed,
        survived=killed,
        tried=kills,
        killed_inside_write=in_write,
        uploads_acknowledged=uploads,
        documents_at_end=len(state),
    )


# -- progressive indexing: kills in the keyword phase and in the embedding phase --------------

PROGRESSIVE_DRIVER = Path(__file__).with_name("driver_progressive.py")


def test_progressive_phases_survive_sigkill(tmp_path: Path) -> None:
    """A child commits documents for keyword search, then embeds them round by round, and
    is killed at random. After each kill: the index passes its check, every document whose
    keyword commit was announced is there and found by keyword, no chunk whose vector was
    announced has lost it, and the next process finishes the embedding phase by itself."""
    kills = scaled(12, 100)
    rng = random.Random(2112)
    path = tmp_path / "index"
    state: dict[str, str] = {}
    killed = 0
    embedded_floor = 0
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, str(PROGRESSIVE_DRIVER), str(path), str(rng.randrange(2**31))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_line(proc, "ready")
        lines: list[str] = []
        reader = threading.Thread(target=lines.extend, args=(proc.stdout or (),))
        reader.start()
        time.sleep(rng.uniform(0.1, 1.5))
        killed += kill(proc)
        reader.join(30)
        _, err = drain(proc)
        assert "Traceback" not in err, err
        current: dict[str, str] = {}
        for line in (x.rstrip("\n") for x in lines if x.endswith("\n")):
            if line.startswith("begin "):
                current = json.loads(line[len("begin ") :])
            elif line == "keyword":
                state.update(current)
                current = {}
            elif line.startswith("embedded "):
                embedded_floor = max(embedded_floor, int(line.split()[1]))
        with Index(path, embedder=HashingEmbedder()) as index:
            stats = index.stats()
            # No finished vector is lost (the driver only adds, so the count never shrinks).
            assert stats.chunks - stats.pending_chunks >= embedded_floor
            # Every committed document is there and found by keyword, vectors or not; the
            # documents of a keyword commit cut by the kill are all there or all absent.
            in_flight: dict[str, tuple[str | None, str | None]] = {
                d: (None, t) for d, t in current.items()
            }
            found = assert_index_holds(index, dict(state), in_flight)
            assert len({found[d] is None for d in current}) <= 1
            state.update({d: t for d, t in found.items() if t is not None})
            embedded_floor = stats.chunks - stats.pending_chunks
    # The pending work resumes in the next process and completes: every chunk has a vector
    # (each hit says so), and the check finds every vector sound.
    with Index(path, embedder=HashingEmbedder()) as index:
        index.embed_pending()
        stats = index.stats()
        assert stats.pending_chunks == 0
        for doc_id in sorted(state)[:20]:
            hits = index.search(marker(doc_id), mode="keyword", top_k=5)
            assert hits and all(h.embedded for h in hits)
        assert len(index.search("river stone", mode="dense", top_k=5)) == 5
        assert index.verify().ok
    assert killed >= kills * 0.9
    report("crash-progressive", kills=killed, documents_at_end=len(state), chunks=stats.chunks)
