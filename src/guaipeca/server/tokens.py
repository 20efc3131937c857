"""Named tokens: several Bearer tokens, each with a name, kept hashed in one file of the data
folder (``tokens.json``, mode 0600) and managed with ``guaipeca token add | list | revoke``.

Only the SHA-256 of each secret is stored. A secret is 32 random bytes, so a fast hash is
enough: there is nothing to guess that a slow hash would protect (unlike a password). The
server reads the file at its first request and again whenever it changes on disk, so a
revoked token is refused from the next request on, without a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from guaipeca.errors import ConfigError, InvalidArgumentError, NotFoundError

__all__ = ["TOKENS_FILE", "NamedToken", "TokenFile"]

log = logging.getLogger("guaipeca.server")

#: The file of named tokens, in the data folder.
TOKENS_FILE: Final = "tokens.json"
_FORMAT: Final = 1
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# server.auth_token's identity is ``token:<16 hex digits>``: no name may look like one.
_RESERVED: Final = re.compile(r"[0-9a-f]{16}")
_SECRET_PREFIX: Final = "gpq_"
_MAX_FILE_BYTES: Final = 4 * 1024 * 1024
_RACY_NS: Final = 2_000_000_000


@dataclass(frozen=True, slots=True)
class NamedToken:
    """One named token as stored: its name, the SHA-256 of its secret, when it was made."""

    name: str
    sha256: str
    created: str


def digest(secret: str) -> str:
    """The stored form of a secret: its SHA-256, in hex."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def check_name(name: str) -> str:
    """``name`` when it can name a token.

    Raises:
        InvalidArgumentError: it is empty, too long, has other characters than letters,
            digits, ``.``, ``_`` and ``-``, or is 16 hex digits (server.auth_token's identity).
    """
    if not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"invalid token name {name[:80]!r}: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if _RESERVED.fullmatch(name):
        raise InvalidArgumentError(
            f"invalid token name {name!r}: 16 hex digits name server.auth_token's identity"
        )
    return name


class TokenFile:
    """The named tokens of one data folder (``<data_dir>/tokens.json``).

    Thread-safe. :meth:`find` is what the server calls on every request; it reloads the
    file when its inode, size or modification time changed.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / TOKENS_FILE
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._tokens: tuple[NamedToken, ...] = ()

    def exists(self) -> bool:
        return self.path.is_file()

    # -- reading ---------------------------------------------------------------------------
    def _read(self) -> tuple[NamedToken, ...]:
        """The tokens in the file (none when it does not exist).

        Raises:
            ConfigError: the file cannot be read or is not a token file.
        """
        try:
            with self.path.open("rb") as f:
                raw = f.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the token file: {exc.strerror}") from None
        try:
            if len(raw) > _MAX_FILE_BYTES:
                raise ValueError("too large")
            data = json.loads(raw)
            if data.get("format") != _FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            return tuple(
                NamedToken(str(t["name"]), str(t["sha256"]), str(t["created"]))
                for t in data["tokens"]
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{self.path}: not a token file ({exc})") from None

    def entries(self) -> list[NamedToken]:
        """Every named token, by name.

        Raises:
            ConfigError: the file cannot be read or is not a token file.
        """
        return sorted(self._read(), key=lambda t: t.name)

    def find(self, secret: str) -> str | None:
        """The name of the token whose secret is ``secret``, else None.

        Every stored digest is compared, in constant time. A file that has become unreadable
        or damaged while the server runs refuses every named token (and says so in the log)
        rather than keep accepting revoked ones.
        """
        wanted = digest(secret)
        found = None
        for token in self._current():
            if hmac.compare_digest(token.sha256, wanted):
                found = token.name
        return found

    def _current(self) -> tuple[NamedToken, ...]:
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        seen = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
        # A file changed within the last seconds may change again with the same size, inode
        # and timestamp (timestamps are as coarse as the kernel's clock tick): read it again.
        racy = seen is not None and time.time_ns() - seen[2] < _RACY_NS
        with self._lock:
            if seen == self._seen and not racy:
                return self._tokens
            try:
                self._tokens = self._read() if st else ()
            except ConfigError as exc:
                log.error("named tokens refused until the file is fixed: %s", exc)
                self._tokens = ()
            if st and seen != self._seen and stat.S_IMODE(st.st_mode) & 0o077:
                log.warning("%s can be read by other users: chmod 600 it", self.path)
            self._seen = seen
            return self._tokens

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time across processes (a lock file beside the token file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(TOKENS_FILE + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, tokens: tuple[NamedToken, ...]) -> None:
        """Replace the file atomically (a 0600 temporary file, fsynced, renamed)."""
        data: dict[str, Any] = {
            "format": _FORMAT,
            "tokens": [{"name": t.name, "sha256": t.sha256, "created": t.created} for t in tokens],
        }
        temporary = self.path.with_name(f".{TOKENS_FILE}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def add(self, name: str) -> str:
        """Make a token named ``name`` and return its secret (stored only as a hash).

        Raises:
            InvalidArgumentError: a bad name, or one already in use.
            ConfigError: the file cannot be read or is not a token file.
        """
        check_name(name)
        with self._locked():
            tokens = self._read()
            if any(t.name == name for t in tokens):
                raise InvalidArgumentError(
                    f"a token named {name!r} exists already (revoke it first to replace it)"
                )
            secret = _SECRET_PREFIX + secrets.token_urlsafe(32)
            created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            self._write((*tokens, NamedToken(name, digest(secret), created)))
        return secret

    def revoke(self, name: str) -> None:
        """Remove the token named ``name``: the server refuses it from its next request.

        Raises:
            NotFoundError: no token has that name.
            ConfigError: the file cannot be read or is not a token file.
        """
        with self._locked():
            tokens = self._read()
            kept = tuple(t for t in tokens if t.name != name)
            if len(kept) == len(tokens):
                raise NotFoundError(f"no token named {name[:80]!r} (see 'guaipeca token list')")
            self._write(kept)
