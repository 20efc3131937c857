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
)

from guaipeca.progress import lines
from guaipeca.progress.lines import duration, plain_line
from guaipeca.progress.rate import RateMeter

__all__ = ["JobProgress", "ProgressTask"]

# Bars are redrawn this often, so the elapsed time and the spinner move every second.
_REFRESH_PER_SECOND = 4


class ProgressTask:
    """One counted task of a job (files converted, chunks embedded, queries run).

    Its guarantees, for people reading a log: the total, once known, never moves (a task
    whose work is still being found shows what is known ``so_far`` instead, with no total
    until it is final); the time left comes from a smoothed rate (``RateMeter``), as soon as
    the count first moves; a finished task writes one last line and nothing after it.
    """

    def __init__(self, job: JobProgress, label: str, unit: str, total: int | None) -> None:
        self._job = job
        self.label, self.unit = label, unit
        self.done, self.total = 0, total
        self.so_far: int | None = None
        self.started = time.monotonic()
        self.finished: float | None = None
        self._meter = RateMeter()
        self._meter.observe(0, self.started)
        self._bar_id: TaskID | None = None

    def update(self, done: int, total: int | None = None, *, so_far: int | None = None) -> None:
        """Set the count done; ``total`` when it becomes known, ``so_far`` (the work known
        until then, which only grows) while it is not.

        Raises:
            ValueError: ``total`` differs from the one set before (a bug of the caller).
        """
        with self._job.lock:
            if total is not None and self.total is not None and total != self.total:
                raise ValueError(
                    f"progress of {self.label!r}: the total is {self.total:,}; "
                    f"it cannot become {total:,}"
                )
            if total is not None:
                self.total = total
            if so_far is not None:
                self.so_far = max(so_far, self.so_far or 0, done)
            self.done = done
            self._meter.observe(done, time.monotonic())
        self._job.redraw(self)

    def advance(self, step: int = 1) -> None:
        self.update(self.done + step)

    def finish(self) -> None:
        """Mark the task done: off a terminal its last line is written now, once, and the
        task is not shown again."""
        self._job.finish(self)

    @property
    def rate(self) -> float | None:
        """The smoothed rate (units per second); None until the count first moves."""
        return self._meter.rate

    def seconds_left(self) -> float | None:
        goal = self.total if self.total is not None else self.so_far
        return None if goal is None else self._meter.seconds_left(goal - self.done)

    def line(self) -> str:
        end = self.finished if self.finished is not None else time.monotonic()
        seconds = end - self.started
        if self.finished is not None:  # the average since the work began, and the time taken
            began = self._meter.started or self.started
            rate = self.done / (end - began) if end > began else 0.0
            text = plain_line(self.label, self.done, self.total, self.unit, seconds, rate=rate)
            return f"{text}, done in {duration(seconds)}"
        so_far = self.so_far if self.total is None else None
        if self.rate is None and self.total is None and so_far is None:
            return f"{self.label}: not started"  # nothing to do yet (no chunk committed)
        return plain_line(
            self.label,
            self.done,
            self.total,
            self.unit,
            seconds,
            rate=self.rate,
            so_far=so_far,
            known_rate=False,
        )


class JobProgress:
    """Progress of one job with one or more tasks, as a context manager.

    ``console``: where bars go (default: stderr); bars only when it is a terminal.
    ``write``: where plain lines go (default: the console's file); a server passes a
    logger's ``info``. ``interval``: seconds between plain lines (default:
    ``PLAIN_INTERVAL_SECONDS``). ``quiet``: show nothing (``--json`` output).
    """

    def __init__(
        self,
        *,
        console: Console | None = None,
        write: Callable[[str], None] | None = None,
        interval: float | None = None,
        quiet: bool = False,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.lock = threading.Lock()
        self.tasks: list[ProgressTask] = []
        self.quiet = quiet
        self.terminal = not quiet and write is None and self.console.is_terminal
        self._write = write or self._to_stream(self.console.file)
        # Read when the job starts, so a script may set the module's value (a transcript).
        self._interval = interval if interval is not None else lines.PLAIN_INTERVAL_SECONDS
        # Held while a line is written: a task's last line is never followed by another.
        self._writing = threading.Lock()
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
                TextColumn("{task.fields[left]}"),
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
            task._bar_id = self._bars.add_task(label, total=total, unit=unit, rate="", left="")
        return task

    def redraw(self, task: ProgressTask) -> None:
        if self._bars is None or task._bar_id is None:
            return
        rate = f"{task.rate:,.1f}/s" if task.rate else ""
        seconds = task.seconds_left()
        left = f"{duration(seconds)} left" if seconds and task.finished is None else ""
        if task.total is None and task.so_far is not None and task.finished is None:
            left = f"of {task.so_far:,} so far" + (f", {left}" if left else "")
        self._bars.update(
            task._bar_id,
            completed=task.done,
            total=task.total,
            rate=rate,
            left=left,
            refresh=False,
        )

    def finish(self, task: ProgressTask) -> None:
        """End ``task`` (see :meth:`ProgressTask.finish`); a second call does nothing."""
        with self._writing:
            with self.lock:
                if task.finished is not None:
                    return
                task.finished = time.monotonic()
                if task.total is None and task.so_far is None:
                    task.total = task.done
                elif task.total is None:
                    task.total = task.so_far
            if self._bars is None and not self.quiet:
                self._write(task.line())
        self.redraw(task)

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
        if exc_type is None:
            for task in self.tasks:
                self.finish(task)
        if self._bars is not None:
            self._bars.stop()

    def _lines(self) -> None:
        while not self._stop.wait(self._interval):
            with self.lock:
                running = [t for t in self.tasks if t.finished is None]
            for task in running:
                with self._writing:
                    if task.finished is None:
                        self._write(task.line())
