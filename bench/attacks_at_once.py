"""Every attack of issue 29 at once against a real ``guaipeca serve --transport http``
(issue 29, "Done when": server RSS stays under idle + 300 MB and /health answers within 1 s
throughout).

    PYTHONPATH=src nice -n 10 .venv/bin/python bench/attacks_at_once.py \
        [--seconds 60] [--docs 150] [--chars 150000] [--provider static|bundled]
        [--only abandoned_searches,slowloris,...]
        [--out bench/results/attacks-at-once.json]

The server runs on 127.0.0.1 with auth on (a static token and a JWT secret, so any number of
identities), uploads on, OCR as installed, the rate limit raised (5000/s: the budgets behind
it are what is attacked), and ``--docs`` Markdown files of ``--chars`` characters indexed
(``--provider``: the bundled static model by default, so a corpus big enough for a search
to outlast 3 s indexes in a minute).
Idle RSS (``VmRSS``) is read once indexing is done. Then, at the same time and each bounded
in count and in time: image-bomb PNG (and PDF) uploads, a speckle "scan" PDF read with OCR,
lying zip-bomb DOCX uploads, a flood of MCP ``initialize`` from one identity, many event
streams (``GET /sse`` and ``GET /mcp``) from one identity, rounds of 8 heavy searches
(``top_k=100``, documents) whose clients leave after 3 s, wrong-token floods from two
loopback addresses, deeply nested JSON bodies and slowloris connections. Meanwhile /health
is polled every 0.2 s (latency, failures) and the server's RSS sampled every 0.2 s (and its
``VmHWM``, reset before the attacks, read at the end: a peak between samples counts too).
The attacks are those of ``tests/reliability/test_attacks.py`` and ``test_budgets.py``,
whose builders this script imports.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import jwt
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from reliability.test_attacks import lying_docx
from support import free_port
from support.http import MCP_HEADERS, initialize_message
from support.images import bomb_pdf, bomb_png
from support.reliability import (
    doc_text,
    peak_rss_of,
    reset_peak_rss,
    start_server,
)

TOKEN = "attack-bench-token-0123456789abcdef"
JWT_SECRET = "attack-bench-jwt-secret-0123456789abcdef-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MCP = MCP_HEADERS
INIT = initialize_message("attacks-at-once")
HEAVY = {"query": "river stone", "top_k": 100, "return_mode": "documents", "max_chars": 400_000}
MIB = 2**20


def as_user(name: str) -> dict[str, str]:
    claims = {"sub": name, "exp": int(time.time()) + 3600}
    return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def tree_rss(pid: int) -> int:
    """RSS of the server and its child processes (converters, Tesseract)."""
    total = 0
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
    return total


def speckle_pdf(pages: int = 2) -> bytes:
    """An A4 PDF of random black-and-white speckle per page, no text layer (a bad scan)."""
    import pymupdf
    from PIL import Image

    rng = random.Random(29)
    doc = pymupdf.open()
    for _ in range(pages):
        noise = Image.frombytes("1", (1240, 1754), rng.randbytes(1240 * 1754 // 8))
        buf = io.BytesIO()
        noise.save(buf, format="PNG")
        page = doc.new_page(width=595, height=842)
        page.insert_image(page.rect, stream=buf.getvalue())
    return bytes(doc.tobytes(garbage=3, deflate=True))


def read_log(server: subprocess.Popen[str], into: list[str]) -> None:
    assert server.stderr is not None
    for line in server.stderr:
        into.append(line)


def make_home(root: Path, docs: int, chars: int, provider: str) -> Path:
    folder, home = root / "docs", root / "home"
    folder.mkdir()
    home.mkdir()
    rng = random.Random(29)
    for i in range(docs):
        name = f"doc-{i}.md"
        (folder / name).write_text(doc_text(rng, name, 1, paragraphs=chars // 500), "utf-8")
    (home / "guaipeca.yaml").write_text(
        f"embedding:\n  provider: {provider}\n"
        f"corpora:\n  - name: docs\n    path: {folder}\nupload:\n  allow: [docs]\n"
        f"server:\n  auth_token: {TOKEN}\n  jwt_secret: {JWT_SECRET}\n"
        "  rate_limit_rps: 5000\n  rate_limit_burst: 5000\n  idle_trim_seconds: 1\n",
        encoding="utf-8",
    )
    return home


class Outcomes:
    """Per attack: a count of each outcome (an HTTP status, or what the connection did)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.notes: dict[str, dict[str, Any]] = collections.defaultdict(dict)

    def add(self, attack: str, outcome: int | str) -> None:
        with self.lock:
            self.counts[attack][str(outcome)] += 1

    def http(self, attack: str, send: Callable[[], httpx2.Response]) -> httpx2.Response | None:
        try:
            answer = send()
        except httpx2.TimeoutException:
            self.add(attack, "client_timeout")
            return None
        except httpx2.TransportError as e:
            self.add(attack, type(e).__name__)
            return None
        self.add(attack, answer.status_code)
        return answer


