"""The command lines of the systems Guaipeca replaces, run for real through ``main``: the
original Guaipeca's (``--check-model``, ``search --hybrid``, its data folder), A-RAG-OG's
``index.py FILE...``, and ``migrate-config`` of both configs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from guaipeca import Index
from guaipeca.cli import EXIT_OK, EXIT_USAGE, EXIT_USER, main
from guaipeca.config import load_settings
from support.legacy import ARAGOG_ENV, AUDIT, ORIGINAL_SAMPLE, original_data


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def original(tmp_path: Path) -> Path:
    """The original's sample config, its two corpus folders holding a few documents."""
    (tmp_path / "epm").mkdir()
    (tmp_path / "finance").mkdir()
    (tmp_path / "epm" / "audit.md").write_text(AUDIT)
    (tmp_path / "finance" / "ifrs.md").write_text(
        "# IFRS 16\n\nLeases are recognised on the balance sheet as right-of-use assets."
    )
    path = tmp_path / "guaipeca.yaml"
    path.write_text(ORIGINAL_SAMPLE)
    return path


def test_check_model_as_the_original_wrote_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--check-model")
    assert code == EXIT_OK
    code, same, _ = run(capsys, "check-model")
    shown = [line.split()[0] for line in out.splitlines()]
    assert shown == [line.split()[0] for line in same.splitlines()]
    assert "provider            bundled" in out
    assert run(capsys)[0] == EXIT_USAGE  # no command, no flag: still a usage error


def test_the_original_cli_lines_on_its_sample_config(
    capsys: pytest.CaptureFixture[str], original: Path
) -> None:
    config = str(original)
    code, out, err = run(capsys, "-c", config, "index")
    assert code == EXIT_OK, err
    assert "epm-docs: 1 added" in out and "finance-reference: 1 added" in out
    code, out, err = run(capsys, "-c", config, "index", "all")  # its 'all': every corpus
    assert code == EXIT_OK, err
    assert "epm-docs: 0 added" in out and "finance-reference: 0 added, 0 changed, 1 unch" in out
    code, out, _ = run(capsys, "--config", config, "search", "HFM data audit", "--hybrid")
    assert code == EXIT_OK
    assert out.splitlines()[0].startswith("1. ") and "audit.md" in out.splitlines()[0]
    code, out, _ = run(
        capsys, "-c", config, "search", "leases", "--hybrid", "--corpora", "finance-reference"
    )
    assert code == EXIT_OK and "ifrs.md" in out and "audit.md" not in out
    # hybrid: false in the file is the original's dense search, the default of `search`
    code, out, _ = run(capsys, "-c", config, "search", "HFM data audit", "--json", "--explain")
    assert code == EXIT_OK
    explained = json.loads(out)[0]["explanation"]
    assert explained["fusion"] == "dense" and explained["keyword"] is None
    code, _, err = run(capsys, "-c", config, "search", "q", "--hybrid", "--mode", "keyword")
    assert code == EXIT_USAGE and "--hybrid contradicts --mode keyword" in err


def test_migrate_config_writes_the_original_sample_in_our_keys(
    capsys: pytest.CaptureFixture[str], original: Path, caplog: pytest.LogCaptureFixture
) -> None:
    code, out, _ = run(capsys, "migrate-config", str(original))
    assert code == EXIT_OK
    data = yaml.safe_load(out)
    assert data["search"]["mode"] == "dense" and "hybrid" not in data["search"]
    assert "table_aware" not in data["chunking"] and data["server"]["transport"] == "both"
    target = original.parent / "new.yaml"
    code, _, err = run(capsys, "migrate-config", str(original), "-o", str(target))
    assert code == EXIT_OK and f"wrote {target}" in err
    caplog.clear()
    migrated = load_settings(target, env={}, cwd=original.parent).settings
    assert migrated == load_settings(original, env={}, cwd=original.parent).settings
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # nothing old left
    assert run(capsys, "migrate-config", str(original), "-o", str(target))[0] == EXIT_USER


def test_migrate_config_turns_an_aragog_env_into_yaml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    env = tmp_path / ".env"
    env.write_text(ARAGOG_ENV)
    code, out, _ = run(capsys, "migrate-config", str(env))
    assert code == EXIT_OK
    assert "# MINIO_ENDPOINT: not used: documents are read from the corpus folders" in out
    data = yaml.safe_load(out)
    assert data["server"]["rate_limit_rps"] == "5" and data["server"]["transport"] == "http"
    assert data["rerank"]["url"] == "http://localhost:8002/v1/rerank"


def test_the_original_data_folder_is_detected_and_imported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("faiss")
    # The original's data sits where ours does by default: ~/.guaipeca/data (here the
    # test's GUAIPECA_HOME), beside our own index once imported.
    home = Path(os.environ["GUAIPECA_HOME"])
    original_data(home, tmp_path / "docs")
    code, out, _ = run(capsys, "status")
    assert code == EXIT_OK
    assert f"note: {home / 'data'} is the original Guaipeca's data" in out
    code, _, err = run(capsys, "index", "--path", str(home))
    assert code == EXIT_USER
    assert err.strip() == (
        f"error: {home} is the original Guaipeca's data (FAISS index and metadata.json of "
        f"epm-docs): run 'guaipeca import-faiss {home}' to bring its documents in"
    )
    code, out, err = run(capsys, "import-faiss", str(home), "--json")
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert (report["corpus"], report["documents"], report["chunks_read"]) == ("epm-docs", 2, 3)
    assert (report["faiss_vectors"], report["faiss_dimensions"]) == (3, 384)
    code, out, _ = run(capsys, "search", "HFM data audit", "--hybrid", "--top-k", "1")
    assert code == EXIT_OK and out.startswith("1. ") and "audit.md" in out.splitlines()[0]
    code, _, err = run(capsys, "import-faiss", str(tmp_path / "docs"))
    assert code == EXIT_USER and "no original Guaipeca data in" in err


def test_index_a_list_of_files_as_aragog_did(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "doc1.md").write_text("# Doc one\n\nAlpacas graze on grass.")
    (tmp_path / "sub" / "doc2.txt").write_text("Green tea is steeped at 80 degrees.")
    (tmp_path / "other.md").write_text("Not listed, so not indexed.")
    code, out, err = run(capsys, "index", "doc1.md", "sub/doc2.txt")
    assert code == EXIT_OK, err
    assert "default: 2 added" in out
    code, out, _ = run(capsys, "index", "other.md")  # adds; removes nothing
    assert code == EXIT_OK and "1 added" in out and "0 removed" in out
    code, out, _ = run(capsys, "index", "doc1.md", "--corpus", "picked")
    assert code == EXIT_OK and "picked: 1 added" in out
    data = load_settings(cwd=tmp_path).data_dir
    with Index(data / "index") as index:
        assert sorted(d.doc_id for d in index.list_documents(corpus="default")) == [
            "doc1.md",
            "other.md",
            "sub/doc2.txt",
        ]
    code, _, err = run(capsys, "index", "doc1.md", "default")
    assert code == EXIT_USER and "name corpora or list files, not both" in err
    code, out, _ = run(capsys, "index", "sub", "--corpus", "folder")  # one folder: as --path
    assert code == EXIT_OK and "folder: 1 added" in out
