"""Disk per identity: the bytes of uploaded files each identity keeps in corpus folders.

Every identity gets ``upload.max_bytes_per_identity`` (0: no limit). A ledger in the data
folder (``uploads.sqlite``: corpus, file, identity, bytes) records who sent each uploaded
file that is still there; replacing a file moves it to the identity that sent the new
bytes, deleting it frees its bytes. Files that left the folder by other means (a user's
``rm``, a sync) are noticed when the identity nears its budget: before refusing, its rows
are checked against the disk and the vanished ones dropped. Without a usable ledger (a
read-only data folder) uploads go on unbudgeted, with one warning.

Checked twice: before converting (a cheap early refusal) and again in the write turn,
where writes run one at a time, so two uploads of one identity cannot both slip under.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from guaipeca.errors import UploadQuotaError

__all__ = ["UploadLedger"]

log = logging.getLogger("guaipeca.server")

LEDGER_FILE: Final = "uploads.sqlite"


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


class UploadLedger:
    """Who uploaded what, and how many bytes each identity keeps."""

    def __init__(self, data_dir: Path, budget: int, *, uploads_on: bool = True) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if not uploads_on or budget <= 0:
            return  # nothing to budget: no file is made
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(data_dir / LEDGER_FILE, check_same_thread=False)
            db.execute(
                "CREATE TABLE IF NOT EXISTS uploads (corpus TEXT NOT NULL, rel TEXT NOT NULL,"
                " identity TEXT NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY (corpus, rel))"
            )
            db.execute("CREATE INDEX IF NOT EXISTS by_identity ON uploads (identity)")
            db.commit()
            self._db = db
        except (OSError, sqlite3.Error) as exc:
            log.warning("uploads are not budgeted per identity: %s: %s", LEDGER_FILE, exc)

    def check(
        self, identity: str, corpus: str, rel: str, size: int, locate: Callable[[str, str], Path]
    ) -> None:
        """Refuse an upload of ``size`` bytes as ``corpus``/``rel`` that would take
        ``identity`` over its budget. ``locate(corpus, rel)`` is the file's path, to drop
        rows of files no longer there before refusing.

        Raises:
            UploadQuotaError: over the budget, naming the setting.
        """
        if self.budget <= 0 or self._db is None:
            return
        used = self._used(identity, (corpus, rel))
        if used + size > self.budget:
            self._forget_vanished(identity, locate)
            used = self._used(identity, (corpus, rel))
        if used + size > self.budget:
            raise UploadQuotaError(
                f"this upload ({size:,} bytes) would take your uploaded files to "
                f"{used + size:,} bytes, over upload.max_bytes_per_identity "
                f"({self.budget:,}): delete some of your uploads, or ask the server's "
                "operator to raise it; nothing was written"
            )

    def record(self, identity: str, corpus: str, rel: str, size: int) -> None:
        """``identity`` now keeps ``corpus``/``rel`` (``size`` bytes)."""
        self._write(
            "INSERT INTO uploads VALUES (?, ?, ?, ?) ON CONFLICT (corpus, rel) DO UPDATE "
            "SET identity = excluded.identity, bytes = excluded.bytes",
            (corpus, rel, identity, size),
        )

    def forget(self, corpus: str, rel: str) -> None:
        """``corpus``/``rel`` is gone (deleted)."""
        self._write("DELETE FROM uploads WHERE corpus = ? AND rel = ?", (corpus, rel))

    def used(self, identity: str) -> int:
        """Bytes ``identity``'s uploads keep, as recorded."""
        return self._used(identity) if self._db is not None else 0

    def _used(self, identity: str, replacing: tuple[str, str] | None = None) -> int:
        # The file being replaced does not count: the new bytes take its place.
        assert self._db is not None
        sql = "SELECT COALESCE(SUM(bytes), 0) FROM uploads WHERE identity = ?"
        args: tuple[str, ...] = (identity,)
        if replacing is not None:
            sql += " AND NOT (corpus = ? AND rel = ?)"
            args = (identity, *replacing)
        with self._lock:
            row = self._db.execute(sql, args).fetchone()
        return int(row[0])

    def _forget_vanished(self, identity: str, locate: Callable[[str, str], Path]) -> None:
        assert self._db is not None
        with self._lock:
            rows = self._db.execute(
                "SELECT corpus, rel, bytes FROM uploads WHERE identity = ?", (identity,)
            ).fetchall()
        for corpus, rel, size in rows:
            try:
                actual = _size(locate(corpus, rel))
            except Exception:  # the corpus left the configuration: its files are not ours
                actual = None
            if actual is None:
                self.forget(corpus, rel)
            elif actual != size:
                self.record(identity, corpus, rel, actual)

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        if self._db is None:
            return
        try:
            with self._lock:
                self._db.execute(sql, args)
                self._db.commit()
        except sqlite3.Error as exc:  # a full disk: the upload itself stands
            log.warning("the uploads ledger was not updated: %s", exc)

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
            self._db = None
