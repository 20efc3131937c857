"""A full disk is the user's problem to fix, not a bug: the real CLI and a real server on a
data folder on a 6 MB tmpfs. One line naming the folder and the free space (exit code 1;
HTTP 507 from the server, whose /health says "degraded"), no traceback, no uploaded file
left behind unindexed, and once space is freed the next run carries on without --force."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import httpx2
import pytest

from support import free_port
from support.reliability import SCRIPT, drain, small_disk, start_server

pytestmark = pytest.mark.slow  # real processes filling a disk

_WORDS = [
    "river",
    "stone",
    "cedar",
    "lantern",
    "harbor",
    "meadow",
    "copper",
    "violet",
    "falcon",
    "orchard",
    "glacier",
]


def _text(rng: random.Random, paragraphs: int) -> str:
    # Numbered words: many distinct terms, so the keyword index grows with the text.
    return "\n\n".join(
        " ".join(f"{rng.choice(_WORDS)}{rng.randrange(100_000)}" for _ in range(150))
        for _ in range(paragraphs)
    )


def _config(home: Path, folder: Path, data: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\n"
        f"storage:\n  data_dir: {data}\n"
        "embedding:\n  provider: static\n"  # the bundled static model: real and fast
        "upload:\n  allow: [docs]\n"
        "server:\n  rate_limit_rps: 1000\n  rate_limit_burst: 1000\n",
        encoding="utf-8",
    )


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        env={**os.environ, "GUAIPECA_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_cli_says_the_disk_is_full_and_the_next_run_carries_on(tmp_path: Path) -> None:
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    rng = random.Random(3)
    for i in range(4):  # ~550 KB of text: about 3.5 MB of index, conversions and backup
        (folder / f"d{i}.md").write_text(_text(rng, 80), encoding="utf-8")
    with small_disk(tmp_path / "disk") as disk:
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * (4 << 20))  # 2 MB left for the data folder
        data = disk / "data"
        _config(home, folder, data)
        full = _cli(home, "index")
        assert full.returncode == 1, full.stderr
        last = full.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: no space left on the disk holding {data} (")
        assert " free); free some space, then try again" in last
        assert "Traceback" not in full.stderr and "internal error" not in full.stderr

        ballast.unlink()  # space freed: the next runs repair and carry on, no --force
        check = _cli(home, "check")
        assert check.returncode == 0, check.stdout + check.stderr
        again = _cli(home, "index")
        assert again.returncode == 0, again.stderr
        assert "Traceback" not in again.stderr
        check = _cli(home, "check")
        assert check.returncode == 0, check.stdout + check.stderr
        assert "docs: 4 documents" in check.stdout


def test_the_server_answers_507_and_reports_degraded_until_space_is_freed(
    tmp_path: Path,
) -> None:
    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    rng = random.Random(4)
    with small_disk(tmp_path / "disk") as disk:
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * (3 << 20))
        data = disk / "data"
        _config(home, folder, data)
        port = free_port()
        server = start_server(home, port)
        base = f"http://127.0.0.1:{port}"
        try:
            refused = None
            for k in range(30):  # 30 x ~110 KB: the disk fills well before
                name = f"up-{k}.md"
                answer = httpx2.put(
                    f"{base}/api/upload?corpus=docs&filename={name}",
                    content=_text(rng, 80).encode("utf-8"),
                    timeout=300,
                )
                if answer.status_code != 200:
                    refused = (name, answer)
                    break
            assert refused is not None, "the disk never filled"
            name, answer = refused
            assert answer.status_code == 507, answer.text
            message = answer.json()["error"]
            assert message.startswith("no space left on the disk holding <data folder>")
            assert f"'{name}' in corpus 'docs' was not kept" in message
            assert not (folder / name).exists()  # no orphan: nothing unindexed in the folder
            health = httpx2.get(f"{base}/health", timeout=30).json()
            assert health["status"] == "degraded" and "no space left" in health["reason"]

            ballast.unlink()  # space freed
            assert httpx2.get(f"{base}/health", timeout=30).json()["status"] == "ok"
            small = httpx2.put(
                f"{base}/api/upload?corpus=docs&filename=small.md",
                content=b"# Small\n\nA short note about a lantern by the harbor.",
                timeout=300,
            )
            assert small.status_code == 200, small.text
            assert small.json()["indexed"]["added"] >= 1
        finally:
            server.terminate()
            server.wait(60)
            _, server_err = drain(server)
    assert "Traceback" not in server_err
