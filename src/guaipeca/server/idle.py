"""Give memory back when the server goes quiet (``server.idle_trim_seconds``).

After a burst of searches a server holds the vector pages its scans mapped and the C heap's
freed pages; :meth:`guaipeca.Index.release_memory` returns both. This module decides *when*:
once per quiet spell, never while work is running. The HTTP server feeds it from its request
counter on uvicorn's tick; the stdio server from the tool calls, on a timer of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

import anyio

__all__ = ["Activity", "IdleTrim", "ToolCalls", "trim_when_idle"]

log = logging.getLogger("guaipeca.server")


class Activity(Protocol):
    """What the trimmer reads: work running now, work done so far, when the last ended."""

    count: int
    finished: int
    last_done: float


class ToolCalls:
    """Counts calls in flight and done: tool calls (any transport), or HTTP requests in
    http.py's subclass. Updated on the event loop, so no lock."""

    def __init__(self) -> None:
        self.count = 0
        self.finished = 0
        self.last_done = time.monotonic()

    def started(self) -> None:
        self.count += 1

    def done(self) -> None:
        self.count -= 1
        self.finished += 1
        self.last_done = time.monotonic()


class IdleTrim:
    """Calls ``release`` once ``activity`` has been idle for ``seconds`` (0: never).

    At most one trim per quiet spell (and one after startup), run in a worker thread so the
    event loop never waits for it.
    """

    def __init__(self, activity: Activity, release: Callable[[], None], seconds: float):
        self.activity = activity
        self.release = release
        self.seconds = seconds
        self.trims = 0  # trims started, for tests and logs
        self._trimmed_after: int | None = None  # activity.finished at the last trim
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> None:
        quiet = time.monotonic() - self.activity.last_done
        if (
            self.seconds > 0
            and self.activity.count == 0
            and self._trimmed_after != self.activity.finished
            and quiet >= self.seconds
            and (self._task is None or self._task.done())
        ):
            self._trimmed_after = self.activity.finished
            self.trims += 1
            self._task = asyncio.ensure_future(asyncio.to_thread(self._release))

    def _release(self) -> None:
        try:
            self.release()
        except Exception:  # a failed trim must never take the server down
            log.exception("releasing idle memory failed")


async def trim_when_idle(trim: IdleTrim, interval: float = 0.25) -> None:
    """Tick ``trim`` every ``interval`` seconds until cancelled (for servers with no tick)."""
    if trim.seconds <= 0:
        return
    while True:
        await anyio.sleep(interval)
        trim.tick()
