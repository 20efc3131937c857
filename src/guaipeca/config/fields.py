"""What the section models are built from: the limits several sections share, the frozen base
model, the field checks several sections reuse (language, extensions, URLs, origins, hosts,
secrets) and path handling (``~``, paths relative to the config file, ``GUAIPECA_HOME``).

Nothing here knows a section; the sections (engine.py, sections.py) import from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationInfo

from guaipeca.errors import ConfigError
from guaipeca.text.languages import language_name

__all__ = [
    "MAX_TOP_K",
    "NAME_CHARS",
    "SUPPORTED_EXTENSIONS",
    "FrozenModel",
    "GiB",
    "MiB",
    "absolute_path",
    "check_extensions",
    "check_host",
    "check_language",
    "check_origin",
    "check_url",
    "expand_user",
    "home_dir",
    "non_empty_secret",
    "not_empty_path",
]

MiB: Final = 1024 * 1024
GiB: Final = 1024 * MiB
#: Most hits one library search returns (search.top_k and every top_k argument); the MCP tools
#: allow fewer (TOOL_MAX_TOP_K in server/tools/common.py).
MAX_TOP_K: Final = 1000

#: File extensions Guaipeca can convert to text (§2.1), lowercase with the leading dot.
SUPPORTED_EXTENSIONS: Final[tuple[str, ...]] = (
    ".md",
    ".markdown",
    ".txt",
    ".rst",
    ".adoc",
    ".asciidoc",
    ".pdf",
    ".docx",
    ".pptx",
    ".xlsx",
    ".html",
    ".htm",
    ".png",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
)

#: Characters of a corpus name (and, without '.', of a Qdrant collection prefix).
NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


# -- shared validation helpers ---------------------------------------------------------
def check_language(value: str) -> str:
    # An ISO code (pt, pt-BR) or a Snowball name; the Snowball name is what is kept.
    return language_name(value)


def check_extensions(values: list[str]) -> list[str]:
    out: list[str] = []
    for raw in values:
        ext = raw.strip().lower()
        ext = ext if ext.startswith(".") else f".{ext}"
        if ext not in SUPPORTED_EXTENSIONS:
            raise ValueError(
                f"unsupported extension {raw.strip()[:40]!r} "
                f"(supported: {', '.join(SUPPORTED_EXTENSIONS)})"
            )
        if ext not in out:
            out.append(ext)
    if not out:
        raise ValueError(f"must list at least one of {', '.join(SUPPORTED_EXTENSIONS)}")
    return out


def not_empty_path(value: object) -> object:
    # Path("") is "." — an empty value would silently mean "this folder".
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


def expand_user(path: Path) -> Path:
    try:
        return path.expanduser()
    except RuntimeError:  # "~someone" with no such user, or no home folder at all
        raise ValueError(f"cannot expand '~' in {str(path)[:60]!r}: no such home folder") from None


def absolute_path(value: Path | None, info: ValidationInfo) -> Path | None:
    """Expand ``~`` and anchor a relative path at the config file's folder.

    The base comes from the validation context (``{"base_dir": folder}``), which the
    loader sets; without one, relative paths are taken from the current folder. The path
    is normalised without touching the filesystem, so an unplugged disk does not stall
    or fail loading.
    """
    if value is None:
        return None
    path = expand_user(value)
    if not path.is_absolute():
        context = info.context if isinstance(info.context, dict) else {}
        base = context.get("base_dir")
        path = (Path(base) if base is not None else Path.cwd()) / path
    return Path(os.path.normpath(path))


def non_empty_secret(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not value.get_secret_value().strip():
        raise ValueError("must not be empty (remove the key to turn it off)")
    return value


def check_url(value: str | None) -> str | None:
    if value is None:
        return None
    url = value.strip()
    scheme, sep, rest = url.partition("://")
    if scheme not in ("http", "https") or not sep or not rest:
        raise ValueError("must be an http:// or https:// URL")
    return url


def check_origin(origin: str) -> str:
    # A trailing slash or a path never matches the browser's Origin header, which would
    # make CORS fail silently.
    scheme, sep, rest = origin.partition("://")
    if origin != "*" and not (sep and scheme in ("http", "https") and rest and "/" not in rest):
        raise ValueError(
            f"{origin[:60]!r} is not an origin: write scheme and host only, "
            "e.g. https://chat.example.org (no path, no trailing slash)"
        )
    return origin


def check_host(host: str) -> str:
    # A Host header value: a name or address, optionally ':port' or ':*'; '*' is any host.
    host = host.strip().lower()
    if host != "*" and (not host or any(c in host for c in "/ @?#\\") or "://" in host):
        raise ValueError(
            f"{host[:60]!r} is not a host name: write a name or address, optionally with "
            "':port', e.g. search.example.org or guaipeca:8090 (no scheme, no path)"
        )
    return host


class FrozenModel(BaseModel):
    """The base of every section: immutable, unknown keys refused, no inf or nan."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# -- where Guaipeca keeps its state -------------------------------------------------------
def home_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where Guaipeca keeps its state: ``$GUAIPECA_HOME`` or ``~/.guaipeca``."""
    home = env.get("GUAIPECA_HOME")
    try:
        return expand_user(Path(home)) if home else Path.home() / ".guaipeca"
    except ValueError as exc:
        raise ConfigError(f"GUAIPECA_HOME: {exc}") from None
    except RuntimeError:
        raise ConfigError("cannot find your home folder: set GUAIPECA_HOME") from None
