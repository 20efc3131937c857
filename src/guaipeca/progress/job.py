"""A job's progress: rich bars on a terminal, plain lines anywhere else."""

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

from guaipeca.progress.lines import PLAIN_INTERVAL_SECONDS, duration, plain_line

__all__ = ["JobProgress", "ProgressTask"]

# Bars are redrawn this often, so the elapsed time and the spinner move every second.
_REFRESH_PER_SECOND = 4


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
        return f"{text}, done in {duration(seconds)}" if self.finished is not None else text


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
