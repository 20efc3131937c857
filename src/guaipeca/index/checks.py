"""The checks :class:`~guaipeca.index.Index` runs on what it is given: its folder, a
query, a search's cancel event, a corpus's vectors, a language, a chunk id."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from pathlib import Path

from guaipeca.config import MAX_TOP_K
from guaipeca.errors import (
    ConfigError,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
    StoppedError,
)
from guaipeca.store.contract import CorpusStore
from guaipeca.text.languages import language_name
from guaipeca.types import SEARCH_MODES

__all__ = [
    "MAX_QUERY_CHARS",
    "check_query",
    "check_vectors",
    "checkpoint",
    "location_problem",
    "parse_chunk_id",
    "snowball_language",
]

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


def check_vectors(store: CorpusStore) -> None:
    """Refuse dense work on a corpus whose vectors are another model's (keyword still works)."""
    mismatch = getattr(store, "mismatch", None)
    if mismatch is not None:
        raise ModelError(mismatch)


def snowball_language(value: str) -> str:
    """The Snowball name of a language given by name or ISO code (the one home of the
    mapping is text/languages.py)."""
    try:
        return language_name(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def parse_chunk_id(chunk_id: str) -> tuple[str, int]:
    """A chunk id ``"corpus:number"`` as (corpus, number)."""
    if isinstance(chunk_id, str):
        name, sep, number = chunk_id.rpartition(":")
        if sep and number.isdigit() and name:
            return name, int(number)
    raise NotFoundError(f"{chunk_id!r:.80} is not a chunk id (expected 'corpus:number')")
