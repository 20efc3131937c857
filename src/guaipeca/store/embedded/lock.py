"""A write lock across processes (``fcntl.flock``) and threads, so a CLI ``index`` and a
running server never write one corpus at the same time. Readers never take it."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from guaipeca.errors import IndexLockedError

__all__ = ["WriteLock"]


class WriteLock:
    """Exclusive, re-entrant within a thread; waits up to ``timeout`` seconds for others."""

    def __init__(self, path: Path | None, *, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> WriteLock:
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise IndexLockedError("another writer in this process holds the index")
        try:
            if self._depth == 0 and self.path is not None:
                self._fd = self._acquire_file()
        except BaseException:
            self._thread_lock.release()
            raise
        self._depth += 1
        return self

    def _acquire_file(self) -> int:
        assert self.path is not None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise IndexLockedError(
                        f"another process is writing to this index ({self.path.parent.name}); "
                        "try again when it has finished"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()
