"""One error hierarchy, with messages written for the people who read them.

Every error the library raises on purpose is a :class:`GuaipecaError`; the CLI and the
server turn these into one-line messages and exit codes / JSON-RPC errors at the edge.
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


class BackendUnavailableError(GuaipecaError):
    """The storage server cannot be reached (down, timed out, refused): retry later."""
