"""A team's server for the access tests (tests/server/test_guard.py, the web page's):
two groups, three corpora, HS256 JWTs for their people and the static token.

- ``contracts``: the legal group reads and writes it; nobody else sees it;
- ``handbook``: everyone reads it, the sales group writes it;
- ``archive``: configured, but granted to nobody (only stdio sees it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import Embedder
from guaipeca.server import Service

#: The server's static token and HS256 secret (32 bytes or more: no weak-key warning).
STATIC_TOKEN = "team-static-token-0123456789abcdef"
JWT_SECRET = "team-jwt-secret-0123456789abcdef-0123456789"

GRANTS: list[dict[str, Any]] = [
    {"who": {"group": "legal"}, "corpora": ["contracts"], "can": ["read", "write"]},
    {"who": {"group": "sales"}, "corpora": ["handbook"], "can": ["write"]},
    {"who": {"anyone": True}, "corpora": ["handbook"], "can": ["read"]},
]

FILES = {
    "contracts": {
        "nda.md": "# Mutual NDA\n\nThe parties keep the pond agreement confidential.\n\n"
        "## Term\n\nThe agreement lasts five years from signature.\n",
        "lease.md": "# Office lease\n\nThe tenant pays rent for the pond office monthly.\n",
    },
    "handbook": {
        "welcome.md": "# Welcome\n\nEveryone reads the handbook about the pond office.\n\n"
        "## Holidays\n\nThe office closes for the pond festival.\n",
    },
    "archive": {"old.md": "# Old minutes\n\nThe pond committee met in 1999.\n"},
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def person(subject: str, *groups: str) -> str:
    """An HS256 JWT for ``subject`` in ``groups`` (signed with :data:`JWT_SECRET`)."""
    return jwt.encode({"sub": subject, "groups": list(groups)}, JWT_SECRET, algorithm="HS256")


def static_identity() -> str:
    """The audit log's identity of :data:`STATIC_TOKEN`."""
    return "token:" + hashlib.sha256(STATIC_TOKEN.encode()).hexdigest()[:16]


@contextmanager
def team_service(
    root: Path, embedder: Embedder, server: dict[str, Any] | None = None, **extra: Any
) -> Iterator[Service]:
    """The team's service over ``root`` (corpus folders, data), indexed and embedded;
    ``server`` adds to its ``server:`` section, ``extra`` replaces top-level sections."""
    for corpus, files in FILES.items():
        (root / corpus).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (root / corpus / name).write_text(text, encoding="utf-8")
    data = root / "data"
    raw: dict[str, Any] = {
        "corpora": [{"name": n, "path": str(root / n)} for n in FILES],
        "upload": {"allow": ["contracts", "handbook"], "max_file_size": 100_000},
        "storage": {"data_dir": str(data)},
        "server": {
            "auth_token": STATIC_TOKEN,
            "jwt_secret": JWT_SECRET,
            "allowed_hosts": ["guaipeca"],
            "rate_limit_rps": 10_000,
            "rate_limit_burst": 10_000,
            **(server or {}),
        },
        "access": GRANTS,
        **extra,
    }
    settings = parse_settings(raw, env={}, cwd=root)
    index = Index(data / "index", embedder=embedder, settings=settings.engine())
    service = Service(index, LoadedSettings(settings, root / "guaipeca.yaml", data))
    for corpus in FILES:
        service.reindex(corpus)
    assert index.wait_for_embedding(60)
    try:
        yield service
    finally:
        index.close()
