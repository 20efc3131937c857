"""`guaipeca migrate --to postgres` end to end on a real server, and back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guaipeca.cli import main
from support.postgres import PASSWORD, PgServer, prefix_for


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _config(tmp_path: Path, backend: str, dsn: str) -> Path:
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora: [{name: notes, path: notes}]\n"
        f"storage: {{backend: {backend}, data_dir: {tmp_path / 'data'}, "
        f"postgres: {{dsn: '{dsn}', schema_prefix: {prefix_for(tmp_path)}, "
        "vector_index: exact}}\n"
    )
    return config


def test_migrate_to_postgres_and_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pg_primary: PgServer
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "alpaca.md").write_text("# Alpacas\n\n## Diet\n\nAlpacas graze on grass and hay.")
    (notes / "tea.txt").write_text("Green tea is steeped at 80 degrees for two minutes.")
    config = str(_config(tmp_path, "embedded", pg_primary.dsn()))
    assert run(capsys, "--config", config, "index")[0] == 0
    code, before, _ = run(capsys, "--config", config, "search", "grass", "--json")
    assert code == 0
    code, out, err = run(capsys, "--config", config, "migrate", "--to", "postgres")
    assert code == 0, err
    assert out.startswith("notes: 2 documents (") and "copied to postgres" in out
    assert PASSWORD not in out + err
    config = str(_config(tmp_path, "postgres", pg_primary.dsn()))
    code, after, err = run(capsys, "--config", config, "search", "grass", "--json")
    assert code == 0, err
    hits = [(h["chunk_id"], h["text"]) for h in json.loads(after)]
    assert hits == [(h["chunk_id"], h["text"]) for h in json.loads(before)]
    code, out, err = run(capsys, "--config", config, "migrate", "--to", "embedded", "--restart")
    assert code == 0 and "copied to embedded" in out, err
    code, _, err = run(capsys, "--config", config, "migrate", "--to", "postgres")
    assert code == 1 and "already 'postgres'" in err and PASSWORD not in err
