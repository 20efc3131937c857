"""One error hierarchy, with messages written for the people who read them.

Every error the library raises on purpose is a :class:`GuaipecaError` defined here, and only
here (tests/test_architecture.py checks it); the CLI and the server turn these into one-line
messages and exit codes / JSON-RPC errors at the edge. The only exception classes elsewhere
are module-private control-flow signals (a leading underscore) that never leave their module.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


class GuaipecaError(Exception):
    """Base class: the message is meant for a user, not a developer."""


class ConfigError(GuaipecaError):
    """A setting is wrong: the message names the key (and the file, when there is one)."""


class InvalidFilterError(GuaipecaError):
    """A ``where`` filter is malformed: unknown operator, bad field name or bad value."""


class InvalidArgumentError(GuaipecaError):
    """An argument to a library call is out of range or of the wrong kind."""


class NotFoundError(GuaipecaError):
    """A document or chunk id does not exist in the index."""


class ModelError(GuaipecaError):
    """The embedding model could not be loaded or does not fit the index."""


class IndexCorruptError(GuaipecaError):
    """Files on disk do not agree with each other; the message says how to repair."""


class IndexLockedError(GuaipecaError):
    """Another process holds the index's write lock."""


class ConversionError(GuaipecaError):
    """A source file could not be turned into text."""


class NoTextError(ConversionError):
    """A source file holds no text to index (empty, or none found, even with OCR): nothing
    is wrong with it, so a folder sync counts it as skipped, not failed."""


class TooLargeError(ConversionError):
    """A source file is over a size limit (its pixels, an image on its page): it is left
    unread, and a folder sync counts it as skipped ("too big"), not failed."""


class ConversionTimeoutError(ConversionError):
    """A conversion ran past its time budget (``limits.convert_timeout_seconds``): the file
    is left unread, and a folder sync counts it as skipped ("too slow"), not failed."""


class AbandonedError(GuaipecaError):
    """The client left before its work was accepted: the work stopped, nothing was written."""


class BackendUnavailableError(GuaipecaError):
    """The storage server cannot be reached (down, timed out, refused): retry later."""


class ShardUnavailableError(BackendUnavailableError):
    """One shard of a sharded corpus cannot be reached; the message names it. Nothing is
    answered from the other shards unless partial results were asked for
    (``storage.postgres.partial_results``, searches only; the hits then name the shards they
    miss).

    ``shard`` is the shard's number from 0 (in ``storage.postgres.shards`` order) and
    ``label`` how messages name it, ``shard 2 of 2 (PostgreSQL at host:5432/db)``.
    """

    def __init__(self, message: str, *, shard: int | None = None, label: str = "") -> None:
        super().__init__(message)
        self.shard = shard
        self.label = label


class AuthError(GuaipecaError):
    """A request's credentials are missing or wrong; the message is safe to show."""


class IdentityProviderError(GuaipecaError):
    """The OpenID provider's keys could not be fetched, so a token cannot be checked now:
    retry later. The message is safe to show."""


class AccessDeniedError(GuaipecaError):
    """The caller's grants (``access:``) do not let it write a corpus it may read. A corpus
    it may not read is never named: that is a :class:`NotFoundError`, as for one missing."""


class UnsafePathError(GuaipecaError):
    """A client-given path that could leave its folder or look like another one."""


class SearchBusyError(GuaipecaError):
    """Every search slot stayed taken for a whole deadline."""


class SearchTimeoutError(GuaipecaError):
    """One search ran past its deadline."""


class KeyProblems(GuaipecaError, ValueError):
    """Problems found by a cross-field settings check, each at a key path below the model's
    own (a ValueError too, which is what pydantic turns into a validation error).

    Pydantic reports a model validator's error at the model itself; carrying the exact
    sub-path lets the config messages name ``corpora.2.name`` rather than ``<root>``, and one
    exception can carry several problems. It never leaves the config package: loading turns
    it into a :class:`ConfigError`.
    """

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{dotted_key(loc)}: {msg}" for loc, msg in problems))


