"""The write queue: index, upload and delete run one at a time, on their own.

Writes used to wait for the write lock inside worker threads of the shared pool, so a burst
of ``index`` calls took every thread, and searches, reads and ``/health`` queued behind
them. Here a write waits for its turn on the event loop (a capacity limiter of one, no
thread held while waiting), the queue is bounded in all and per caller, and a call over the
bound is refused at once with a retry delay (HTTP 429 with ``Retry-After`` on the plain
routes, a tool error saying when to retry over MCP).

The caller is the identity the auth middleware found (else the client address), carried to
the tool call in a context variable: an MCP session runs its calls in the context of the
request that opened it, and sessions are bound to their identity.

One admission check: :meth:`WriteQueue.admitted` is the only place a write is let in or
refused (with :class:`~guaipeca.errors.WriteQueueFullError`, which carries the retry delay).
A place taken there is shared with the admissions nested in its block, in the same context
(a web API call admits, then the tool it calls runs in its place), so nothing is checked
twice and no text is matched to tell a full queue.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from guaipeca.errors import StoppedError, WriteQueueFullError

__all__ = [
    "STDIO",
    "WRITE_TOOLS",
    "ConversionSlots",
    "WriteQueue",
    "caller",
    "current_caller",
]

T = TypeVar("T")

#: The MCP tools that write (they go through the queue).
WRITE_TOOLS: Final = frozenset({"index", "upload", "delete"})
#: The caller of tool calls that come over stdio (one local agent).
STDIO: Final = "stdio"
#: Who is calling, set per request by the HTTP middleware (:data:`STDIO` when unset).
caller: contextvars.ContextVar[str] = contextvars.ContextVar("guaipeca_caller", default=STDIO)
_RECENT: Final = 8  # durations kept for the retry estimate
_MAX_RETRY_SECONDS: Final = 300


def current_caller() -> str:
    return caller.get()


@dataclass(eq=False)
class _Place:
    """A place in a queue, held by the admissions that share it (see the module's
    docstring); the caller's count drops when the last one leaves."""

    queue: WriteQueue
    who: str
    holders: int = 1


# The place the admission running in this context holds (tasks started inside copy it).
_held: contextvars.ContextVar[_Place | None] = contextvars.ContextVar(
    "guaipeca_write_place", default=None
)


class WriteQueue:
    """At most one write runs; at most ``max_queued`` wait or run, ``per_caller`` of them
    from one caller. Used from the event loop only (no lock needed for the counts)."""

    def __init__(self, max_queued: int, per_caller: int) -> None:
        if max_queued < 1 or per_caller < 1:
            raise ValueError("max_queued and per_caller must be >= 1")
        self.max_queued = max_queued
        self.per_caller = per_caller
        self._limiter = anyio.CapacityLimiter(1)
        self._by_caller: dict[str, int] = {}
        self._recent: deque[float] = deque(maxlen=_RECENT)
        #: Set when the server shuts down: queued writes are refused, and a running index
        #: run stops at its next file or batch (see ``sync_folder``'s ``stop``).
        self.stopping = threading.Event()
        self.running = 0  # writes in a worker thread now

    def stop(self) -> None:
        self.stopping.set()

    @property
    def queued(self) -> int:
        """Writes waiting or running."""
        return sum(self._by_caller.values())

    def retry_after(self) -> int:
        """Whole seconds until a slot is likely free: the writes ahead times the recent
        mean duration (at least 1 s)."""
        mean = sum(self._recent) / len(self._recent) if self._recent else 1.0
        return max(1, min(_MAX_RETRY_SECONDS, math.ceil(mean * max(1, self.queued))))

    def _refusal(self, who: str) -> WriteQueueFullError | None:
        """Why a new write from ``who`` would be refused now, or None."""
        mine = self._by_caller.get(who, 0)
        if mine >= self.per_caller:
            reason = f"you already have {mine} writes (index, upload, delete) queued"
        elif self.queued >= self.max_queued:
            reason = f"{self.queued} writes (index, upload, delete) are queued"
        else:
            return None
        return WriteQueueFullError(f"too many writes: {reason}", self.retry_after())

    @contextlib.asynccontextmanager
    async def admitted(self, who: str | None = None) -> AsyncIterator[str]:
        """A place in the queue for ``who`` (default: the current caller), counted against
        the bounds while the block runs: an upload holds it while it converts, outside the
        write turn, and takes the turn (:meth:`locked`) only to store. Inside the block of
        an admission of the same caller (this context, or a task started in it while it
        held its place), the place is shared, not taken again: the web API admits a write
        tool's call once, and the tool runs in that place.

        Raises:
            StoppedError: the server is shutting down.
            WriteQueueFullError: the queue is full for ``who``: the one refusal of a write
                for a full queue (HTTP 429 with ``Retry-After``; a tool error over MCP).
        """
        who = who if who is not None else current_caller()
        place = _held.get()
        if place is not None and place.queue is self and place.who == who and place.holders:
            place.holders += 1  # a nested admission: the caller is in already
        else:
            if self.stopping.is_set():
                raise StoppedError("the server is shutting down; retry once it is back")
            refused = self._refusal(who)
            if refused is not None:
                raise refused
            self._by_caller[who] = self._by_caller.get(who, 0) + 1
            place = _Place(self, who)
        token = _held.set(place)
        try:
            yield who
        finally:
            with contextlib.suppress(ValueError):  # left in another context: nothing to undo
                _held.reset(token)
            self._leave(place)

    def _leave(self, place: _Place) -> None:
        place.holders -= 1
        if place.holders:
            return
        left = self._by_caller[place.who] - 1
        if left:
            self._by_caller[place.who] = left
        else:
            del self._by_caller[place.who]

    async def locked(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a worker thread once every earlier write is done (the caller holds a
        place: :meth:`admitted`).

        Raises:
            StoppedError: the server began shutting down while it waited.
            Exception: whatever ``fn`` raised.
        """

        def timed() -> T:
            if self.stopping.is_set():  # queued before the shutdown: never started
                raise StoppedError("the server is shutting down; retry once it is back")
            started = time.monotonic()
            self.running += 1
            try:
                return fn()
            finally:
                self.running -= 1
                self._recent.append(time.monotonic() - started)

        # The limiter is taken on the event loop, so a queued write holds no thread, and a
        # cancelled wait leaves nothing behind; a write that started is not abandoned on
        # cancel: it finishes (and is committed) even when its client has gone.
        return await anyio.to_thread.run_sync(timed, limiter=self._limiter)

    async def run(self, fn: Callable[[], T], who: str | None = None) -> T:
        """``fn()`` in a worker thread once every earlier write is done.

        Raises:
            WriteQueueFullError: the queue is full for ``who`` (default: the current caller).
            Exception: whatever ``fn`` raised.
        """
        async with self.admitted(who):
            return await self.locked(fn)


class ConversionSlots:
    """Where uploads convert, outside the write turn: at most ``total`` at once, and one
    per caller, so one identity's slow scans never hold every slot. Used from the event
    loop only."""

    def __init__(self, total: int) -> None:
        self._limiter = anyio.CapacityLimiter(total)
        self._mine: dict[str, tuple[anyio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def slot(self, who: str) -> AsyncIterator[None]:
        """Hold the caller's slot, then one of the shared ones (waits)."""
        lock, users = self._mine.get(who, (anyio.Lock(), 0))
        self._mine[who] = (lock, users + 1)
        try:
            async with lock, self._limiter:
                yield
        finally:
            lock, users = self._mine[who]
            if users > 1:
                self._mine[who] = (lock, users - 1)
            else:
                del self._mine[who]
