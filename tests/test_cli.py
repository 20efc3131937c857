"""The command line, run for real (in-process through ``main`` and as the installed script)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guaipeca.cli import EXIT_OK, EXIT_USAGE, EXIT_USER, main

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "guaipeca"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "alpaca.md").write_text(
        "# Alpacas\n\n## Diet\n\nAlpacas graze on grass and hay.\n\n"
        "## Wool\n\nTheir fleece is soft."
    )
    (folder / "sub" / "tea.txt").write_text("Green tea is steeped at 80 degrees for two minutes.")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    return folder


def test_index_then_search_prints_ranked_hits_with_source_and_span(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    code, out, _ = run(capsys, "index", str(notes))
    assert code == EXIT_OK
    assert "2 added" in out and "0 failed" in out
    code, out, _ = run(capsys, "search", "what do alpacas eat", "--top-k", "2")
    assert code == EXIT_OK
    first = out.splitlines()[0]
    assert first.startswith("1. ") and first.split()[1].endswith("alpaca.md") and "chars" in first
    assert "Alpacas > Diet" in out and "**graze**" not in out  # snippet marks query terms only
    assert "**Alpacas**" in out


def test_search_json_is_machine_readable_and_spans_are_exact(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    run(capsys, "index", str(notes))
    code, out, _ = run(capsys, "search", "tea temperature", "--json", "--mode", "keyword")
    assert code == EXIT_OK
    hits = json.loads(out)
    assert hits[0]["doc_id"] == "sub/tea.txt"
    source = Path(hits[0]["source_path"]).read_text()
    assert source[hits[0]["start"] : hits[0]["end"]] == hits[0]["text"]


def test_second_index_run_embeds_nothing_and_removed_files_leave(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    run(capsys, "index", str(notes), "--json")
    code, out, _ = run(capsys, "index", str(notes), "--json")
    summary = json.loads(out)
    assert code == EXIT_OK and summary["unchanged"] == 2 and summary["chunks_embedded"] == 0
    (notes / "sub" / "tea.txt").unlink()
    (notes / "alpaca.md").write_text("# Alpacas\n\n## Diet\n\nAlpacas eat grass.")
    summary = json.loads(run(capsys, "index", str(notes), "--json")[1])
    assert (summary["removed"], summary["changed"], summary["documents"]) == (1, 1, 1)
    code, out, _ = run(capsys, "search", "green tea", "--json", "--mode", "keyword")
    assert all(h["doc_id"] != "sub/tea.txt" for h in json.loads(out))


def test_unreadable_files_are_reported_and_the_rest_is_indexed(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    (notes / "latin1.txt").write_bytes("café olé".encode("latin-1"))
    (notes / "junk.md").write_bytes(b"abc\x00def")
    code, out, err = run(capsys, "index", str(notes))
    assert code == EXIT_OK and "2 added" in out and "2 failed" in out
    assert "latin1.txt: not UTF-8 text" in err and "junk.md" in err


def test_status_reports_corpora(capsys: pytest.CaptureFixture[str], notes: Path) -> None:
    run(capsys, "index", str(notes), "--corpus", "mine")
    code, out, _ = run(capsys, "status", "--json")
    data = json.loads(out)
    assert code == EXIT_OK and data["documents"] == 2 and data["corpora"][0]["name"] == "mine"
    code, out, _ = run(capsys, "status")
    assert "mine: 2 documents" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("search", "anything"), EXIT_USER, "empty"),
        (("search", "x", "--mode", "fuzzy"), EXIT_USAGE, "--mode"),
        (("search", "x", "--top-k", "0"), EXIT_USAGE, "top-k"),
        (("search", "x", "--where", "{not json"), EXIT_USER, "JSON"),
        (("index", "/definitely/not/here"), EXIT_USER, "not a folder"),
        (("index", ".", "--corpus", "bad name!"), EXIT_USER, "corpus name"),
        (("frobnicate",), EXIT_USAGE, "No such command"),
    ],
)
def test_errors_exit_with_meaningful_codes_and_one_line_messages(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], code: int, message: str
) -> None:
    got, _, err = run(capsys, *args)
    assert got == code
    assert message in err
    assert "Traceback" not in err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == EXIT_OK
    for command in ("index", "search", "status"):
        assert command in out
        sub_code, sub_out, _ = run(capsys, command, "--help")
        assert sub_code == EXIT_OK and "Usage" in sub_out
    assert run(capsys, "--version")[1].startswith("guaipeca ")


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_the_installed_script_exits_with_the_codes_main_returns(tmp_path: Path) -> None:
    env = {**os.environ, "GUAIPECA_HOME": str(tmp_path)}
    done = subprocess.run([str(SCRIPT), "search", "x"], env=env, capture_output=True, text=True)
    assert done.returncode == EXIT_USER and done.stderr.startswith("error: ")
    assert done.stdout == ""


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_the_quick_start_works_with_no_network_at_all(tmp_path: Path) -> None:
    """The README's main job (index the repo's docs/, then search) inside ``unshare -n``:
    no network namespace access at all, so any download attempt would fail."""
    if not _can_unshare():
        if os.environ.get("CI"):
            pytest.fail("unshare -n is not available to prove the quick start is offline")
        pytest.skip("unshare -n is not permitted here")
    env = {
        **os.environ,
        "GUAIPECA_HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "*",
    }
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(var, None)
    index = subprocess.run(
        ["unshare", "-n", str(SCRIPT), "index", str(REPO / "docs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert index.returncode == 0, index.stderr
    assert "0 failed" in index.stdout
    search = subprocess.run(
        ["unshare", "-n", str(SCRIPT), "search", "how are chunks kept exact?", "--top-k", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert search.returncode == 0, search.stderr
    lines = search.stdout.splitlines()
    assert lines[0].startswith("1. ") and "docs/" in lines[0] and "chars" in lines[0]
    assert any(line.startswith("3. ") for line in lines)
