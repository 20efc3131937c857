"""Write locks across processes (``fcntl.flock``) and threads. Readers never take them.

One mechanism, two lock files in a corpus folder:

* ``write.lock`` (:class:`WriteLock`): one commit at a time. Opening a corpus takes it too
  (to repair what a crash left), so it is only ever held for moments.
* ``writer.lock`` (:func:`claim_writer`): the corpus's *writer*, held for a whole run by the
  one process that writes the corpus (``guaipeca index``, ``reembed``, ``compact``, ``drop``,
  ``migrate``, a server's write). Any thread of that process may commit meanwhile; another
  process that wants to write is told who holds it: the holder writes its pid, host, start
  time and command line into the file.

``flock`` belongs to an open file, which the kernel closes when its process dies: a lock
whose holder is dead never blocks anyone, so no stale-lock cleanup exists or is needed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from guaipeca.errors import IndexLockedError

__all__ = ["Holder", "WriteLock", "claim_writer", "read_holder"]


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
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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


# -- the writer of a corpus -------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a writer lock, as the holder wrote it into the lock file."""

    pid: int
    host: str
    since: float  # seconds since the epoch
    command: str

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        here = "" if self.host == socket.gethostname() else f" on {self.host}"
        return f"pid {self.pid}{here} ({self.command}), since {when}"


def read_holder(path: Path) -> Holder | None:
    """The holder named in a writer lock file, or None (free, unreadable, or being written)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(int(data["pid"]), str(data["host"]), float(data["since"]), str(data["cmd"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclasses.dataclass
class _Claim:
    fd: int
    count: int


# The writer locks this process holds, by real path: a second claim of the same file (from
# any thread) counts up instead of locking again, since flock would refuse a second open
# file of the same process.
_claims: dict[str, _Claim] = {}
_claims_lock = threading.Lock()


def _forget_claims() -> None:
    """In a forked child: the inherited files stay the parent's (closing them does not
    unlock the parent's lock; LOCK_UN would), and the child holds nothing."""
    global _claims_lock
    for held in _claims.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _claims.clear()
    _claims_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_claims)


def _command() -> str:
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    line = " ".join([name, *sys.argv[1:]])
    return line if len(line) <= 200 else line[:197] + "..."


def _try_lock(path: Path) -> int | None:
    """The locked file's descriptor, or None when another process holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # A file deleted or replaced while we waited (its corpus was dropped) locks nothing.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _write_holder(fd: int) -> None:
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.time(),
        "cmd": _command(),
    }
    data = json.dumps(info).encode("utf-8") + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _enter(path: Path) -> bool:
    """Claim ``path`` if this process holds it or it is free; False when another holds it."""
    key = os.path.realpath(path)
    with _claims_lock:
        held = _claims.get(key)
        if held is not None:
            held.count += 1
            return True
        fd = _try_lock(path)
        if fd is None:
            return False
        with contextlib.suppress(OSError):  # a full disk: held, only the name is missing
            _write_holder(fd)
        _claims[key] = _Claim(fd, 1)
        return True


def _leave(path: Path) -> None:
    key = os.path.realpath(path)
    with _claims_lock:
        held = _claims[key]
        held.count -= 1
        if held.count:
            return
        del _claims[key]
        with contextlib.suppress(OSError):
            os.ftruncate(held.fd, 0)
        fcntl.flock(held.fd, fcntl.LOCK_UN)
        os.close(held.fd)


def locked_message(what: str, holder: Holder | None) -> str:
    """One line saying that another process writes ``what``, and who it is if known."""
    who = f": {holder.describe()}" if holder is not None else ""
    return f"another process is writing to {what}{who}"


@contextlib.contextmanager
def claim_writer(
    path: Path,
    *,
    what: str,
    wait: float | None = 0.0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the writer lock file ``path`` (created with its folder) for the block.

    ``wait``: seconds to wait for another process to finish (0: not at all; None: as long as
    it takes). ``on_wait`` is told once, in one line, who is waited for. Re-entrant within
    the process, from any thread.

    Raises:
        IndexLockedError: another process still holds it after ``wait`` seconds; the
            message names ``what`` and the holder (pid, command, since when).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = None if wait is None else time.monotonic() + wait
    delay, told = 0.01, False
    while not _enter(path):
        message = locked_message(what, read_holder(path))
        if deadline is not None and time.monotonic() >= deadline:
            raise IndexLockedError(f"{message}; try again when it has finished")
        if on_wait is not None and not told:
            on_wait(f"{message}; waiting for it to finish")
            told = True
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    try:
        yield
    finally:
        _leave(path)
