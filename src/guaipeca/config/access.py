"""The ``access:`` section (who may read and write which corpora) and the ``audit:``
section (where writes and denied requests are logged).

With no ``access:`` section every valid credential reads and writes every corpus, as
before grants existed; with one, a caller gets only what its grants give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import Field, field_validator, model_validator

from guaipeca.config.fields import FrozenModel, MiB, absolute_path, not_empty_path
from guaipeca.config.messages import did_you_mean
from guaipeca.errors import KeyProblems

__all__ = [
    "ALL_CORPORA",
    "WHO_KINDS",
    "AccessGrant",
    "AuditSettings",
    "Who",
    "audit_path",
    "check_grants",
]

#: In a grant's ``corpora``: every corpus, those configured later included.
ALL_CORPORA: Final = "*"
#: The ways a grant names its holders (``anyone: true`` matches every caller).
WHO_KINDS: Final = ("token", "subject", "group", "role", "scope", "anyone")

Right = Literal["read", "write"]


class Who(FrozenModel):
    """Whom a grant is for: exactly one of its keys."""

    token: str | None = Field(None, min_length=1, description="a named token's name")
    subject: str | None = Field(None, min_length=1, description="a JWT's sub")
    group: str | None = Field(None, min_length=1, description="a value of the groups claim")
    role: str | None = Field(None, min_length=1, description="a value of the roles claim")
    scope: str | None = Field(None, min_length=1, description="one of the token's scopes")
    anyone: Literal[True] | None = Field(None, description="true: every caller")

    @model_validator(mode="after")
    def _exactly_one(self) -> Who:
        given = [k for k in WHO_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            how = f"got {', '.join(given)}" if given else "got none"
            raise ValueError(f"give exactly one of {', '.join(WHO_KINDS)} ({how})")
        return self

    @property
    def kind(self) -> str:
        """Which key is set: token, subject, group, role, scope or anyone."""
        return next(k for k in WHO_KINDS if getattr(self, k) is not None)

    @property
    def value(self) -> str:
        """The value it matches ("true" for anyone)."""
        return "true" if self.anyone else str(getattr(self, self.kind))


def _read_only() -> list[Right]:
    return ["read"]


class AccessGrant(FrozenModel):
    """``who`` may ``can`` (read, write) the ``corpora`` (names, or ``*`` for all)."""

    who: Who = Field(description="token, subject, group, role, scope or anyone")
    corpora: list[str] = Field(min_length=1, description="corpus names, or '*' for every one")
    can: list[Right] = Field(
        default_factory=_read_only,
        min_length=1,
        description="read and/or write (write includes read)",
    )


class AuditSettings(FrozenModel):
    enabled: bool = Field(True, description="log every write and every denied request")
    file: Path | None = Field(
        None, description="JSON-lines log (null: audit.jsonl in the data folder)"
    )
    max_bytes: int = Field(10 * MiB, ge=1024, description="size at which the log is rotated")
    backups: int = Field(5, ge=1, le=1000, description="rotated files kept (file.1, file.2...)")

    _path_not_empty = field_validator("file", mode="before")(not_empty_path)
    _path_absolute = field_validator("file")(absolute_path)


def check_grants(grants: list[AccessGrant], corpora: list[str]) -> None:
    """Every corpus a grant names is configured (or ``*``).

    Raises:
        KeyProblems: naming ``access.N.corpora.M`` and, when one is close, the right name.
    """
    problems: list[tuple[tuple[str | int, ...], str]] = []
    known = ", ".join(corpora) or "none"
    for i, grant in enumerate(grants):
        for j, name in enumerate(grant.corpora):
            if name == ALL_CORPORA or name in corpora:
                continue
            hint = did_you_mean(name, corpora)
            problems.append(
                (
                    ("access", i, "corpora", j),
                    f"{name[:70]!r} is not a configured corpus"
                    f"{'; ' + hint if hint else ''} (corpora: {known}, or '*')",
                )
            )
    if problems:
        raise KeyProblems(problems)


def audit_path(audit: AuditSettings, data_dir: Path) -> Path | None:
    """Where the audit log goes: ``audit.file``, else ``audit.jsonl`` in the data folder;
    None when auditing is off."""
    if not audit.enabled:
        return None
    return audit.file if audit.file is not None else data_dir / "audit.jsonl"
