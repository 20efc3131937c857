"""Corpus hygiene on the command line, run for real: searches cover the configured corpora,
leftovers show with the command that drops them, 'guaipeca corpora' and 'guaipeca drop',
and the 'default' corpus remembering its folder. Also the CLI's wording: counts in the
singular, --where on extensions with or without the dot, help without type tags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guaipeca.cli import EXIT_OK, EXIT_USER, main
from guaipeca.cli.corpora import FolderRecord


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def folder(root: Path, name: str, files: dict[str, str]) -> Path:
    path = root / name
    path.mkdir()
    for file, text in files.items():
        (path / file).write_text(text, encoding="utf-8")
    return path


def test_default_remembers_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = folder(tmp_path, "first", {"a.md": "# A\n\nAlpacas graze on hay."})
    second = folder(tmp_path, "second", {"b.md": "# B\n\nBison roam the plains."})
    code, out, _ = run(capsys, "index", "--path", str(first))
    assert code == EXIT_OK
    assert out.startswith("default: 1 added") and "1 chunk embedded; 1 chunk in 1 document" in out
    # Another folder does not empty 'default': it gets a corpus of its own, and says so.
    code, out, err = run(capsys, "index", "--path", str(second))
    assert code == EXIT_OK and out.startswith("second: 1 added")
    assert (
        f"corpus 'default' holds {first.resolve()}; indexing {second.resolve()} as corpus "
        "'second' instead (--replace indexes it into 'default'"
    ) in err
    code, out, _ = run(capsys, "corpora", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["default"]["folder"] == str(first.resolve()) and rows["default"]["documents"] == 1
    assert rows["second"]["folder"] == str(second.resolve())
    # A corpus named on the command line needs --replace to change folders.
    code, _, err = run(capsys, "index", "second", "--path", str(first))
    assert code == EXIT_USER
    assert f"corpus 'second' was indexed from {second.resolve()}" in err and "--replace" in err
    code, out, _ = run(capsys, "index", "default", "--path", str(second), "--replace")
    assert code == EXIT_OK and "1 added" in out and "1 removed" in out


def test_searches_cover_the_configured_corpora_and_leftovers_can_be_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = folder(tmp_path, "old", {"reliability.md": "# Reliability\n\nThe Mozilla crash log."})
    mine = folder(tmp_path, "mine", {"m.md": "# Mine\n\nMozilla was founded in 1998."})
    assert run(capsys, "index", "--path", str(old))[0] == EXIT_OK  # a quick start's leftover
    config = tmp_path / "guaipeca.yaml"
    config.write_text(f"corpora:\n  - name: mydocs\n    path: {mine}\n", encoding="utf-8")
    monkeypatch.setenv("GUAIPECA_CONFIG", str(config))
    code, out, _ = run(capsys, "search", "Mozilla", "--json")
    assert code == EXIT_USER  # nothing configured is indexed yet (the leftover is not searched)
    assert run(capsys, "index")[0] == EXIT_OK
    code, out, _ = run(capsys, "search", "Mozilla crash log", "--json")
    assert code == EXIT_OK and {h["corpus"] for h in json.loads(out)} == {"mydocs"}
    code, out, _ = run(capsys, "search", "Mozilla crash log", "--corpus", "default", "--json")
    assert json.loads(out)[0]["doc_id"] == "reliability.md"  # named, it is still searchable

    note = "not in the configuration, so not searched; drop it with 'guaipeca drop default'"
    code, out, _ = run(capsys, "status")
    assert "default: 1 document, 1 chunk, english" in out and note in out
    assert "mydocs: 1 document, 1 chunk" in out and out.count("drop it") == 1
    code, out, _ = run(capsys, "corpora")
    assert out.splitlines() == [
        f"mydocs ({mine}): 1 document, 1 chunk",
        f"default ({old.resolve()}): 1 document, 1 chunk; {note}",
    ]

    code, _, err = run(capsys, "drop", "default")  # no terminal to confirm on
    assert code == EXIT_USER and "needs a yes: add --yes" in err
    code, out, _ = run(capsys, "drop", "default", "--yes")
    assert code == EXIT_OK
    assert (
        out.strip() == "dropped corpus 'default' (1 document, 1 chunk); no source file was touched"
    )
    assert (old / "reliability.md").exists()
    assert run(capsys, "corpora")[1].splitlines() == [f"mydocs ({mine}): 1 document, 1 chunk"]
    code, _, err = run(capsys, "drop", "default", "--yes")
    assert code == EXIT_USER and "no corpus named 'default'" in err


def test_where_on_extension_takes_it_with_or_without_the_dot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, "docs", {"a.md": "# A\n\nBudget report.", "b.txt": "Budget notes."})
    run(capsys, "index", "--path", str(docs))
    for value in ('"txt"', '".txt"', '"TXT"', '{"$in": ["txt"]}'):
        code, out, _ = run(
            capsys, "search", "budget", "--where", f'{{"extension": {value}}}', "--json"
        )
        assert code == EXIT_OK and [h["doc_id"] for h in json.loads(out)] == ["b.txt"], value


def test_help_is_full_sentences_without_type_tags(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("index", "search", "drop", "corpora", "eval", "serve"):
        code, out, _ = run(capsys, command, "--help")
        assert code == EXIT_OK and "<bool>" not in out, command
    out = run(capsys, "index", "--help")[1]
    text = " ".join(out.replace("│", " ").split())
    assert "It goes into the corpus named as the argument, or into 'default';" in text


# What a keyword search must not import: each costs tens of milliseconds at start-up.
_HEAVY = ("onnxruntime", "tokenizers", "httpx", "httpx2", "mcp", "starlette", "uvicorn", "docutils")


def test_a_keyword_search_does_not_load_the_model(tmp_path: Path) -> None:
    docs = folder(tmp_path, "docs", {"a.md": "# A\n\nThe nightly backup runs at two."})
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUAIPECA_")}
    env["GUAIPECA_HOME"] = str(tmp_path / "home")
    script = (
        "import sys\n"
        f"HEAVY = {_HEAVY!r}\n"
        "from guaipeca.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "heavy = [m for m in HEAVY if m in sys.modules and m != 'onnxruntime']\n"
        "print('heavy:', *heavy, file=sys.stderr)\n"
        "print('model loaded' if 'onnxruntime' in sys.modules else 'no model', file=sys.stderr)\n"
        "sys.exit(code)\n"
    )

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        *_, loaded, model = done.stderr.strip().splitlines()
        return model if args[0] != "search" or "keyword" not in args else f"{model}; {loaded}"

    assert cli("index", "--path", str(docs)) == "model loaded"
    # Nor the libraries of the server, the tokenizer or the HTTP reranker (issue 31: cold).
    assert cli("search", "backup", "--mode", "keyword") == "no model; heavy:"
    assert cli("status") == "no model"
    assert cli("search", "backup") == "model loaded"  # hybrid needs the query's vector


def test_index_from_another_folder_without_a_config_does_not_empty_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = folder(tmp_path, "here", {"a.md": "# A\n\nAlpacas graze on hay."})
    there = folder(tmp_path, "there", {"b.md": "# B\n\nBison roam the plains."})
    monkeypatch.chdir(here)
    assert run(capsys, "index")[1].startswith("default: 1 added")
    monkeypatch.chdir(there)
    code, out, err = run(capsys, "index")
    assert code == EXIT_OK and out.startswith("there: 1 added") and "0 removed" in out
    assert "corpus 'default' holds" in err
    code, out, _ = run(capsys, "search", "alpacas bison", "--json")  # no config: every corpus
    assert {h["doc_id"] for h in json.loads(out)} == {"a.md", "b.md"}


def test_the_folder_record_remembers_each_corpus_folder(tmp_path: Path) -> None:
    record = FolderRecord(tmp_path / "data")
    assert record.get("default") is None
    record.set("default", tmp_path / "a")
    record.set("notes", tmp_path / "b")
    assert FolderRecord(tmp_path / "data").read() == {
        "default": str(tmp_path / "a"),
        "notes": str(tmp_path / "b"),
    }
    record.forget("default")
    assert record.read() == {"notes": str(tmp_path / "b")}
    record.path.write_text("{broken", encoding="utf-8")
    assert record.read() == {}  # unreadable: nothing remembered (a warning is logged)
