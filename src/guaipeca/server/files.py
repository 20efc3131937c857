"""The checks every file name and path an agent sends goes through before anything touches
the disk, and how an upload's bytes are written (atomically, never over a file by surprise).
"""

import base64
import binascii
import contextlib
import errno
import fnmatch
import hashlib
import os
import re
import secrets
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from guaipeca.convert import Converted
from guaipeca.errors import InvalidArgumentError
from guaipeca.types import MAX_DOC_ID_CHARS

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_SUBFOLDER_DEPTH",
    "PreparedUpload",
    "check_name",
    "check_subfolder",
    "check_upload",
    "decode_base64",
    "excluded",
    "existing_is_same",
    "fsync_dir",
    "real_path",
    "remove_temp_uploads",
    "same_bytes",
    "sha256_of",
    "too_large",
    "write_new",
    "write_upload",
]

#: Longest file name component, in UTF-8 bytes (the limit of common file systems).
MAX_NAME_BYTES = 255
#: Longest whole path most file systems take (Linux PATH_MAX), in bytes.
MAX_PATH_BYTES = 4096
#: Deepest subfolder an upload may name.
MAX_SUBFOLDER_DEPTH = 16

# An upload's temporary file while it is written: hidden, and with a suffix no corpus
# indexes, so a concurrent folder scan skips it.
_TEMP_PREFIX = ".guaipeca-"
_TEMP_SUFFIX = ".upload"
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Control, format (e.g. right-to-left override), private-use, surrogate, unassigned and
# line/paragraph separator characters: invisible or misleading in a file name.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


# -- names and paths -------------------------------------------------------------------
def _name_problem(name: str) -> str | None:
    if "/" in name or "\\" in name:
        return "it must not contain '/' or '\\'"
    if any(unicodedata.category(c) in _BAD_CATEGORIES for c in name):
        return "it must not contain control or invisible characters"
    if ".." in name:
        return "it must not contain '..'"
    if name.startswith("."):
        return "hidden names (starting with '.') are not allowed"
    if name != name.strip():
        return "it must not start or end with a space"
    if _PERCENT_ESCAPE.search(name):
        return "it must not contain percent-escapes such as %2e"
    return None


def check_name(raw: object, what: str = "filename") -> str:
    """A plain file or folder name, NFC-normalised.

    Checked both as NFC and as NFKC, so look-alikes that compatibility-normalise to a
    separator or a dot (full-width '／', '．．', the two-dot leader) are refused too.

    Raises:
        InvalidArgumentError: empty, too long, a path, hidden, or with invisible characters.
    """
    if not isinstance(raw, str) or not raw:
        raise InvalidArgumentError(f"{what} must be a non-empty name")
    name = unicodedata.normalize("NFC", raw)
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_NAME_BYTES} bytes")
    for form in (name, unicodedata.normalize("NFKC", name)):
        problem = _name_problem(form)
        if problem is not None:
            raise InvalidArgumentError(f"{what} {raw!r:.80} is not a plain name: {problem}")
    return name


def check_subfolder(raw: object) -> tuple[str, ...]:
    """A relative folder path written with '/', as checked names.

    Raises:
        InvalidArgumentError: absolute, with '..', '\\', empty or hidden parts, or too deep.
    """
    if not isinstance(raw, str) or not raw.strip("/"):
        raise InvalidArgumentError("subfolder must be a relative folder path such as 'notes/2024'")
    if raw.startswith("/"):
        raise InvalidArgumentError(f"subfolder {raw!r:.80} must be relative, not absolute")
    parts = raw.strip("/").split("/")
    if len(parts) > MAX_SUBFOLDER_DEPTH:
        raise InvalidArgumentError(f"subfolder is deeper than {MAX_SUBFOLDER_DEPTH} folders")
    return tuple(check_name(p, "subfolder part") for p in parts)


def excluded(rel: str, patterns: list[str]) -> bool:
    # The same rule as the folder walk of ingest: a file or any of its folders may match.
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p + "/", pat)
        for p in prefixes
        for pat in patterns
    )


