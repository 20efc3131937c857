"""One error hierarchy, with messages written for the people who read them.

Every error the library raises on purpose is a :class:`GuaipecaError` defined here, and only
here (tests/test_architecture.py checks it); the CLI and the server turn these into one-line
messages and exit codes / JSON-RPC errors at the edge. The only exception classes elsewhere
are module-private control-flow signals (a leading underscore) that never leave their module.
"""

from __future__ import annotations


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


class BackendUnavailableError(GuaipecaError):
    """The storage server cannot be reached (down, timed out, refused): retry later."""


class AuthError(GuaipecaError):
    """A request's credentials are missing or wrong; the message is safe to show."""


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
