"""Whether the client of a request is still there (issue 29, item 9).

A search whose client has left must give its slot back at its next checkpoint, not at
its deadline. :class:`DepartureMiddleware` notices the disconnect of a ``POST`` to the
tool routes (the MCP routes and the web API) and leaves a :class:`Departure` in the scope
and in :data:`current_departure`; the search gate links each search's cancel event to it.

An MCP tool call runs in its session's task, not in the task of the ``POST`` that carries
it, so the tool server reads the departure from the request the SDK hands it
(:func:`departure_of`) and sets :data:`current_departure` itself.

Writes follow it too (issue 29, item 2): a write tool waiting for the write queue is
cancelled when its client leaves (:func:`until_departure`), and an upload not yet
accepted as a job stops converting (server/uploads.py); nothing is written then.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Awaitable, Callable, Collection
from typing import Final, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guaipeca.errors import AbandonedError

__all__ = [
    "DEPARTURE_SCOPE_KEY",
    "Departure",
    "DepartureMiddleware",
    "current_departure",
    "departure_of",
    "until_departure",
]

T = TypeVar("T")

#: Where :class:`DepartureMiddleware` leaves the request's :class:`Departure`.
DEPARTURE_SCOPE_KEY: Final = "guaipeca.departure"


class Departure:
    """Set once the client has left; then every linked cancel event is set and every
    callback called.

    Used on the event loop only (the events it sets are read by worker threads).
    """

    def __init__(self) -> None:
        self.gone = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()

    def on_leave(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the client leaves (at once if it has left); returns the
        unlink to call once it no longer matters."""
        if self.gone:
            callback()
            return lambda: None
        key = next(self._ids)
        self._callbacks[key] = callback

        def unlink() -> None:
            self._callbacks.pop(key, None)

        return unlink

    def link(self, event: threading.Event) -> Callable[[], None]:
        """Set ``event`` when the client leaves (at once if it has left); returns the
        unlink to call once the event no longer matters."""
        return self.on_leave(event.set)

    async def wait(self) -> None:
        """Return once the client has left."""
        left = anyio.Event()
        unlink = self.on_leave(left.set)
        try:
            await left.wait()
        finally:
            unlink()

    def leave(self) -> None:
        self.gone = True
        callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback()


#: The departure of the request the current tool call serves (None: stdio, or no HTTP).
current_departure: contextvars.ContextVar[Departure | None] = contextvars.ContextVar(
    "guaipeca_departure", default=None
)


def departure_of(scope: Scope) -> Departure | None:
    value = scope.get(DEPARTURE_SCOPE_KEY)
    return value if isinstance(value, Departure) else None


async def until_departure(fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()``, cancelled if the client of the current request leaves first (a write
    waiting for its turn never starts; one that started finishes, as a cancelled write does).

    Raises:
        AbandonedError: the client left and ``fn`` was cancelled.
        Exception: whatever ``fn`` raised.
    """
    departure = current_departure.get()
    if departure is None:  # stdio, or a request nobody watches
        return await fn()
    with anyio.CancelScope() as scope:
        unlink = departure.on_leave(scope.cancel)
        try:
            return await fn()
        finally:
            unlink()
    raise AbandonedError("cancelled: the client left before its write began; nothing was written")


class DepartureMiddleware:
    """For a ``POST`` to one of ``paths`` (or under one of ``prefixes``): a
    :class:`Departure` set when the client disconnects before the answer is complete.

    Once the application has read the whole body, a watcher waits on ``receive`` for the
    disconnect (uvicorn wakes every waiter, so the application's own disconnect listener
    is not robbed); it ends with the request.
    """

    def __init__(
        self, app: ASGIApp, paths: Collection[str] = (), prefixes: Collection[str] = ()
    ) -> None:
        self.app = app
        self.paths = frozenset(paths)
        self.prefixes = tuple(prefixes)

    def _watched(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "POST":
            return False
        path = str(scope.get("path", ""))
        return path in self.paths or path.startswith(self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._watched(scope):
            await self.app(scope, receive, send)
            return
        departure = Departure()
        scope[DEPARTURE_SCOPE_KEY] = departure
        body_read = anyio.Event()
        answered = False

        async def watching_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not answered:
                    departure.leave()
            elif not message.get("more_body", False):
                body_read.set()
            return message

        async def watching_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        async def watch() -> None:
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            if not answered:
                departure.leave()

        token = current_departure.set(departure)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                try:
                    await self.app(scope, watching_receive, watching_send)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            current_departure.reset(token)
