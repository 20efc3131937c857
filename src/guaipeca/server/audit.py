"""The audit log: every write and every denied request, one JSON object a line.

A line holds ``time`` (UTC, ISO 8601), ``identity`` (the caller's key: ``token:...``,
``jwt:<sub>``, ``stdio``, ``ip:<address>`` without auth), ``door`` (the tool or route:
``tool:upload``, ``DELETE /documents``), ``corpus``, ``outcome`` (``ok``, ``error``,
``denied``) and, for errors and denials, a short ``detail``. The file is the admin's
(``audit.file``) and is rotated by size (``audit.max_bytes``, ``audit.backups`` files kept
as ``file.1`` ... ``file.N``); :func:`read_audit` reads it and its rotated files, oldest
first, which is what ``guaipeca audit`` shows.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.handlers
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

__all__ = ["AuditLog", "AuditQuery", "Outcome", "current_door", "door", "read_audit"]

Outcome = Literal["ok", "error", "denied"]
#: Which door a request came through (a route, or ``tool:<name>``), for the audit log.
door: contextvars.ContextVar[str] = contextvars.ContextVar("guaipeca_door", default="stdio")
_DETAIL_CHARS: Final = 300


def current_door() -> str:
    return door.get()


class AuditLog:
    """Appends audit lines to ``path`` (rotated), or nowhere when ``path`` is None.

    Thread-safe: writes run in worker threads. The folder is made on the first line.
    """

    def __init__(self, path: Path | None, max_bytes: int = 10 << 20, backups: int = 5) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._handler: logging.handlers.RotatingFileHandler | None = None
        if path is not None:
            self._handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", delay=True
            )
            self._handler.setFormatter(logging.Formatter("%(message)s"))

    def record(
        self,
        identity: str,
        outcome: Outcome,
        corpus: str | None = None,
        detail: str | None = None,
        *,
        where: str | None = None,
    ) -> None:
        """One line: now, ``identity``, the current door (or ``where``), ``corpus``,
        ``outcome`` and ``detail`` (cut short)."""
        if self._handler is None:
            return
        line: dict[str, object] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "identity": identity,
            "door": where or current_door(),
            "corpus": corpus,
            "outcome": outcome,
        }
        if detail:
            line["detail"] = " ".join(detail.split())[:_DETAIL_CHARS]
        record = logging.LogRecord("guaipeca.audit", logging.INFO, "", 0, "", None, None)
        record.msg = json.dumps(line, ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            self._handler.emit(record)
            # Closed after each line (reopened by the next): no file is held open between
            # the rare writes and denials, and an outside rotation is followed.
            self._handler.close()

    def close(self) -> None:
        if self._handler is not None:
            self._handler.close()


@dataclass(frozen=True)
class AuditQuery:
    """Which lines :func:`read_audit` keeps (every condition that is set must hold)."""

    identity: str | None = None
    corpus: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def keeps(self, line: dict[str, object]) -> bool:
        if self.identity is not None and line.get("identity") != self.identity:
            return False
        if self.corpus is not None and line.get("corpus") != self.corpus:
            return False
        if self.since is None and self.until is None:
            return True
        try:
            when = datetime.fromisoformat(str(line.get("time")))
        except ValueError:
            return False
        return (self.since is None or when >= self.since) and (
            self.until is None or when <= self.until
        )


def _files(path: Path) -> list[Path]:
    """The log and its rotated files, oldest first (``file.N`` ... ``file.1``, ``file``)."""
    rotated = []
    for candidate in path.parent.glob(path.name + ".*"):
        suffix = candidate.name[len(path.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), candidate))
    return [p for _, p in sorted(rotated, reverse=True)] + ([path] if path.exists() else [])


def read_audit(path: Path, query: AuditQuery = AuditQuery()) -> Iterator[dict[str, object]]:
    """The audit lines ``query`` keeps, oldest first, from ``path`` and its rotated files.
    Lines that are not JSON objects (a torn last line) are skipped.

    Raises:
        OSError: a file cannot be read.
    """
    for file in _files(path):
        with file.open(encoding="utf-8", errors="replace") as lines:
            for text in lines:
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                if isinstance(line, dict) and query.keeps(line):
                    yield line
