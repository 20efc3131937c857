"""Issue 29, item 2: one small scan blocked every write for 18 minutes.

Replayed against a real ``guaipeca serve`` on 127.0.0.1 with OCR on, two identities (a
token and a JWT) and a small conversion budget so that the test is quick: a speckle PDF
with no text layer is converted outside the write turn and refused at its budget, naming
the setting, through a job (202, then ``GET /jobs/{id}``); another identity's tiny upload
sent meanwhile is answered at once; a client that leaves before its upload is answered has
it cancelled, and nothing is written. Figures go through ``report`` (docs/reliability.md).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import jwt
import pytest
from typer.testing import CliRunner

from guaipeca.cli.app import app
from support import free_port
from support.images import speckle_pdf
from support.reliability import drain, report, start_server

TOKEN = "slow-upload-test-token-0123456789abcdef"
JWT_SECRET = "slow-upload-test-jwt-secret-0123456789abcdef"
ALICE = {"Authorization": f"Bearer {TOKEN}"}
BUDGET = 12  # limits.convert_timeout_seconds in these tests (the default is 120)


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
        "upload:\n  allow: [docs]\n  answer_seconds: 2\n"
        f"limits:\n  convert_timeout_seconds: {BUDGET}\n"
        "ocr:\n  enabled: true\n  dpi: 150\n"
        f"server:\n  auth_token: {TOKEN}\n  jwt_secret: {JWT_SECRET}\n"
        "  rate_limit_rps: 5000\n  rate_limit_burst: 5000\n",
        encoding="utf-8",
    )
    return folder, home


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    """A real ``guaipeca serve`` (its URL, corpus folder, and its log once it stops)."""
    folder, home = _home(tmp_path_factory.mktemp("slow-uploads"))
    port = free_port()
    server = start_server(home, port)
    log: list[str] = []
    try:
        yield f"http://127.0.0.1:{port}", folder, log
    finally:
        server.terminate()
        server.wait(60)
        log.append(drain(server)[1])


def _put(url: str, name: str, data: bytes, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.put(
        f"{url}/api/upload?corpus=docs&filename={name}", content=data, headers=headers, timeout=120
    )


def _follow(url: str, job: str, headers: dict[str, str], seconds: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    while True:
        answer = httpx2.get(f"{url}/jobs/{job}", headers=headers, timeout=10)
        body: dict[str, object] = answer.json()
        if body["state"] != "running" or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


@pytest.mark.slow
def test_a_slow_scan_becomes_a_job_and_never_holds_another_identitys_upload(
    served: tuple[str, Path, list[str]],
) -> None:
    """Before: 18 minutes of OCR inside the write queue; another identity's 19-byte upload
    had no answer within 900 s."""
    url, folder, _ = served
    scan = speckle_pdf(30)  # ~45 s of OCR unbounded, idle; refused at BUDGET seconds
    answers: dict[str, httpx2.Response] = {}
    slow = threading.Thread(target=lambda: answers.update(scan=_put(url, "scan.pdf", scan, ALICE)))
    started = time.perf_counter()
    slow.start()
    time.sleep(0.5)  # the scan is converting (no condition to await from outside)
    tiny_started = time.perf_counter()
    tiny = _put(url, "tiny.md", b"# Tiny\n\nnineteen b", _bob())
    tiny_seconds = time.perf_counter() - tiny_started
    slow.join(60)
    accepted_seconds = time.perf_counter() - started
    job = answers["scan"].json()
    outcome = _follow(url, str(job["job"]), ALICE)
    refused_seconds = time.perf_counter() - started
    foreign = httpx2.get(f"{url}/jobs/{job['job']}", headers=_bob(), timeout=10)
    report(
        "slow_scan_upload",
        scan_bytes=len(scan),
        pages=30,
        tiny_answer_s=round(tiny_seconds, 2),
        job_answer_s=round(accepted_seconds, 2),
        refused_after_s=round(refused_seconds, 2),
    )
    assert tiny.status_code == 200, tiny.text
    assert tiny.json()["doc_id"] == "tiny.md" and tiny.json()["indexed"]["failed"] == []
    assert tiny_seconds < BUDGET  # answered before the scan's conversion could end
    assert 0.5 + tiny_seconds < refused_seconds
    assert answers["scan"].status_code == 202
    assert answers["scan"].headers["Location"] == f"/jobs/{job['job']}"
    assert outcome["state"] == "failed" and outcome["status"] == 400
    # Over the budget on a busy machine; a fast one reads the 30 pages within it and finds
    # no text. Either way the job ends refused and the other upload never waited.
    error = str(outcome["error"])
    assert "limits.convert_timeout_seconds (12 s)" in error or "OCR found no text" in error
    assert refused_seconds < BUDGET + 10
    assert foreign.status_code == 404  # only its owner sees a job
    assert not (folder / "scan.pdf").exists()


def _send_and_leave(port: int, name: str, data: bytes, headers: dict[str, str]) -> None:
    """A whole upload sent, then the connection closed half a second later, unanswered."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"PUT /api/upload?corpus=docs&filename={name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"{head}Content-Length: {len(data)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request.encode() + data)
        time.sleep(0.5)  # below upload.answer_seconds: never accepted


def _status(url: str) -> dict[str, object]:
    answer = httpx2.post(f"{url}/api/tools/status", json={}, headers=ALICE, timeout=30)
    body: dict[str, object] = answer.json()
    return body


@pytest.mark.slow
def test_an_upload_whose_client_left_is_never_written(
    served: tuple[str, Path, list[str]],
) -> None:
    """Before: an upload queued behind a long write, whose client had gone, was written 3
    minutes later. Here Alice's re-index of a big file holds the write turn; Bob sends a
    tiny file, and a scan, and leaves; once the re-index is done and a later upload is
    written, neither of Bob's files is."""
    url, folder, _ = served
    port = int(url.rsplit(":", 1)[1])
    (folder / "big.md").write_text("# Big\n\n" + "lanterns and harbors " * 150_000)
    index = threading.Thread(
        target=lambda: httpx2.post(f"{url}/api/tools/index", json={}, headers=ALICE, timeout=300)
    )
    index.start()
    deadline = time.monotonic() + 60
    while not _status(url).get("indexing") and index.is_alive():
        assert time.monotonic() < deadline, "the re-index never showed in status"
        time.sleep(0.05)
    assert index.is_alive(), "the re-index ended before the test could queue behind it"
    _send_and_leave(port, "left.md", b"# Left\n\nleft behind", _bob())
    _send_and_leave(port, "left-scan.pdf", speckle_pdf(3, seed=2), _bob())
    index.join(300)
    after = _put(url, "after.md", b"# After\n\nwritten after", _bob())
    assert after.status_code == 200, after.text
    assert (folder / "after.md").exists()
    assert not (folder / "left.md").exists()
    assert not (folder / "left-scan.pdf").exists()
    found = httpx2.post(
        f"{url}/api/tools/get_document",
        json={"corpus": "docs", "doc_id": "left.md"},
        headers=ALICE,
        timeout=10,
    )
    assert found.status_code == 400
    assert "left.md" in found.json()["error"]


def test_the_cli_skips_a_file_over_the_budget_naming_the_setting(tmp_path: Path) -> None:
    """``guaipeca index`` lists the scan as skipped, too slow, with the setting's name."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(speckle_pdf(4))
    (folder / "note.md").write_text("# Note\n\nA note about harbors.\n")
    (tmp_path / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\n"
        "limits:\n  convert_timeout_seconds: 2\nocr:\n  enabled: true\n"
        "embedding:\n  provider: static\n"
        f"storage:\n  data_dir: {tmp_path / 'data'}\n",
        encoding="utf-8",
    )
    config = ["--config", str(tmp_path / "guaipeca.yaml")]
    started = time.perf_counter()
    result = CliRunner().invoke(app, [*config, "index", "--json"])
    seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["skipped"] == [
        {
            "path": str(folder / "scan.pdf"),
            "reason": "conversion took longer than limits.convert_timeout_seconds (2 s); "
            "the file was not read",
            "kind": "too slow",
        }
    ]
    report("cli_slow_scan", seconds=round(seconds, 2))
    assert seconds < 60
