"""Jobs survive a restart (issue 29): a real ``guaipeca serve`` on 127.0.0.1, two identities
(a token and a JWT), a slow scan that becomes a job; the server is stopped (SIGTERM) or
killed (SIGKILL) while the scan converts, and started again on the same data folder. Its
owner reads the job's failed outcome (nothing was written), anyone else gets 404, and a
job that had finished before still answers its outcome."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx2
import jwt
import pytest

from support import free_port
from support.images import speckle_pdf
from support.reliability import drain, report, start_server

pytestmark = pytest.mark.slow  # real server processes, OCR

TOKEN = "jobs-restart-test-token-0123456789abcdef"
JWT_SECRET = "jobs-restart-test-jwt-secret-0123456789abcdef"
ALICE = {"Authorization": f"Bearer {TOKEN}"}


def _bob() -> dict[str, str]:
    claims = {"sub": "bob", "exp": int(time.time()) + 3600}
    return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}


def _home(tmp_path: Path) -> tuple[Path, Path]:
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (folder / "base.md").write_text("# Base\n\nA first document about lanterns.\n")
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\n"
        f"storage:\n  data_dir: {tmp_path / 'data'}\n"
        "embedding:\n  provider: static\n"
        "upload:\n  allow: [docs]\n  answer_seconds: 0.5\n"
        "limits:\n  convert_timeout_seconds: 300\n"
        "ocr:\n  enabled: true\n  dpi: 150\n"
        f"server:\n  auth_token: {TOKEN}\n  jwt_secret: {JWT_SECRET}\n"
        "  rate_limit_rps: 5000\n  rate_limit_burst: 5000\n",
        encoding="utf-8",
    )
    return folder, home


def _put(url: str, name: str, data: bytes, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.put(
        f"{url}/api/upload?corpus=docs&filename={name}", content=data, headers=headers, timeout=120
    )


def _job(url: str, job: str, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.get(f"{url}/jobs/{job}", headers=headers, timeout=10)


def _follow(url: str, job: str, headers: dict[str, str], seconds: float = 120) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    while True:
        body: dict[str, object] = _job(url, job, headers).json()
        if body["state"] != "running" or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_job_outlives_a_restart_and_still_answers_only_its_owner(
    tmp_path: Path, stop: signal.Signals
) -> None:
    folder, home = _home(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(home, port)
    try:
        # A job that ends before the restart: a small scan, refused (no text) or too slow.
        first = _put(url, "small.pdf", speckle_pdf(2, seed=3), ALICE)
        assert first.status_code == 202, first.text
        ended = _follow(url, str(first.json()["job"]), ALICE)
        assert ended["state"] == "failed" and ended["status"] == 400, ended
        # A job still converting when the server goes: 30 pages of OCR.
        slow = _put(url, "scan.pdf", speckle_pdf(30), ALICE)
        assert slow.status_code == 202, slow.text
        job = str(slow.json()["job"])
        assert _job(url, job, ALICE).json()["state"] == "running"
        stopped = time.perf_counter()
        os.kill(server.pid, stop)
        server.wait(60)
        stop_seconds = time.perf_counter() - stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)
        stderr = drain(server)[1]
    server = start_server(home, port)
    try:
        mine = _job(url, job, ALICE)
        theirs = _job(url, job, _bob())
        before = _job(url, str(first.json()["job"]), ALICE)
    finally:
        server.terminate()
        server.wait(60)
        drain(server)
    report("job_after_restart", signal=stop.name, stop_s=round(stop_seconds, 2))
    assert mine.status_code == 200, (mine.text, stderr[-2000:])
    outcome = mine.json()
    assert outcome["state"] == "failed" and outcome["status"] == 503, outcome
    if stop == signal.SIGKILL:  # the row was left running: the next start ended it
        assert str(outcome["error"]).startswith(
            "the server restarted before the upload ended; nothing from it was written or indexed"
        )
    else:  # a graceful stop ends the job itself
        assert "stopped" in str(outcome["error"]) or "restarted" in str(outcome["error"])
    assert theirs.status_code == 404
    assert before.status_code == 200 and before.json() == {**ended, "job": first.json()["job"]}
    assert sorted(p.name for p in folder.iterdir()) == ["base.md"]  # nothing from the scan