class Attacks:
    """Each method is one attack, bounded in count and stopped at the deadline."""

    def __init__(self, url: str, port: int, seconds: float, out: Outcomes) -> None:
        self.url, self.port, self.out = url, port, out
        self.deadline = time.monotonic() + seconds
        self.stop = threading.Event()

    def live(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    def upload(self, attack: str, name: str, data: bytes, who: dict[str, str], t: float) -> None:
        answer = self.out.http(
            attack,
            lambda: httpx2.put(
                f"{self.url}/api/upload?corpus=docs&filename={name}",
                content=data,
                headers=who,
                timeout=t,
            ),
        )
        notes = self.out.notes[attack]
        if answer is not None and answer.status_code >= 400 and "first_error" not in notes:
            notes["first_error"] = answer.text[:300]

    def image_bombs(self) -> None:
        png, pdf = bomb_png(), bomb_pdf()
        for k in range(6):
            if not self.live():
                return
            data, name = (pdf, f"bomb-{k}.pdf") if k % 3 == 2 else (png, f"bomb-{k}.png")
            self.upload("image_bomb", name, data, as_user(f"img-{k % 2}"), 60)

    def speckle_ocr(self) -> None:
        data = speckle_pdf()
        self.out.notes["speckle_ocr"]["pdf_bytes"] = len(data)
        started = time.monotonic()
        self.upload("speckle_ocr", "speckle.pdf", data, as_user("scanner"), 80)
        self.out.notes["speckle_ocr"]["seconds"] = round(time.monotonic() - started, 2)

    def zip_bombs(self) -> None:
        data = lying_docx()
        for k in range(3):
            if self.live():
                self.upload("zip_bomb_docx", f"zip-{k}.docx", data, as_user(f"zip-{k}"), 60)

    def initialize_flood(self) -> None:
        who = {**MCP, **as_user("flooder")}
        with httpx2.Client(timeout=10) as http:
            for _ in range(400):
                if not self.live():
                    return
                self.out.http(
                    "mcp_initialize_flood",
                    lambda: http.post(f"{self.url}/mcp", json=INIT, headers=who),
                )

    def raw(self, request: bytes) -> socket.socket | None:
        """A socket that sent ``request``; its status code is recorded under ``streams``."""
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.sendall(request)
            head = sock.recv(256)
        except OSError as e:
            self.out.add("event_streams", type(e).__name__)
            return None
        status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "closed"
        self.out.add("event_streams", status)
        return sock

    def streams(self) -> None:
        who = as_user("streamer")
        bearer = who["Authorization"]
        with httpx2.Client(timeout=10) as http:
            answer = http.post(f"{self.url}/mcp", json=INIT, headers={**MCP, **who})
            sid = answer.headers.get("mcp-session-id", "none")
        held: list[socket.socket] = []
        host = f"Host: 127.0.0.1:{self.port}\r\nAuthorization: {bearer}\r\n"
        sse = f"GET /sse HTTP/1.1\r\n{host}Accept: text/event-stream\r\n\r\n".encode()
        get_mcp = (
            f"GET /mcp HTTP/1.1\r\n{host}Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
            "Mcp-Protocol-Version: 2025-06-18\r\n\r\n"
        ).encode()
        try:
            for k in range(300):
                if not self.live():
                    break
                sock = self.raw(sse if k % 2 == 0 else get_mcp)
                if sock is not None:
                    held.append(sock)
            while self.live():
                time.sleep(0.5)
        finally:
            for sock in held:
                sock.close()

    def abandoned_searches(self) -> None:
        def leave_after_3s(k: int) -> None:
            self.out.http(
                "abandoned_search",
                lambda: httpx2.post(
                    f"{self.url}/api/tools/search", json=HEAVY, headers=as_user(f"s-{k}"), timeout=3
                ),
            )

        for _ in range(3):
            if not self.live():
                return
            clients = [threading.Thread(target=leave_after_3s, args=(k,)) for k in range(8)]
            for c in clients:
                c.start()
            for c in clients:
                c.join()
            time.sleep(2)

    def wrong_tokens(self, address: str) -> None:
        transport = httpx2.HTTPTransport(local_address=address)
        with httpx2.Client(base_url=self.url, transport=transport, timeout=10) as guesser:
            for k in range(300):
                if not self.live():
                    return
                self.out.http(
                    "wrong_token_flood",
                    lambda k=k: guesser.get("/tools", headers={"Authorization": f"Bearer w-{k}"}),
                )

    def nested_json(self) -> None:
        headers = {**as_user("nester"), "Content-Type": "application/json"}
        with httpx2.Client(base_url=self.url, timeout=20) as http:
            for k in range(60):
                if not self.live():
                    return
                depth = (5_000, 50_000, 200_000)[k % 3]
                body = '{"query": "river", "where": {"a": ' + "[" * depth + "]" * depth + "}}"
                self.out.http(
                    "deep_json",
                    lambda b=body: http.post("/api/tools/search", content=b, headers=headers),
                )

    def slowloris(self) -> None:
        """150 connections that send request headers one short line a second."""
        open_: list[tuple[socket.socket, float]] = []
        for _ in range(150):
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                sock.setblocking(False)
                open_.append((sock, time.monotonic()))
            except OSError as e:
                self.out.add("slowloris", f"connect_{type(e).__name__}")
        held_max = 0.0
        while open_ and self.live():
            time.sleep(1)
            still = []
            for sock, since in open_:
                try:
                    sock.send(b"X-a: b\r\n")
                    if sock.recv(1024) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    still.append((sock, since))
                    continue
                except OSError:
                    pass
                held_max = max(held_max, time.monotonic() - since)
                self.out.add("slowloris", "closed_by_server")
                sock.close()
            open_ = still
        for sock, since in open_:
            held_max = max(held_max, time.monotonic() - since)
            self.out.add("slowloris", "still_open_at_end")
            sock.close()
        self.out.notes["slowloris"]["longest_held_s"] = round(held_max, 1)


class Watch:
    """Polls /health and samples RSS every 0.2 s until stopped."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid
        self.stop = threading.Event()
        self.health: list[float] = []
        self.failures: list[str] = []
        self.rss: list[int] = []
        self.tree: list[int] = []

    def poll_health(self) -> None:
        with httpx2.Client(timeout=5) as http:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    answer = http.get(f"{self.url}/health")
                    seconds = time.monotonic() - started
                    if answer.status_code != 200:
                        self.failures.append(f"{answer.status_code} at {seconds:.2f}s")
                except httpx2.HTTPError as e:
                    seconds = time.monotonic() - started
                    self.failures.append(f"{type(e).__name__} after {seconds:.2f}s")
                self.health.append(seconds)
                self.stop.wait(max(0.0, 0.2 - seconds))

    def sample_rss(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError, RuntimeError):
                self.rss.append(rss(self.pid))
                self.tree.append(tree_rss(self.pid))
            self.stop.wait(0.2)


def wait_indexed(url: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    with httpx2.Client(base_url=url, headers=AUTH, timeout=300) as http:
        http.post("/api/tools/index", json={})
        while time.monotonic() < deadline:
            if not http.post("/api/tools/status", json={}).json().get("pending_chunks"):
                break
            time.sleep(1)
        for _ in range(3):
            http.post("/api/tools/search", json={"query": "river stone"})
            http.post("/api/tools/search", json=HEAVY)


def run(seconds: float, docs: int, chars: int, provider: str, only: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = make_home(Path(tmp), docs, chars, provider)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_server(home, port)
        log: list[str] = []
        reader = threading.Thread(target=read_log, args=(server, log), daemon=True)
        reader.start()  # a full stderr pipe would block the server's logging
        try:
            t0 = time.monotonic()
            wait_indexed(url)
            indexed_s = time.monotonic() - t0
            started = time.monotonic()
            httpx2.post(f"{url}/api/tools/search", json=HEAVY, headers=AUTH, timeout=300)
            heavy_s = time.monotonic() - started
            time.sleep(4)  # idle_trim_seconds: 1
            idle, idle_tree = rss(server.pid), tree_rss(server.pid)
            out = Outcomes()
            attacks = Attacks(url, port, seconds, out)
            watch = Watch(url, server.pid)
            reset_peak_rss(server.pid)
            every: dict[str, Callable[[], None]] = {
                "image_bombs": attacks.image_bombs,
                "speckle_ocr": attacks.speckle_ocr,
                "zip_bombs": attacks.zip_bombs,
                "initialize_flood": attacks.initialize_flood,
                "streams": attacks.streams,
                "abandoned_searches": attacks.abandoned_searches,
                "wrong_tokens": lambda: attacks.wrong_tokens("127.0.0.2"),
                "wrong_tokens_2": lambda: attacks.wrong_tokens("127.0.0.4"),
                "nested_json": attacks.nested_json,
                "slowloris": attacks.slowloris,
            }
            names = [n for n in every if not only or n.removesuffix("_2") in only]
            threads = [threading.Thread(target=every[n], daemon=True) for n in names]
            watchers = [
                threading.Thread(target=watch.poll_health, daemon=True),
                threading.Thread(target=watch.sample_rss, daemon=True),
            ]
            started = time.monotonic()
            for t in watchers + threads:
                t.start()
            for t in threads:
                t.join(max(1.0, seconds + 30 - (time.monotonic() - started)))
            attacks.stop.set()
            for t in threads:
                t.join(30)
            wall = time.monotonic() - started
            time.sleep(1)
            watch.stop.set()
            for t in watchers:
                t.join(10)
            hwm = peak_rss_of(server.pid)
            alive = server.poll() is None
            after = rss(server.pid) if alive else 0
            hung = [n for n, t in zip(names, threads, strict=True) if t.is_alive()]
        finally:
            stopping = time.monotonic()
            server.terminate()
            try:
                server.wait(60)
                stop_s: float | None = round(time.monotonic() - stopping, 1)
            except subprocess.TimeoutExpired:
                stop_s = None  # did not stop within 60 s of SIGTERM
                server.kill()
                server.wait(30)
            reader.join(10)
            err = "".join(log)
    peak = max([*watch.rss, hwm])
    health_max = max(watch.health, default=float("nan"))
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        },
        "corpus": {"docs": docs, "chars_each": chars, "embedding": provider},
        "indexed_s": round(indexed_s, 1),
        "attacks": names,
        "attack_window_s": seconds,
        "wall_s": round(wall, 1),
        "idle_rss_mb": round(idle / MIB, 1),
        "peak_rss_mb": round(peak / MIB, 1),
        "peak_minus_idle_mb": round((peak - idle) / MIB, 1),
        "peak_rss_sampled_mb": round(max(watch.rss, default=0) / MIB, 1),
        "peak_rss_vmhwm_mb": round(hwm / MIB, 1),
        "idle_tree_rss_mb": round(idle_tree / MIB, 1),
        "peak_tree_rss_mb": round(max(watch.tree, default=0) / MIB, 1),
        "rss_after_mb": round(after / MIB, 1),
        "health_polls": len(watch.health),
        "heavy_search_alone_s": round(heavy_s, 2),
        "health_max_s": round(health_max, 3),
        "health_p99_s": round(sorted(watch.health)[int(0.99 * (len(watch.health) - 1))], 3),
        "health_over_1s": sum(1 for s in watch.health if s > 1),
        "health_failures": watch.failures,
        "server_alive": alive,
        "tracebacks_in_log": err.count("Traceback"),
        "log_bytes": len(err),
        "log_tail": [ln for ln in err.splitlines() if "GET /health" not in ln][-12:],
        "sigterm_stop_s": stop_s,
        "attacks_still_running": hung,
        "outcomes": {k: dict(v) for k, v in sorted(out.counts.items())},
        "notes": dict(out.notes),
    }
    result["met_budget"] = bool(
        alive and peak - idle < 300 * MIB and health_max < 1 and not watch.failures
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="attack window")
    parser.add_argument("--docs", type=int, default=150)
    parser.add_argument("--chars", type=int, default=150_000)
    parser.add_argument("--provider", default="static", help="embedding.provider of the server")
    parser.add_argument("--only", default="", help="comma-separated attacks (default: all)")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    result = run(a.seconds, a.docs, a.chars, a.provider, [n for n in a.only.split(",") if n])
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
