"""``guaipeca index`` run twice at once on one corpus, as two real processes: the second
says who writes the corpus and exits 1, or waits for it with ``--wait``; a dead writer
never blocks the next run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guaipeca.cli import EXIT_USER
from guaipeca.store.embedded.lock import read_holder
from support.reliability import doc_text

SCRIPT = Path(sys.executable).parent / "guaipeca"

pytestmark = pytest.mark.slow  # several real CLI processes, each loading the model


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A config whose corpus 'docs' holds a few dozen files; returns the data folder."""
    folder, home = tmp_path / "docs", Path(os.environ["GUAIPECA_HOME"])
    folder.mkdir()
    rng = random.Random(5)
    for i in range(40):
        name = f"d{i}.md"
        (folder / name).write_text(doc_text(rng, name, 1, paragraphs=4), encoding="utf-8")
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {folder}\n", encoding="utf-8"
    )
    return home / "data"


def _index(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "index", *args], capture_output=True, text=True, timeout=600
    )


def _start_and_freeze(lock: Path) -> subprocess.Popen[str]:
    """A ``guaipeca index`` run, stopped (SIGSTOP) while it holds the corpus."""
    proc = subprocess.Popen(
        [str(SCRIPT), "index"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while True:
        holder = read_holder(lock)
        if holder is not None and holder.pid == proc.pid:
            os.kill(proc.pid, signal.SIGSTOP)
            # Released before the stop? Then the file no longer names it (release clears it).
            holder = read_holder(lock)
            if holder is not None and holder.pid == proc.pid:
                return proc
            os.kill(proc.pid, signal.SIGCONT)
            pytest.fail("the first run finished before it could be stopped")
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first run never held the corpus"
        time.sleep(0.01)


def test_a_second_run_names_the_first_and_exits_1_or_waits_for_it(corpus: Path) -> None:
    lock = corpus / "index" / "corpora" / "docs" / "writer.lock"
    first = _start_and_freeze(lock)
    try:
        second = _index()
        assert second.returncode == EXIT_USER
        line = second.stderr.strip()
        assert "\n" not in line and "Traceback" not in line
        assert f"another process is writing to corpus 'docs': pid {first.pid}" in line
        assert "(guaipeca index), since " in line and "--wait" in line
        assert second.stdout == ""

        timed_out = _index("--wait-timeout", "0.5")
        assert timed_out.returncode == EXIT_USER and f"pid {first.pid}" in timed_out.stderr

        third = subprocess.Popen(
            [str(SCRIPT), "index", "--wait"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert third.stderr is not None
        waiting = third.stderr.readline()
        assert f"pid {first.pid}" in waiting and "waiting for it to finish" in waiting
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert "40 added" in out
    out, err = third.communicate(timeout=600)
    assert third.returncode == 0, err
    # It ran after the first had finished: nothing left to add or embed.
    assert "0 added, 0 changed, 40 unchanged" in out and "0 chunks embedded" in out


def test_a_killed_writer_does_not_block_the_next_run(corpus: Path) -> None:
    lock = corpus / "index" / "corpora" / "docs" / "writer.lock"
    first = _start_and_freeze(lock)
    first.kill()
    first.communicate(timeout=60)
    done = _index()
    assert done.returncode == 0, done.stderr
    assert "40 unchanged" in done.stdout or "added" in done.stdout
