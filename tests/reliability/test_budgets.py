"""Issue 29, items 3, 4 and 9: every identity gets a budget of MCP sessions, event streams
and search slots, replayed against a real server on 127.0.0.1 with small, bounded counts
(a cap of 5 sessions per identity, not 10,000 sessions). Figures go through ``report``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import resource
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest

from guaipeca.server.limits import reserved_share
from guaipeca.server.streams import connection_budget, raise_open_files_limit, stream_budget
from support import free_port
from support.http import MCP_HEADERS, Served, initialize_message
from support.reliability import SCRIPT, drain, make_service, report

TOKEN = "budget-test-token-0123456789abcdef"
JWT_SECRET = "budget-test-jwt-secret-0123456789abcdef-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MCP = MCP_HEADERS
INIT = initialize_message("budget")
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def as_user(name: str) -> dict[str, str]:
    claims = {"sub": name, "exp": int(time.time()) + 3600}
    return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}


def open_session(url: str, who: dict[str, str]) -> httpx2.Response:
    return httpx2.post(f"{url}/mcp", json=INIT, headers={**MCP, **who}, timeout=30)


def session_headers(answer: httpx2.Response, who: dict[str, str]) -> dict[str, str]:
    assert answer.status_code == 200, answer.text
    sid = answer.headers["mcp-session-id"]
    return {**MCP, **who, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}


def alive(url: str, session: dict[str, str]) -> bool:
    return httpx2.post(f"{url}/mcp", json=PING, headers=session, timeout=30).status_code == 200


@contextlib.contextmanager
def served(tmp_path: Path, **server: Any) -> Iterator[Served]:
    service = make_service(tmp_path, {"auth_token": TOKEN, "jwt_secret": JWT_SECRET, **server}, 3)
    try:
        with Served(service) as live:
            yield live
    finally:
        service.index.close()


# -- 3. MCP sessions -------------------------------------------------------------------------
def test_one_identity_cannot_lock_the_others_out_of_mcp(tmp_path: Path) -> None:
    with served(tmp_path, max_sessions=12, max_sessions_per_identity=5) as live:
        url = live.url
        # 20 initializes from one token: each past the fifth closes the one idle longest.
        mine = [session_headers(open_session(url, AUTH), AUTH) for _ in range(20)]
        still = [alive(url, s) for s in mine]
        assert still == [False] * 15 + [True] * 5
        # Every other identity still gets a session, up to the last free one.
        others = [open_session(url, as_user(f"user-{i}")).status_code for i in range(7)]
        assert others == [200] * 7  # 5 + 7 = 12: the server is full
        # An identity that holds one may not take another's last free session...
        second = session_headers(open_session(url, as_user("user-0")), as_user("user-0"))
        assert alive(url, second)  # ...so its own idle session made room
        # With all of its sessions busy (an open stream each), one more is a 429.
        with contextlib.ExitStack() as streams, httpx2.Client(timeout=30) as http:
            for s in mine[15:]:
                stream = streams.enter_context(http.stream("GET", f"{url}/mcp", headers=s))
                assert stream.status_code == 200
            refused = open_session(url, AUTH)
        assert refused.status_code == 429 and refused.headers["retry-after"]
        message = refused.json()["error"]["message"]
        assert "server.max_sessions_per_identity = 5" in message
    report("mcp_sessions", opened=20, kept=5, other_identities=7, refused_when_busy=1)


def test_initialize_takes_a_rate_limit_token(tmp_path: Path) -> None:
    with served(tmp_path, rate_limit_rps=0.05, rate_limit_burst=3) as live:
        codes = [open_session(live.url, AUTH).status_code for _ in range(5)]
        assert codes[:3] == [200] * 3 and codes[3:] == [429, 429]
        refused = open_session(live.url, AUTH)
        assert "too many requests" in refused.json()["error"]["message"]
        assert int(refused.headers["retry-after"]) >= 1
        assert open_session(live.url, as_user("other")).status_code == 200


def test_idle_sessions_expire(tmp_path: Path) -> None:
    with served(tmp_path, session_idle_seconds=0.5) as live:
        session = session_headers(open_session(live.url, AUTH), AUTH)
        deadline = time.monotonic() + 20
        while alive(live.url, session):  # the ping itself restarts the idle clock
            assert time.monotonic() < deadline, "the idle session never expired"
            time.sleep(1.0)


# -- 4. event streams and file descriptors -------------------------------------------------
def test_streams_are_capped_per_identity_and_in_total(tmp_path: Path) -> None:
    with (
        served(tmp_path, max_streams=6, max_streams_per_identity=3) as live,
        contextlib.ExitStack() as streams,
        httpx2.Client(base_url=live.url, timeout=30) as http,
    ):

        def sse(who: dict[str, str]) -> int:
            return streams.enter_context(http.stream("GET", "/sse", headers=who)).status_code

        mine = [sse(AUTH) for _ in range(4)]
        assert mine == [200, 200, 200, 429]
        refused = http.get("/sse", headers=AUTH)
        assert "server.max_streams_per_identity = 3" in refused.json()["error"]
        bob = as_user("bob")
        assert [sse(bob) for _ in range(3)] == [200, 200, 429]  # the last one is kept
        assert sse(as_user("carol")) == 200  # for a caller that holds none
        assert sse(as_user("dave")) == 429  # 6 of 6
        started = time.monotonic()
        assert http.get("/health").status_code == 200
        health_s = time.monotonic() - started
    assert health_s < 1
    report("event_streams", opened=6, refused=4, health_s=round(health_s, 3))


def test_the_open_files_limit_is_raised_and_bounds_the_budgets() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 1024:
        pytest.skip(f"the hard open-files limit is {hard}: nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        before, after = raise_open_files_limit()
        assert (before, after) == (1024, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # systemd's default soft limit: streams stay under half the connections.
    assert connection_budget(1024) == 896 and stream_budget(10_000, 1024) == 448
    assert stream_budget(256, 1024) == 256 and stream_budget(256, 256) == 96


def _limited(nofile: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))


@pytest.mark.slow
def test_descriptor_exhaustion_is_logged_once_and_health_answers(tmp_path: Path) -> None:
    """A real ``guaipeca serve`` under a hard open-files limit of 256 (it cannot raise it):
    streams stop at the derived budget with 429, /health answers beside them; a flood of
    idle connections past the connection budget is closed at once and costs a warning per
    interval, not a traceback per accept."""
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (folder / "a.md").write_text("# A\n\nriver stone\n", encoding="utf-8")
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\nserver:\n  auth_token: {TOKEN}\n"
        "  rate_limit_rps: 5000\n  rate_limit_burst: 5000\n"
        "  max_streams: 1000\n  max_streams_per_identity: 1000\n",
        encoding="utf-8",
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--transport", "http", "--port", str(port)],
        env={**os.environ, "GUAIPECA_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: _limited(256),
    )
    budget = stream_budget(1000, 256)
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        pool = httpx2.Limits(max_connections=budget + 10)
        with (
            contextlib.ExitStack() as held,
            httpx2.Client(base_url=url, timeout=30, limits=pool) as http,
        ):
            codes = [
                held.enter_context(http.stream("GET", "/sse", headers=AUTH)).status_code
                for _ in range(budget + 5)
            ]
            started = time.monotonic()
            health = httpx2.get(f"{url}/health", timeout=5).status_code
            health_s = time.monotonic() - started
        kept = reserved_share(budget)  # the last tenth, for callers that hold none
        assert codes.count(200) == budget - kept and codes.count(429) == 5 + kept
        assert health == 200 and health_s < 1
        flood = []
        for _ in range(400):  # far past 256
            with contextlib.suppress(OSError):
                flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(3)  # the flood is held open a while
        for s in flood:
            s.close()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            after = pool.submit(lambda: httpx2.get(f"{url}/health", timeout=30)).result()
        assert after.status_code == 200
    finally:
        proc.terminate()
        try:
            stopped = proc.wait(60) is not None
        except subprocess.TimeoutExpired:
            stopped = False
            proc.kill()
        _, err = drain(proc)
    assert stopped, err[-3000:]
    warnings = err.count("out of file descriptors") + err.count("closing new ones")
    report("descriptors", nofile=256, streams=budget, flood=len(flood), warnings=warnings)
    assert "Traceback" not in err, err[-3000:]
    assert 1 <= warnings <= 4, err[-3000:]
