"""Whether the client of a request is still there (issue 29, item 9).

A search whose client has left must give its slot back at its next checkpoint, not at
its deadline. :class:`DepartureMiddleware` notices the disconnect of a ``POST`` to the
tool routes (the MCP routes and the web API) and leaves a :class:`Departure` in the scope
and in :data:`current_departure`; the search gate links each search's cancel event to it.

An MCP tool call runs in its session's task, not in the task of the ``POST`` that carries
it, so the tool server reads the departure from the request the SDK hands it
(:func:`departure_of`) and sets :data:`current_departure` itself.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Collection
from typing import Final

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DEPARTURE_SCOPE_KEY",
    "Departure",
    "DepartureMiddleware",
    "current_departure",
    "departure_of",
]

#: Where :class:`DepartureMiddleware` leaves the request's :class:`Departure`.
DEPARTURE_SCOPE_KEY: Final = "guaipeca.departure"


class Departure:
    """Set once the client has left; then every linked cancel event is set.

    Used on the event loop only (the events it sets are read by worker threads).
    """

    def __init__(self) -> None:
        self.gone = False
        self._events: list[threading.Event] = []

    def link(self, event: threading.Event) -> Callable[[], None]:
        """Set ``event`` when the client leaves (at once if it has left); returns the
        unlink to call once the event no longer matters."""
        if self.gone:
            event.set()
            return lambda: None
        self._events.append(event)

        def unlink() -> None:
            if event in self._events:
                self._events.remove(event)

        return unlink

    def leave(self) -> None:
        self.gone = True
        events, self._events = self._events, []
        for event in events:
            event.set()


#: The departure of the request the current tool call serves (None: stdio, or no HTTP).
current_departure: contextvars.ContextVar[Departure | None] = contextvars.ContextVar(
    "guaipeca_departure", default=None
)


def departure_of(scope: Scope) -> Departure | None:
    value = scope.get(DEPARTURE_SCOPE_KEY)
    return value if isinstance(value, Departure) else None


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
