"""What counts as a full disk (``errors.disk_full``): the OSError codes, SQLite's and the
Rust libraries' wording, through a chain of causes; and the one-line message."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from guaipeca.errors import DISK_FULL_HINT, DiskFullError, GuaipecaError, disk_full


def test_full_disks_are_recognised_however_they_are_reported(tmp_path: Path) -> None:
    wrapped = GuaipecaError("indexing failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    for exc in (
        OSError(errno.ENOSPC, "No space left on device"),
        sqlite3.OperationalError("database or disk is full"),
        ValueError("An IO error occurred: 'No space left on device (os error 28)'"),
        wrapped,
    ):
        full = disk_full(exc, tmp_path)
        assert isinstance(full, DiskFullError), exc
        message = str(full)
        assert message.startswith(f"no space left on the disk holding {tmp_path} (")
        assert message.endswith(DISK_FULL_HINT) and "\n" not in message
        assert full.free is not None and full.free > 0
    quota = disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"), tmp_path)
    assert quota is not None and str(quota).startswith("the disk quota is used up for")


def test_other_errors_are_not_a_full_disk(tmp_path: Path) -> None:
    for exc in (
        OSError(errno.EACCES, "Permission denied"),
        sqlite3.OperationalError("database is locked"),
        ValueError("bad value"),
    ):
        assert disk_full(exc, tmp_path) is None


def test_the_free_space_is_read_from_the_nearest_existing_folder(tmp_path: Path) -> None:
    full = DiskFullError(tmp_path / "not" / "made" / "yet")
    assert full.free is not None and "not/made/yet" in str(full)
