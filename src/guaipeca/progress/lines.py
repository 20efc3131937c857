"""Plain progress lines, for logs and anything that is not a terminal: counts, rate and the
time left, one line every few seconds (``RoundLog`` for work in rounds, such as the server's
background embedding)."""

from __future__ import annotations

import time
from collections.abc import Callable

from guaipeca.progress.rate import RateMeter

__all__ = ["PLAIN_INTERVAL_SECONDS", "RoundLog", "duration", "plain_line"]

#: Seconds between two plain lines (not on a terminal).
PLAIN_INTERVAL_SECONDS = 5.0


def plain_line(
    label: str,
    done: int,
    total: int | None,
    unit: str,
    seconds: float,
    *,
    rate: float | None = None,
    so_far: int | None = None,
    known_rate: bool = True,
) -> str:
    """One progress line: counts, rate and the estimated time left (when a total is known).

    ``rate``: units per second (default: ``done / seconds``, or not known yet when
    ``known_rate`` is False). ``so_far``: with no total, the work known so far (more may
    come), whose time left the line estimates.
    """
    if rate is None and known_rate:
        rate = done / seconds if seconds > 0 else 0.0
    parts = [f"{label}: {done:,}"]
    if total is not None:
        parts[0] += f"/{total:,} {unit}"
        if total:
            parts[0] += f" ({100 * done / total:.0f}%)"
    elif so_far is not None:
        parts[0] += f" of {so_far:,} {unit} so far"
    else:
        parts[0] += f" {unit}"
    if rate is not None:
        parts.append(f"{rate:,.1f} {unit}/s")
    goal = total if total is not None else so_far
    if goal is not None and done < goal:
        what = "left" if total is not None else "left for those"
        known = f"about {duration((goal - done) / rate)} {what}" if rate else "time left unknown"
        parts.append(known)
    return ", ".join(parts)


def duration(seconds: float) -> str:
    """``12 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


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
        self._last: float | None = None  # None: the first round is always written
        self._meter = RateMeter()

    def __call__(self, done: int, left: int) -> None:
        if self._of_total:
            left = max(0, left - done)
        now = time.monotonic()
        if self._started is None:
            self._started, self._meter = now, RateMeter()
        self._meter.observe(done, now)
        # Not "now - 0": the monotonic clock starts at boot, so a machine up for less than
        # the interval would skip its first line.
        if left and self._last is not None and now - self._last < self._interval:
            return
        self._last = now
        seconds = now - self._started
        rate = self._meter.rate if left else None  # the last line: the average of the run
        self._write(plain_line(self._label, done, done + left, self._unit, seconds, rate=rate))
        if not left:
            self._started = None
