"""Progress of long jobs, for people and for logs (SPEC §2.11): one helper for every job
(``index``, ``eval``, the server's background work).

On a terminal each task is a rich bar (count, rate, time left) redrawn four times a second,
so it moves at least every second even while a count stands still. Anywhere else (a log
file, CI, systemd, a server) it writes one plain line per running task every few seconds:

    index docs: 1,200/10,000 files (12%), 240 files/s, about 37 s left

and a last line when the job ends. Lines go to a stream (stderr by default) or to a logger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["PLAIN_INTERVAL_SECONDS", "JobProgress", "ProgressTask", "RoundLog", "plain_line"]

#: Seconds between two plain lines (not on a terminal).
PLAIN_INTERVAL_SECONDS = 5.0
# Bars are redrawn this often, so the elapsed time and the spinner move every second.
_REFRESH_PER_SECOND = 4


def plain_line(label: str, done: int, total: int | None, unit: str, seconds: float) -> str:
    """One progress line: counts, rate and the estimated time left (when a total is known)."""
    rate = done / seconds if seconds > 0 else 0.0
    parts = [f"{label}: {done:,}"]
    if total is not None:
        parts[0] += f"/{total:,} {unit}"
        if total:
            parts[0] += f" ({100 * done / total:.0f}%)"
    else:
        parts[0] += f" {unit}"
    parts.append(f"{rate:,.1f} {unit}/s")
    if total is not None and done < total:
        left = f"about {_duration((total - done) / rate)} left" if rate > 0 else "time left unknown"
        parts.append(left)
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ProgressTask:
    """One counted task of a job (files converted, chunks embedded, queries run)."""

    def __init__(self, job: JobProgress, label: str, unit: str, total: int | None) -> None:
        self._job = job
        self.label, self.unit = label, unit
        self.done, self.total = 0, total
        self.started = time.monotonic()
        self.finished: float | None = None
        self._bar_id: TaskID | None = None

    def update(self, done: int, total: int | None = None) -> None:
        """Set the count done (and the total, when it becomes known or grows)."""
        with self._job.lock:
            self.done = done
            if total is not None:
                self.total = total
        self._job.redraw(self)

    def advance(self, step: int = 1) -> None:
        self.update(self.done + step)

    def finish(self) -> None:
        """Mark the task done (a plain last line says how long it took)."""
        with self._job.lock:
            if self.finished is None:
                self.finished = time.monotonic()
        self._job.redraw(self)

    def line(self) -> str:
        end = self.finished if self.finished is not None else time.monotonic()
        seconds = end - self.started
        text = plain_line(self.label, self.done, self.total, self.unit, seconds)
        return f"{text}, done in {_duration(seconds)}" if self.finished is not None else text


class JobProgress:
    """Progress of one job with one or more tasks, as a context manager.

    ``console``: where bars go (default: stderr); bars only when it is a terminal.
    ``write``: where plain lines go (default: the console's file); a server passes a
    logger's ``info``. ``quiet``: show nothing (``--json`` output).
    """

    def __init__(
        self,
        *,
        console: Console | None = None,
        write: Callable[[str], None] | None = None,
        interval: float = PLAIN_INTERVAL_SECONDS,
        quiet: bool = False,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.lock = threading.Lock()
        self.tasks: list[ProgressTask] = []
        self.quiet = quiet
        self.terminal = not quiet and write is None and self.console.is_terminal
        self._write = write or self._to_stream(self.console.file)
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bars: Progress | None = None
        if self.terminal:
            self._bars = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TimeElapsedColumn(),
                console=self.console,
                refresh_per_second=_REFRESH_PER_SECOND,
                transient=False,
            )

    @staticmethod
    def _to_stream(stream: IO[str]) -> Callable[[str], None]:
        def write(line: str) -> None:
            stream.write(line + "\n")
            stream.flush()

        return write

    def task(self, label: str, unit: str, total: int | None = None) -> ProgressTask:
        """A new task, shown from now on."""
        task = ProgressTask(self, label, unit, total)
        with self.lock:
            self.tasks.append(task)
        if self._bars is not None:
            task._bar_id = self._bars.add_task(label, total=total, unit=unit, rate="")
        return task

    def redraw(self, task: ProgressTask) -> None:
        if self._bars is None or task._bar_id is None:
            return
        seconds = time.monotonic() - task.started
        rate = f"{task.done / seconds:,.1f}/s" if seconds > 0 and task.done else ""
        self._bars.update(
            task._bar_id, completed=task.done, total=task.total, rate=rate, refresh=False
        )

    def __enter__(self) -> JobProgress:
        if self.quiet:
            return self
        if self._bars is not None:
            self._bars.start()
        else:
            self._thread = threading.Thread(target=self._lines, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bars is not None:
            self._bars.stop()
        elif not self.quiet and exc_type is None:
            for task in self.tasks:
                task.finish()
                self._write(task.line())

    def _lines(self) -> None:
        while not self._stop.wait(self._interval):
            with self.lock:
                running = [t for t in self.tasks if t.finished is None]
            for task in running:
                self._write(task.line())


class RoundLog:
    """A ``progress(done, left)`` callback for work that runs in rounds with no end known in
    advance (the server's background embedding): one plain line every few seconds, and one
    when nothing is left. ``of_total``: called as ``progress(done, total)`` instead."""

    def __init__(
        self,
        label: str,
        unit: str,
        write: Callable[[str], None],
        interval: float = PLAIN_INTERVAL_SECONDS,
        *,
        of_total: bool = False,
    ) -> None:
        self._label, self._unit, self._write, self._interval = label, unit, write, interval
        self._of_total = of_total
        self._started: float | None = None
        self._last = 0.0

    def __call__(self, done: int, left: int) -> None:
        if self._of_total:
            left = max(0, left - done)
        now = time.monotonic()
        if self._started is None:
            self._started = now
        if left and now - self._last < self._interval:
            return
        self._last = now
        self._write(plain_line(self._label, done, done + left, self._unit, now - self._started))
        if not left:
            self._started = None
