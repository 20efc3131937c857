"""`guaipeca migrate` end to end: index embedded, copy to Qdrant, switch, search, copy back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guaipeca.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _rounded(text: str) -> object:
    """Hits with every float rounded to 5 significant digits (float32 sums may differ in
    their last bits between backends)."""
    return json.loads(text, parse_float=lambda x: float(f"{float(x):.5g}"))


def _config(tmp_path: Path, backend: str) -> Path:
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora: [{name: notes, path: notes}]\n"
        f"storage: {{backend: {backend}, data_dir: {tmp_path / 'data'}, "
        f"qdrant: {{path: {tmp_path / 'qdrant'}}}}}\n"
    )
    return config


def test_migrate_to_qdrant_and_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "alpaca.md").write_text("# Alpacas\n\n## Diet\n\nAlpacas graze on grass and hay.")
    (notes / "tea.txt").write_text("Green tea is steeped at 80 degrees for two minutes.")
    config = str(_config(tmp_path, "embedded"))
    assert run(capsys, "--config", config, "index")[0] == 0
    _, before, _ = run(capsys, "--config", config, "search", "what do alpacas eat", "--json")
    code, out, err = run(capsys, "--config", config, "migrate", "--to", "qdrant")
    assert code == 0, err
    assert out.startswith("notes: 2 documents (") and "copied to qdrant, 0 already copied" in out
    assert "set storage.backend: qdrant" in out
    assert not (tmp_path / "data" / "migrate-to-qdrant.jsonl").exists()  # done: no checkpoint
    code, _, err = run(capsys, "--config", config, "migrate", "--to", "embedded")
    assert code == 1 and "already 'embedded'" in err and len(err.strip().splitlines()) == 1
    config = str(_config(tmp_path, "qdrant"))
    _, after, _ = run(capsys, "--config", config, "search", "what do alpacas eat", "--json")
    assert _rounded(after) == _rounded(before)  # same hits, ids and spans; scores to 1e-5
    (notes / "new.md").write_text("# Kettles\n\nA kettle boils water for the tea.")
    code, out, _ = run(capsys, "--config", config, "index")
    assert code == 0 and "1 added" in out and "2 unchanged" in out
    code, out, err = run(capsys, "--config", config, "migrate", "--to", "embedded", "--restart")
    assert code == 0, err
    assert "notes: 3 documents" in out
    code, _, err = run(capsys, "--config", config, "migrate", "--to", "qdrant", "nope")
    assert code == 1 and "already 'qdrant'" in err
