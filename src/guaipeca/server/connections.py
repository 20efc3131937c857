"""uvicorn's HTTP/1.1 protocol with read timeouts against slow clients (slowloris) and a
cap on connections, so that the process never runs out of descriptors accepting them."""

from __future__ import annotations

import asyncio
import logging
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["TimedH11Protocol"]

log = logging.getLogger("guaipeca.server")


class TimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with read timeouts against slow clients (slowloris).

    A connection must send a request's headers within ``header_timeout`` seconds (from
    its start, or from the end of the previous response), and may pause no longer than
    ``body_timeout`` seconds while it sends a body; otherwise it is closed, with one log
    line (the application sees a disconnect). uvicorn itself only times out idle
    keep-alive connections.
    """

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    #: Connections open at once (0: no cap); one more is closed as soon as it is accepted,
    #: which frees its descriptor at once (uvicorn's limit_concurrency answers it 503
    #: only once it has sent a request, holding the descriptor until then).
    max_connections: int = 0
    _last_refusal_log = -60.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if self.max_connections and len(self.connections) > self.max_connections:
            now = time.monotonic()
            if now - TimedH11Protocol._last_refusal_log >= 10:
                TimedH11Protocol._last_refusal_log = now
                log.warning(
                    "%d connections open (the open-files budget): closing new ones",
                    len(self.connections) - 1,
                )
            transport.close()
            return
        self._read_timer: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # uvicorn's keep-alive timer covers the idle gap; data re-arms

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _disarm(self) -> None:
        timer = getattr(self, "_read_timer", None)
        if timer is not None:
            timer.cancel()
            self._read_timer = None
        self._owed = ""

    def _arm(self) -> None:
        """Start the timer for what the client owes now. Headers get one deadline in all
        (bytes trickling in do not extend it: a slowloris sends a header line a second);
        a body's timer restarts with each chunk, bounding a pause."""
        state = self.conn.their_state
        if state is h11.IDLE and not (self.cycle and not self.cycle.response_complete):
            if getattr(self, "_owed", "") == "headers":
                return  # still the same headers: their deadline stands
            self._disarm()
            self._owed = "headers"
            self._read_timer = self.loop.call_later(
                self.header_timeout, self._timed_out, "request headers"
            )
            return
        self._disarm()
        if state is h11.SEND_BODY:
            self._read_timer = self.loop.call_later(
                self.body_timeout, self._timed_out, "request body"
            )

    def _timed_out(self, what: str) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        client = f"{self.client[0]}" if self.client else "a client"
        log.info("closed the connection of %s: no %s within the read timeout", client, what)
        self.transport.close()