def dotted_key(loc: tuple[object, ...]) -> str:
    """A settings key path as written in messages: ``corpora.2.name`` (``<root>`` if empty)."""
    return ".".join(str(p) for p in loc) or "<root>"


class RerankError(GuaipecaError):
    """An HTTP reranker failed or answered nonsense; searches fall back to the fused order."""


class StoppedError(GuaipecaError):
    """Work was stopped before it finished (its deadline passed, or the server is shutting
    down); everything committed before stays, and running it again continues."""


class WriteQueueFullError(GuaipecaError):
    """Too many writes are queued (in all, or for one caller); retry after a while."""

    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(f"{reason}; retry in {retry_after} s")
        self.reason = reason
        self.retry_after = retry_after


class StorageError(GuaipecaError):
    """The index's folder cannot be created or used: a file in the way, no permission, a
    read-only or special file system (such as /proc)."""


class DiskFullError(StorageError):
    """The disk (or the quota) that holds the data folder or a corpus folder is full. A user
    error: what was committed stays, the write that failed left nothing half done, and the
    next run after space is freed carries on (derived indexes are rebuilt on open)."""

    def __init__(
        self, folder: str | os.PathLike[str], *, quota: bool = False, note: str = ""
    ) -> None:
        self.folder = Path(folder)
        self.free = free_bytes(self.folder)
        self.quota = quota
        if quota:
            where = f"the disk quota is used up for {self.folder}"
        else:
            free = "" if self.free is None else f" ({_readable(self.free)} free)"
            where = f"no space left on the disk holding {self.folder}{free}"
        super().__init__(f"{where}; {note + '; ' if note else ''}{DISK_FULL_HINT}")


#: How every :class:`DiskFullError` message ends (the web API answers such a tool error
#: with HTTP 507).
DISK_FULL_HINT = "free some space, then try again"


class UploadQuotaError(GuaipecaError):
    """An upload would take its identity's uploaded files over
    ``upload.max_bytes_per_identity``; nothing was written (HTTP 507, as for a WebDAV
    quota)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}; {UPLOAD_QUOTA_HINT}")


#: How every :class:`UploadQuotaError` message ends (the web API answers such a tool error
#: with HTTP 507).
UPLOAD_QUOTA_HINT = "your uploads are at their disk budget"


# What a full disk looks like from the layers below: an OSError (ENOSPC, EDQUOT), SQLite's
# SQLITE_FULL, and the Rust libraries' messages (tantivy says "No space left on device
# (os error 28)").
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_TEXTS = ("database or disk is full", "no space left on device", "os error 28")
_QUOTA_TEXTS = ("disk quota exceeded", f"os error {errno.EDQUOT}")


def disk_full(exc: BaseException, folder: str | os.PathLike[str]) -> DiskFullError | None:
    """A :class:`DiskFullError` naming ``folder`` when ``exc`` (or what caused it) says the
    disk or quota is full, else None."""
    kind = _full_kind(exc)
    if isinstance(kind, DiskFullError):
        return kind
    return None if kind is None else DiskFullError(folder, quota=kind == "quota")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the disk or quota is full."""
    return _full_kind(exc) is not None


def _full_kind(exc: BaseException) -> DiskFullError | str | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskFullError):
            return current
        code = current.errno if isinstance(current, OSError) else None
        text = str(current).lower()
        if code == errno.EDQUOT or any(t in text for t in _QUOTA_TEXTS):
            return "quota"
        if code in _FULL_ERRNOS or any(t in text for t in _FULL_TEXTS):
            return "full"
        current = current.__cause__ or current.__context__
    return None


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Free bytes on the disk holding ``folder`` (or its nearest existing parent)."""
    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _readable(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n >= 1024**power:
            return f"{n / 1024**power:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover
