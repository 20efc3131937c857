"""Connection strings without their secrets: what logs, errors and reprs may show."""

from __future__ import annotations

import re

__all__ = ["describe", "scrub"]

_URL_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def describe(dsn: str) -> str:
    """``PostgreSQL at host:port/dbname`` for a URL or key=value DSN, never its password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # a malformed DSN: say so without echoing it
        return "PostgreSQL (unparsable DSN)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or 5432
    db = parts.get("dbname") or parts.get("user") or ""
    return f"PostgreSQL at {host}:{port}/{db}"


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with passwords (in URLs, ``password=`` pairs and the given secrets) masked."""
    out = _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return out
