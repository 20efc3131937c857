"""``guaipeca audit``: the server's audit log (writes and denied requests), filtered by
identity, corpus and time, oldest first, rotated files included."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from guaipeca.cli.context import current_settings, out
from guaipeca.config import audit_path
from guaipeca.errors import InvalidArgumentError


def _when(option: str, value: str | None) -> datetime | None:
    """An ISO 8601 date or time; one without a zone is UTC.

    Raises:
        InvalidArgumentError: not such a date or time.
    """
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgumentError(
            f"{option}: {value[:60]!r} is not a date or time "
            "(ISO 8601, e.g. 2026-12-05 or 2026-12-05T14:30)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def audit(
    identity: Annotated[
        str | None,
        typer.Option("--identity", help="Only this caller, e.g. jwt:alice or token:<name>."),
    ] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="Only this corpus.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this date or time (ISO 8601; UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Up to this date or time (ISO 8601; UTC).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON lines.")] = False,
) -> None:
    """Show the server's audit log: every write and every denied request."""
    from guaipeca.server.audit import AuditQuery, read_audit

    loaded = current_settings()
    path = audit_path(loaded.settings.audit, loaded.data_dir)
    if path is None:
        raise InvalidArgumentError("audit.enabled is false: the server keeps no audit log")
    query = AuditQuery(identity, corpus, _when("--since", since), _when("--until", until))
    if not path.exists() and not path.with_name(path.name + ".1").exists():
        out.print(f"no audit log yet at {path}")
        return
    try:
        for line in read_audit(path, query):
            if as_json:
                out.print_verbatim(json.dumps(line, ensure_ascii=False))
                continue
            detail = f"  ({line['detail']})" if line.get("detail") else ""
            out.print_verbatim(
                f"{line.get('time')}  {line.get('identity')}  {line.get('door')}  "
                f"{line.get('corpus') or '-'}  {line.get('outcome')}{detail}"
            )
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the audit log {path}: {exc.strerror}") from None
