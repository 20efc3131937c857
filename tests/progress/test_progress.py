"""The progress helper: plain lines every few seconds off a terminal, bars on one."""

from __future__ import annotations

import io
import logging
import re
import time

import pytest
from rich.console import Console

from guaipeca.progress import JobProgress, RoundLog, plain_line


def test_plain_line_has_counts_rate_and_time_left() -> None:
    line = plain_line("index docs", 1200, 10_000, "files", 5.0)
    assert line == "index docs: 1,200/10,000 files (12%), 240.0 files/s, about 37 s left"
    assert plain_line("x", 0, 10, "files", 2.0).endswith("time left unknown")
    assert plain_line("x", 7, None, "chunks", 1.0) == "x: 7 chunks, 7.0 chunks/s"
    assert "about 1 h 09 min left" in plain_line("x", 1, 4_141, "chunks", 1.0)


def test_off_a_terminal_one_line_every_interval_and_a_last_line() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=False)
    with JobProgress(console=console, interval=0.05) as job:
        task = job.task("convert", "files", total=100)
        for i in range(1, 11):
            task.update(i * 10)
            time.sleep(0.03)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3  # periodic lines, then the last one
    assert all(re.match(r"convert: [\d,]+/100 files \(\d+%\), [\d.,]+ files/s", x) for x in lines)
    assert lines[-1].startswith("convert: 100/100 files (100%)") and "done in" in lines[-1]
    assert "\x1b" not in stream.getvalue()  # plain text: no terminal codes in logs


def test_lines_can_go_to_a_logger(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("guaipeca.test-progress")
    with (
        caplog.at_level(logging.INFO, logger=log.name),
        JobProgress(write=log.info, interval=10) as job,
    ):
        job.task("embed", "chunks", total=5).update(5)
    assert [r.getMessage() for r in caplog.records][-1].startswith("embed: 5/5 chunks (100%)")


def test_on_a_terminal_bars_redraw_several_times_a_second() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=120)
    with JobProgress(console=console) as job:
        task = job.task("embedding", "chunks", total=50)
        task.update(20)
        time.sleep(1.2)  # no new count: the bar is still redrawn (elapsed time moves)
    out = stream.getvalue()
    assert "embedding" in out and "20/50" in out
    assert out.count("\r") + out.count("\x1b[") >= 4


def test_quiet_shows_nothing() -> None:
    stream = io.StringIO()
    with JobProgress(console=Console(file=stream), quiet=True, interval=0.01) as job:
        job.task("x", "files", total=3).update(3)
        time.sleep(0.05)
    assert stream.getvalue() == ""


def test_round_log_writes_every_interval_and_when_done() -> None:
    lines: list[str] = []
    log = RoundLog("embedding", "chunks", lines.append, interval=3600)
    log(256, 744)  # the first round is written
    log(512, 488)  # within the interval: not written
    log(1000, 0)  # done: always written
    assert len(lines) == 2
    assert lines[0].startswith("embedding: 256/1,000 chunks (26%)")
    assert lines[1].startswith("embedding: 1,000/1,000 chunks (100%)")


def test_round_log_of_a_known_total() -> None:
    lines: list[str] = []
    log = RoundLog("index docs", "files", lines.append, interval=3600, of_total=True)
    log(0, 40)
    log(40, 40)
    assert lines[0].startswith("index docs: 0/40 files (0%)")
    assert lines[-1].startswith("index docs: 40/40 files (100%)")
