"""The checks :class:`~guaipeca.index.Index` runs on what it is given: its folder, a
query, and a search's cancel event."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from pathlib import Path

from guaipeca.config import MAX_TOP_K
from guaipeca.errors import InvalidArgumentError, StoppedError
from guaipeca.types import SEARCH_MODES

__all__ = ["MAX_QUERY_CHARS", "check_query", "checkpoint", "location_problem"]

MAX_QUERY_CHARS = 8192


def location_problem(path: Path, exc: OSError) -> str:
    """One line on why ``path`` cannot hold an index."""
    reasons = {
        errno.ENOTDIR: "part of that path is a file, not a folder",
        errno.EEXIST: "a file of that name is in the way",
        errno.EACCES: "it is not writable (permission denied)",
        errno.EPERM: "the operation is not permitted there",
        errno.EROFS: "the file system is read-only",
        errno.ENOENT: "a folder cannot be created there",
        errno.ENOSPC: "no space left on the device",
    }
    reason = reasons.get(exc.errno or 0, (exc.strerror or str(exc)).lower())
    return f"cannot use {str(path)[:300]} as an index folder: {reason}"


def checkpoint(cancel: threading.Event | None) -> Callable[[], None]:
    """A check that raises :class:`StoppedError` once ``cancel`` is set."""

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise StoppedError("search stopped: its caller's deadline passed")

    return check


def check_query(query: str, top_k: int, mode: str, depth: int, k: float) -> None:
    """Refuse a search's arguments that cannot be served (one line each)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgumentError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgumentError(
            f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}"
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgumentError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    if mode not in SEARCH_MODES:
        raise InvalidArgumentError(
            f"mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r:.30}"
        )
    if not 1 <= depth <= 10_000:
        raise InvalidArgumentError("candidates must be from 1 to 10000")
    if not k > 0:
        raise InvalidArgumentError("rrf_k must be positive")
