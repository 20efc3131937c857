"""What every command prints goes through the CLI's consoles: names from the documents are
shown, never obeyed (ESC sequences, newlines, bidi overrides, rich markup, emoji codes)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from guaipeca.cli import EXIT_OK, main
from guaipeca.cli.context import VisibleFormatter

# A name that would clear the screen and turn the rest red, one that would forge a hit line,
# one that shows "cod" + "exe.md" reversed, and one rich would read as markup and an emoji.
ESC_NAME = "clear\x1b[2J\x1b[31mred.md"
NEWLINE_NAME = "line\n2. forged.md"
BIDI_NAME = "cod\u202edm.exe.md"
MARKUP_NAME = "[bold red]x :smile:.md"
BROKEN_NAME = "bad\x1b[5m.md"  # refused (binary): named in the index summary


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / "notes\x1b]0;title\x07"
    folder.mkdir()
    text = "# Alpacas\x1b[5m\n\n## Diet\n\nAlpacas graze on grass and hay in the {}.\n"
    for i, name in enumerate([ESC_NAME, NEWLINE_NAME, BIDI_NAME, MARKUP_NAME]):
        (folder / name).write_text(text.format(f"field number {i}"), encoding="utf-8")
    (folder / BROKEN_NAME).write_bytes(b"abc\x00def")
    return folder


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text


def test_names_headings_and_paths_are_printed_escaped(
    capsys: pytest.CaptureFixture[str], hostile: Path
) -> None:
    code, out, err = run(capsys, "index", "--path", str(hostile))
    assert code == EXIT_OK and "4 added" in out
    assert "failed " in err and "bad\\x1b[5m.md: looks binary" in err
    _no_raw_controls(out + err)

    code, out, _ = run(capsys, "search", "alpacas graze", "--top-k", "4", "--mode", "keyword")
    assert code == EXIT_OK
    _no_raw_controls(out)
    assert "clear\\x1b[2J\\x1b[31mred.md" in out
    assert "line\\n2. forged.md" in out
    assert "cod\\u202edm.exe.md" in out
    assert "[bold red]x :smile:.md" in out  # neither markup nor an emoji code
    assert "notes\\x1b]0;title\\x07" in out  # the folder, in each source path
    assert "Alpacas\\x1b[5m > Diet" in out  # a heading
    # Four hits: every hit line starts with its rank, and no name forged a fifth.
    ranks = [line.split(".")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert ranks == ["1", "2", "3", "4"]

    for command in ("status", "corpora", "check"):
        code, out, _ = run(capsys, command)
        assert code == EXIT_OK, command
        _no_raw_controls(out)
    assert "notes\\x1b]0;title\\x07" in run(capsys, "corpora")[1]


def test_json_output_keeps_the_names_as_they_are(
    capsys: pytest.CaptureFixture[str], hostile: Path
) -> None:
    run(capsys, "index", "--path", str(hostile))
    code, out, _ = run(capsys, "search", "alpacas graze", "--top-k", "4", "--json")
    assert code == EXIT_OK
    names = {Path(h["source_path"]).name for h in json.loads(out)}
    assert names == {ESC_NAME, NEWLINE_NAME, BIDI_NAME, MARKUP_NAME}
    assert "\x1b" not in out  # json.dumps escapes the C0 controls itself


def test_an_error_naming_a_file_is_printed_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "index", "--path", str(tmp_path / "gone\x1b[2J"))
    assert code != EXIT_OK and "gone\\x1b[2J" in err
    _no_raw_controls(err)


def test_log_messages_are_escaped_and_tracebacks_kept() -> None:
    formatter = VisibleFormatter("%(levelname)s: %(message)s")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        failure = (type(exc), exc, exc.__traceback__)
    record = logging.LogRecord(
        "guaipeca", logging.WARNING, __file__, 1, "read %s", ("a\x1b[2Jb\nc",), failure
    )
    lines = formatter.format(record).splitlines()
    assert lines[0] == "WARNING: read a\\x1b[2Jb\\nc"
    assert lines[1].startswith("Traceback") and lines[-1] == "ValueError: boom"
