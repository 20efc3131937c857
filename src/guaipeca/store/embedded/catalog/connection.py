"""The catalog's connections: one writer, a reader per thread (WAL), meta values and the
write transaction's BEGIN IMMEDIATE … COMMIT."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guaipeca.errors import NotFoundError
from guaipeca.store.embedded.catalog.sql import IDENTITY, connect, damaged
from guaipeca.store.embedded.catalog.txn import WriteTxn
from guaipeca.store.embedded.migrations import migrate

__all__ = ["CatalogConnection"]


def _file_id(path: Path | None) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None in memory or when it is missing."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class CatalogConnection:
    """The catalog's connections, meta values and write transactions (the read queries
    are :class:`~guaipeca.store.embedded.catalog.reads.Catalog`'s)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._local = threading.local()
        self._closed = False
        try:
            self._db = connect(str(path) if path else ":memory:")
            #: Which file this is (device, inode): another process's rebuild makes a new one.
            self.file_id = _file_id(path)
            if path is not None:
                self._db.execute("PRAGMA journal_mode = WAL")
                # FULL: a commit survives power loss, not just a process crash.
                self._db.execute("PRAGMA synchronous = FULL")
            migrate(self._db)
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None

    # -- connections -------------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads. On disk each thread gets its own (WAL readers never block)."""
        self._check_open()
        if self.path is None:
            with self._lock:
                yield self._db
            return
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        try:
            if db is None:
                db = connect(str(self.path))
                db.execute("PRAGMA query_only = ON")
                self._local.db = db
            yield db
        except sqlite3.DatabaseError as exc:
            if not self.path.parent.is_dir():  # its folder is gone: dropped meanwhile
                raise NotFoundError(
                    f"corpus {self.path.parent.name!r} was dropped or rebuilt by another "
                    "process while in use (e.g. 'guaipeca index --force'); run the request "
                    "again"
                ) from None
            raise damaged(self.path, exc) from None

    def replaced(self) -> bool:
        """Whether another file now sits at this catalog's path (the corpus was dropped
        and made again by another process, e.g. ``guaipeca index --force``)."""
        if self._closed or self.path is None:
            return False
        now = _file_id(self.path)
        return now is not None and now != self.file_id

    def _check_open(self) -> None:
        """Refuse work once closed: a thread without its reader connection yet would
        otherwise open the file again, or fail to when the corpus was dropped meanwhile
        (issue 38: "unable to open database file" during ``index --force``).

        Raises:
            NotFoundError: the catalog is closed.
        """
        if self._closed:
            where = self.path.parent.name if self.path else "(memory)"
            raise NotFoundError(
                f"corpus {where!r} was closed (dropped, rebuilt or its index closed) while "
                "in use; run the request again"
            )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._reading() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, values: Mapping[str, str]) -> None:
        with self.write(derived=False) as txn:
            for k, v in values.items():
                txn.set_meta(k, v)

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    def vector_identity(self) -> dict[str, Any] | None:
        """The recorded identity of the vectors (None: nothing recorded yet); fields that
        were not recorded (corpora older than identities) are None."""
        with self._reading() as db:
            row = db.execute(f"SELECT {', '.join(IDENTITY)} FROM vector_identity").fetchone()
        return None if row is None else dict(zip(IDENTITY, row, strict=True))

    # -- writes ------------------------------------------------------------------------
    @contextmanager
    def write(self, *, derived: bool = True) -> Iterator[WriteTxn]:
        """One write transaction: BEGIN IMMEDIATE … COMMIT, rolled back on any exception.

        ``derived=False`` marks a write that changes nothing the vectors or the lexical
        index derive from (metadata, file state): it keeps the generation, so derived
        indexes stay in step without any work.
        """
        with self._lock:
            self._check_open()
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise damaged(self.path, exc) from None
            try:
                txn = WriteTxn(self._db, bump=derived)
                yield txn
                txn.finish()
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise damaged(self.path, exc) from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def read_sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query (for the integrity check)."""
        with self._reading() as db:
            return [tuple(r) for r in db.execute(sql, list(params))]

    def size_bytes(self) -> int:
        if self.path is None:
            return 0
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def vacuum(self) -> None:
        with self._lock:
            self._db.execute("VACUUM")
            if self.path is not None:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
