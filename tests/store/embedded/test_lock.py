"""The writer lock of a corpus (``claim_writer``): one process at a time, re-entrant from
any thread of the holder, the holder named in the file, waiting with a timeout, and never
blocked by a dead holder."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from guaipeca.errors import IndexLockedError
from guaipeca.store.embedded.lock import claim_writer, read_holder

_HOLD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from guaipeca.store.embedded.lock import claim_writer\n"
    "with claim_writer(Path(sys.argv[1]), what='corpus x'):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.readline()\n"
)


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(30) == 0
    proc.stdout.close()


def test_another_process_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    path = tmp_path / "corpus" / "writer.lock"
    proc = _holder(path)
    try:
        holder = read_holder(path)
        assert holder is not None and holder.pid == proc.pid
        with pytest.raises(IndexLockedError) as refused, claim_writer(path, what="corpus 'x'"):
            pass
        message = str(refused.value)
        assert f"pid {proc.pid}" in message and "corpus 'x'" in message and "\n" not in message
        told: list[str] = []
        with (
            pytest.raises(IndexLockedError),
            claim_writer(path, what="corpus 'x'", wait=0.3, on_wait=told.append),
        ):
            pass
        assert len(told) == 1 and f"pid {proc.pid}" in told[0] and "waiting" in told[0]
    finally:
        _release(proc)
    assert read_holder(path) is None  # the holder clears its name on release
    with claim_writer(path, what="corpus 'x'"):
        assert read_holder(path) is not None and read_holder(path).pid == os.getpid()  # type: ignore[union-attr]


def test_a_waiting_claim_gets_the_lock_once_the_holder_releases_it(tmp_path: Path) -> None:
    path = tmp_path / "writer.lock"
    proc = _holder(path)
    got = threading.Event()

    def claim() -> None:
        with claim_writer(path, what="x", wait=None, on_wait=lambda line: released.set()):
            got.set()

    released = threading.Event()
    waiter = threading.Thread(target=claim)
    waiter.start()
    assert released.wait(30)  # the waiter said who it waits for
    assert not got.is_set()
    _release(proc)
    waiter.join(30)
    assert got.is_set()


def test_a_dead_holder_never_blocks(tmp_path: Path) -> None:
    path = tmp_path / "writer.lock"
    proc = _holder(path)
    proc.kill()
    proc.wait(30)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.close()
    proc.stdin.close()
    with claim_writer(path, what="x"):  # no wait: the kernel released it with the process
        pass


def test_the_holder_re_enters_from_any_thread(tmp_path: Path) -> None:
    path = tmp_path / "writer.lock"
    inner: list[bool] = []
    with claim_writer(path, what="x"):

        def again() -> None:
            with claim_writer(path, what="x"):
                inner.append(True)

        thread = threading.Thread(target=again)
        thread.start()
        thread.join(30)
        assert inner == [True]
        assert read_holder(path) is not None  # still held after the inner claim ended
    assert read_holder(path) is None


def test_a_forked_child_does_not_inherit_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "writer.lock"
    with claim_writer(path, what="x"):
        pid = os.fork()
        if pid == 0:  # the child: it holds nothing, so the parent's lock refuses it
            try:
                with claim_writer(path, what="x"):
                    os._exit(1)
            except IndexLockedError:
                os._exit(0)
            os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    # the child kept nothing: the lock is free once the parent leaves it
    with claim_writer(path, what="x"):
        pass