def real_path(path: Path) -> Path:
    return Path(os.path.realpath(path))


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_new(target: Path, data: bytes, *, overwrite: bool, shown: str) -> bool:
    """Write ``data`` to ``target`` atomically (temp file, fsync, rename); True if it
    replaced a file. Without ``overwrite`` an existing file is never clobbered, even one
    created meanwhile: the temp file is hard-linked into place, which fails if it exists."""
    exists_error = InvalidArgumentError(
        f"{shown} already exists; pass overwrite: true to replace it"
    )
    # Hidden and with a suffix no corpus indexes, so a concurrent folder scan skips it; short,
    # so that a name of MAX_NAME_BYTES still has a temporary name the file system accepts.
    tmp = target.with_name(f"{_TEMP_PREFIX}{secrets.token_hex(6)}{_TEMP_SUFFIX}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        existed = os.path.lexists(target)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise exists_error from None
            except OSError:
                # A file system without hard links: check, then rename (a small race).
                if os.path.lexists(target):
                    raise exists_error from None
                os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(target.parent)
    return existed


def remove_temp_uploads(folder: Path) -> int:
    """Remove the temporary files a killed :func:`write_new` left in ``folder`` (hidden,
    with a suffix no corpus indexes, so never indexed); how many. Only for a folder no
    upload is being written into now."""
    removed = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            name = entry.name
            if name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
    if removed:
        fsync_dir(folder)
    return removed


def sha256_of(path: Path) -> str | None:
    """The SHA-256 of the file at ``path`` (hex), or None when there is no readable file."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def too_large(size: int, limit: int) -> str:
    return f"the file is {size:,} bytes; the limit is {limit:,} bytes ({_human(limit)})"


def _human(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def decode_base64(content: str, limit: int) -> bytes:
    """Decode strict base64, refusing an oversized payload before decoding it."""
    text = content.strip()
    # 4 characters carry 3 bytes: anything longer than this cannot fit the limit.
    if len(text) > 4 * -(-limit // 3):
        raise InvalidArgumentError(
            f"the file is about {len(text) * 3 // 4:,} bytes; "
            f"the limit is {limit:,} bytes ({_human(limit)})"
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(
            "content_base64 is not valid base64 (standard alphabet with padding, no line breaks)"
        ) from None


def check_upload(
    rel: str,
    ext: str,
    data: bytes,
    corpus: str,
    accepted: list[str],
    exclude: list[str],
    max_size: int,
) -> None:
    """Refuse an upload whose type, path, size or exclude pattern does not fit its corpus.

    Raises:
        InvalidArgumentError: what does not fit, in one line.
    """
    if ext not in accepted:
        shown = f"{ext!r}" if ext else "(no extension)"
        raise InvalidArgumentError(
            f"file type {shown} is not accepted in corpus {corpus!r} "
            f"(accepted: {', '.join(accepted) or 'none'})"
        )
    if len(rel) > MAX_DOC_ID_CHARS:
        raise InvalidArgumentError(
            f"the path in the corpus is {len(rel):,} characters; the limit is "
            f"{MAX_DOC_ID_CHARS:,} (the longest document id)"
        )
    if exclude and excluded(rel, exclude):
        raise InvalidArgumentError(
            f"{rel!r} matches an exclude pattern of corpus {corpus!r}, so it would never be indexed"
        )
    if len(data) > max_size:
        raise InvalidArgumentError(too_large(len(data), max_size))
    if not data:
        raise InvalidArgumentError("the file is empty")


def existing_is_same(target: Path, data: bytes, *, overwrite: bool, shown: str) -> bool | None:
    """None when ``target`` does not exist; True when it holds exactly ``data`` (a retry of
    an interrupted upload: what is there is indexed again); False when it may be replaced.

    Raises:
        InvalidArgumentError: it is not a regular file, or holds other bytes and
            ``overwrite`` is false.
    """
    if not os.path.lexists(target):
        return None
    if target.is_symlink() or not target.is_file():
        raise InvalidArgumentError(f"{shown} exists and is not a regular file")
    if same_bytes(target, data):
        return True
    if not overwrite:
        raise InvalidArgumentError(f"{shown} already exists; pass overwrite: true to replace it")
    return False


def write_upload(
    target: Path, data: bytes, *, overwrite: bool, shown: str, made: Callable[[Path], None]
) -> bool:
    """Make ``target``'s folder, call ``made`` on it (a last check), write ``data``
    atomically; True if a file was replaced.

    Raises:
        InvalidArgumentError: the path is longer than the file system takes.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        made(target.parent)
        return write_new(target, data, overwrite=overwrite, shown=shown)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise InvalidArgumentError(
            f"the path is too long for the file system: at most {MAX_NAME_BYTES} bytes per "
            f"name and {MAX_PATH_BYTES} bytes in all (got {str(target.name)!r:.60})"
        ) from None


@dataclass(frozen=True, slots=True)
class PreparedUpload:
    """An upload checked and converted, not yet written (``Service.prepare_upload``)."""

    corpus: str
    rel: str  # its path in the corpus folder: the document id
    target: Path
    shown: str  # how messages name it
    data: bytes
    overwrite: bool
    converted: Converted
    cache: str  # the conversion cache's key for its OCR options
