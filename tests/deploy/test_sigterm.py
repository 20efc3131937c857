"""SIGTERM (systemd's stop, ``docker stop``) ends ``guaipeca serve`` with exit code 0 and
the index closed, in every transport, even while the agent keeps stdin open. (The HTTP
transport alone, with requests in flight, is covered by tests/server/test_http.py and
tests/deploy/test_container.py.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guaipeca import Index
from support import free_port

SCRIPT = Path(sys.executable).parent / "guaipeca"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


@pytest.mark.parametrize("transport", ["stdio", "both"])
def test_sigterm_stops_the_server_and_closes_the_index(tmp_path: Path, transport: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe quick brown fox.\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    # A short search deadline: a stdin the agent keeps open is given up after it + 5 s.
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {docs}\nserver:\n  search_timeout_seconds: 1\n",
        encoding="utf-8",
    )
    env = {**os.environ, "GUAIPECA_HOME": str(home)}
    indexed = subprocess.run(
        [str(SCRIPT), "index"], env=env, capture_output=True, text=True, timeout=120
    )
    assert indexed.returncode == 0, indexed.stderr
    port = free_port()
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--transport", transport, "--port", str(port)],
        env=env,
        stdin=subprocess.PIPE,  # left open, as an agent that does not close it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        if transport == "both":
            deadline = time.monotonic() + 120
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        else:  # an MCP handshake: the server is up and waits on stdin
            assert proc.stdin and proc.stdout
            proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            assert answer["result"]["serverInfo"]["name"] == "guaipeca"
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        err = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert code == 0, err[-3000:]
    assert "Traceback" not in err
    with Index(home / "data" / "index") as index:  # opens: closed cleanly, lock released
        assert index.stats().chunks == 1
