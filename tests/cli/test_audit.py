"""``guaipeca audit``: reads the server's audit log and its rotated files, filtered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guaipeca.cli.app import main
from guaipeca.cli.context import EXIT_OK, EXIT_USER
from guaipeca.server.audit import AuditLog


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    path = tmp_path / "guaipeca.yaml"
    path.write_text(
        "corpora: [{name: docs, path: docs}]\n"
        "audit: {file: logs/audit.jsonl, max_bytes: 1024, backups: 3}\n",
        encoding="utf-8",
    )
    return path


def test_audit_reads_rotated_files_oldest_first_and_filters(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog(config.parent / "logs/audit.jsonl", max_bytes=1024, backups=3)
    for i in range(20):  # about 150 bytes a line: rotated several times
        who = "jwt:alice" if i % 2 else "jwt:bob"
        log.record(who, "denied" if i % 2 else "ok", "docs", f"line {i}", where="tool:upload")
    assert (config.parent / "logs/audit.jsonl.1").exists()

    code, out, _ = _run(capsys, "--config", str(config), "audit", "--json")
    assert code == EXIT_OK
    lines = [json.loads(x) for x in out.splitlines()]
    numbers = [int(str(x["detail"]).split()[1]) for x in lines]
    assert numbers == sorted(numbers) and numbers[-1] == 19  # the oldest rotated away
    assert set(lines[0]) == {"time", "identity", "door", "corpus", "outcome", "detail"}

    code, out, _ = _run(capsys, "--config", str(config), "audit", "--identity", "jwt:bob")
    assert code == EXIT_OK and out.count("jwt:bob") == len(out.splitlines()) > 0
    assert "tool:upload  docs  ok  (line " in out
    code, out, _ = _run(capsys, "--config", str(config), "audit", "--corpus", "other")
    assert code == EXIT_OK and out == ""
    code, out, _ = _run(capsys, "--config", str(config), "audit", "--since", "2999-01-01")
    assert code == EXIT_OK and out == ""
    code, out, _ = _run(capsys, "--config", str(config), "audit", "--until", "2000-01-01T00:00")
    assert code == EXIT_OK and out == ""


def test_a_bad_time_is_one_line_naming_the_option(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "--config", str(config), "audit", "--since", "yesterday")
    assert code == EXIT_USER
    assert err.strip() == (
        "error: --since: 'yesterday' is not a date or time "
        "(ISO 8601, e.g. 2026-12-05 or 2026-12-05T14:30)"
    )


def test_no_log_yet_says_where_it_will_be(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--config", str(config), "audit")
    assert code == EXIT_OK and "no audit log yet at" in out and "audit.jsonl" in out
