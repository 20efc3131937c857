"""The embedding phase running behind a server: a daemon thread woken after each keyword
commit (and at start, to resume work a killed process left pending), so reads and the
keyword phase never wait for the model."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["BackgroundEmbedder"]

log = logging.getLogger("guaipeca")


class BackgroundEmbedder:
    """Runs ``work(stop)`` in one thread each time it is woken, until it returns.

    ``work`` embeds pending chunks until none are left or ``stop`` is set. A wake during a
    run makes one more run afterwards, so work committed meanwhile is never left behind.
    """

    def __init__(
        self,
        work: Callable[[threading.Event], object],
        on_error: Callable[[Exception], bool] | None = None,
    ) -> None:
        self._work = work
        # Told of a failed run; True: it reported the failure itself (a full disk, in one
        # line), so no traceback is logged.
        self._on_error = on_error
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        """Start the thread if needed and make it look for pending work."""
        with self._lock:
            if self._stop.is_set():
                return
            self._idle.clear()
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="guaipeca-embed", daemon=True
                )
                self._thread.start()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run is going on or asked for; False on timeout."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the current round (its commit is kept) and join the thread."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stop.is_set():
                break
            self._wake.clear()
            try:
                self._work(self._stop)
            except Exception as exc:  # a failed round stays pending; the next wake retries it
                if self._on_error is None or not self._on_error(exc):
                    log.exception("background embedding failed; pending chunks stay pending")
            with self._lock:
                if not self._wake.is_set():
                    self._idle.set()
        self._idle.set()
