"""A job's tasks, off a terminal: what a log reader can rely on (issue 31, item 3)."""

from __future__ import annotations

import re
import threading

import pytest

from guaipeca.progress import JobProgress


class Lines:
    """A job's written lines, with a way to await the next ones (no sleeps)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def wait_for(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.lines) >= count, timeout=30)


def test_a_total_once_known_never_moves() -> None:
    with JobProgress(write=Lines(), interval=3600) as job:
        task = job.task("notes: searchable by keyword", "files")
        task.update(0, 700)
        task.update(10, 700)
        with pytest.raises(ValueError, match="the total is 700; it cannot become 699"):
            task.update(11, 699)
        assert task.total == 700


def test_work_known_so_far_only_grows_until_the_total_is_set() -> None:
    write = Lines()
    with JobProgress(write=write, interval=3600) as job:
        task = job.task("notes: embedded", "chunks")
        task.update(0, so_far=2078)
        task.update(16, so_far=2070)  # a smaller count of pending work: not shown
        assert task.so_far == 2078 and "16 of 2,078 chunks so far" in task.line()
        task.update(48, so_far=3033)
        assert task.so_far == 3033
        task.update(100, 5103)
        assert task.line().startswith("notes: embedded: 100/5,103 chunks (2%)")


def test_the_time_left_is_shown_from_the_first_batch() -> None:
    with JobProgress(write=Lines(), interval=3600) as job:
        files = job.task("keyword", "files")
        files.update(0, 700)
        assert files.line() == "keyword: 0/700 files (0%), time left unknown"
        files.update(20, 700)  # the first batch
        assert re.fullmatch(
            r"keyword: 20/700 files \(3%\), [\d,.]+ files/s, about .+ left", files.line()
        )
        chunks = job.task("embedded", "chunks")
        assert chunks.line() == "embedded: not started"
        chunks.update(0, so_far=2078)
        chunks.update(16, so_far=2078)  # a first round of 16 chunks
        assert re.fullmatch(
            r"embedded: 16 of 2,078 chunks so far, [\d,.]+ chunks/s, about .+ left for those",
            chunks.line(),
        )


def test_a_finished_task_writes_one_last_line_and_nothing_after() -> None:
    write = Lines()
    with JobProgress(write=write, interval=0.01) as job:
        keyword = job.task("keyword", "files", total=3)
        embedded = job.task("embedded", "chunks")
        keyword.update(3)
        embedded.update(0, so_far=10)
        write.wait_for(2)
        keyword.finish()
        keyword.finish()  # twice: still one last line
        after = len(write.lines)
        embedded.update(5, so_far=10)
        write.wait_for(after + 5)  # the other task goes on being shown
        embedded.update(10, 10)
    ends = [i for i, line in enumerate(write.lines) if line.startswith("keyword:")]
    last = write.lines[ends[-1]]
    assert last.startswith("keyword: 3/3 files (100%)") and "done in" in last
    assert sum("done in" in write.lines[i] for i in ends) == 1
    assert ends[-1] < after  # no keyword line after its last one
    assert write.lines[-1].startswith("embedded: 10/10 chunks (100%)")
    assert "done in" in write.lines[-1]


def test_on_an_error_no_last_lines_are_written() -> None:
    write = Lines()
    with pytest.raises(RuntimeError), JobProgress(write=write, interval=3600) as job:
        job.task("keyword", "files", total=3).update(1)
        raise RuntimeError("disk full")
    assert write.lines == []
