"""Write every sample output shown in README.md from a real run, so none can go stale.

    .venv/bin/python scripts/readme_samples.py            # rewrite the samples in README.md
    .venv/bin/python scripts/readme_samples.py --check    # exit 1 (with a diff) if one differs

A sample is the fenced block right after a ``<!-- sample: NAME -->`` line; NAME picks the
generator below. Each runs the real CLI (a fresh home folder, no config but what it writes)
or the real MCP server through the official MCP client, on documents kept in this
repository (tests/data: two Wikipedia pages, a SciFact sample). CI runs ``--check``
(.ci/run). The check ignores what honestly varies between runs and machines: durations
(``0.7 s``, ``3.1 ms``) and the digits of scores past the second decimal.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DATA = REPO / "tests" / "data"
BIN = Path(sys.executable).parent
# The marker, then a fence at the same indentation (a sample may sit in a list item).
_SAMPLE = re.compile(
    r"^( *)<!-- sample: ([a-z0-9-]+) -->\n\1(```[a-z]*\n)(.*?)^\1```", re.M | re.S
)


class Run:
    """One fresh home folder and the ``guaipeca`` command run in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("GUAIPECA_", "XDG_"))
        } | {"HOME": str(self.home), "COLUMNS": "200", "NO_COLOR": "1"}

    def __call__(self, *args: str, shown: str | None = None) -> str:
        """``$ guaipeca ARGS`` and its output (stdout then stderr), paths made neutral."""
        done = subprocess.run(
            [str(BIN / "guaipeca"), *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"readme_samples: guaipeca {' '.join(args)} failed:\n{done.stderr}")
        command = shown or "guaipeca " + " ".join(_quote(a) for a in args)
        return self.neutral(f"$ {command}\n{done.stdout}{_final(done.stderr)}")

    def neutral(self, text: str) -> str:
        return text.replace(str(self.home), "/home/me").replace(str(self.root), "/tmp")


# A progress line written every few seconds while a phase runs ("default: embedded: 12/67
# chunks (18%), 3.1 chunks/s, about 20 s left"): how many a run prints depends on the machine's
# speed, so samples keep only each phase's closing line ("..., done in 20 s").
_PROGRESS = re.compile(r"^[^:\n]+(?:: [^:\n]+)?: [\d,/]+ \w+.*\d \w+/s\b")


# The index run names the files that took >= 0.5 s to convert: which ones (if any) depends on
# the machine's speed and load, so samples leave the line out.
_SLOW_FILES = "slowest files to convert:"


def _final(stderr: str) -> str:
    kept = [
        line
        for line in stderr.splitlines(keepends=True)
        if not _is_progress(line) and not line.startswith(_SLOW_FILES)
    ]
    return "".join(kept)


def _is_progress(line: str) -> bool:
    line = line.rstrip("\n")
    return bool(_PROGRESS.match(line)) and "done in" not in line


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w./:=@%+-]+", arg) else json.dumps(arg)


def _wiki(root: Path) -> Path:
    folder = root / "wiki"
    folder.mkdir(exist_ok=True)
    for name in ("wikipedia_duck.html", "wikipedia_mozilla.html"):
        shutil.copy(DATA / "docs" / name, folder / name)
    return folder


# -- the samples -----------------------------------------------------------------------
def quickstart(root: Path) -> str:
    """scripts/quickstart's two commands over the two Wikipedia pages."""
    run = Run(root)
    folder = _wiki(root)
    query = "when was Mozilla founded?"
    out = run("index", "--path", str(folder), shown=None).split("\n", 1)[1]
    out += run("search", query, "--top-k", "3").split("\n", 1)[1]
    head = (
        "$ mkdir -p /tmp/wiki && cp tests/data/docs/wikipedia_*.html /tmp/wiki/\n"
        f'$ bash scripts/quickstart /tmp/wiki "{query}"\n'
    )
    return head + run.neutral(out)


def search_budget(root: Path) -> str:
    """A budgeted search over the two Wikipedia pages: the best 600 characters."""
    run = Run(root)
    run("index", "--path", str(_wiki(root)))
    return run("search", "when was Mozilla founded?", "--budget", "600")


def check(root: Path) -> str:
    run = Run(root)
    run("index", "--path", str(_wiki(root)))
    return run("check")


def install_service(root: Path) -> str:
    run = Run(root)
    return run("init") + run("install-service")


def _abridge(value: Any, width: int) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str):
        return value if len(value) <= width else value[:width] + "…"
    if isinstance(value, list):
        return [_abridge(v, width) for v in value]
    if isinstance(value, dict):
        return {k: _abridge(v, width) for k, v in value.items()}
    return value


def _drop(value: Any, keys: set[str], *, top: bool = True) -> Any:
    """Without ``keys`` (a result's own ``text`` stays: only its items' go); a heading's
    ``children`` shown by title."""
    if isinstance(value, list):
        return [_drop(v, keys, top=False) for v in value]
    if isinstance(value, dict):
        return {
            k: [c["title"] for c in v] if k == "children" else _drop(v, keys, top=False)
            for k, v in value.items()
            if k not in keys or (top and k == "text")
        }
    return value


def _exchange(
    folder: Path, corpus: str, calls: list[tuple[str, dict[str, Any]]], drop: set[str], width: int
) -> str:
    """The calls through the official MCP client to the real server, one line each way
    (a list of objects: one object a line)."""
    import anyio
    from mcp import Client

    from guaipeca import Index
    from guaipeca.config import LoadedSettings, parse_settings
    from guaipeca.embed import load_embedder
    from guaipeca.server import Service, build_server

    data = folder.parent / "data"
    settings = parse_settings(
        {"corpora": [{"name": corpus, "path": str(folder)}], "storage": {"data_dir": str(data)}},
        env={},
        cwd=folder.parent,
    )
    index = Index(data / "index", embedder=load_embedder(settings.embedding), settings=settings.engine())
    service = Service(index, LoadedSettings(settings, None, data))
    service.reindex(corpus)
    # The server embeds in the background; the sample shows the state a user sees once it is
    # done, not however far a loaded machine got (hits would say "embedded": false).
    index.wait_for_embedding()
    lines: list[str] = []

    async def talk() -> None:
        async with Client(build_server(service)) as client:
            for name, args in calls:
                result = await client.call_tool(name, args)
                lines.append(f"→ {name} {json.dumps(args, ensure_ascii=False)}")
                if result.is_error:
                    lines.append(f'← isError: "{result.content[0].text}"')  # type: ignore[union-attr]
                    continue
                lines.append("← " + _lines(_abridge(_drop(result.structured_content, drop), width)))

    try:
        anyio.run(talk)
    finally:
        index.close()
    return "\n".join(lines) + "\n"


def _lines(value: Any) -> str:
    if not isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    parts, lists = [], []
    for key, v in value.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lists.append((key, v))
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(v, ensure_ascii=False)}")
    out = "{" + ", ".join(parts)
    for key, items in lists:
        rows = "".join(f"    {json.dumps(x, ensure_ascii=False)},\n" for x in items)
        out += f", {json.dumps(key)}: [\n{rows}  ]"
    return out + "}"


def mcp_exchange(root: Path) -> str:
    """A search, a table of contents and a refused call over the two Wikipedia pages."""
    return _exchange(
        _wiki(root),
        "wiki",
        [
            ("search", {"query": "when was Mozilla founded?", "top_k": 2}),
            ("get_toc", {"doc_id": "wikipedia_duck.html"}),
            ("search", {"query": "x", "top_k": 0}),
        ],
        drop={"scores", "metadata", "text", "section_id", "page_start", "page_end", "chunk_id"},
        width=100,
    )


def walkthrough(root: Path) -> str:
    """An agent's four steps over 300 SciFact abstracts (tests/data's sample)."""
    import gzip

    folder = root / "papers"
    folder.mkdir()
    with gzip.open(DATA / "beir" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for _, line in zip(range(300), fh, strict=False):
            row = json.loads(line)
            text = f"# {' '.join(row['title'].split())}\n\n{row['text']}\n"
            (folder / f"{row['_id']}.md").write_text(text, encoding="utf-8")
    seed = "papers:55"
    return _exchange(
        folder,
        "papers",
        [
            ("search", {"query": "Does low birth weight drive perinatal mortality?", "top_k": 2}),
            ("read_neighbors", {"chunk_ids": [seed], "window": 1}),
            ("find_related", {"chunk_ids": [seed], "top_k_after": 3}),
            ("get_document", {"doc_id": "596817.md", "max_chars": 400}),
        ],
        drop={"scores", "metadata", "section_id", "page_start", "page_end", "text", "corpus",
              "source_path", "position", "enrichment"},
        width=110,
    )


def _config(run: Run, body: str) -> None:
    folder = run.home / ".guaipeca"
    folder.mkdir(exist_ok=True)
    (folder / "guaipeca.yaml").write_text(body, encoding="utf-8")


def _only(text: str, prefix: str) -> str:
    """The command line and the output lines that start with ``prefix``."""
    lines = text.splitlines()
    return "\n".join([lines[0], *(line for line in lines[1:] if line.startswith(prefix))]) + "\n"


def model_mismatch(root: Path) -> str:
    """A corpus indexed with the bundled model, searched after the config names another."""
    run = Run(root)
    folder = _wiki(root)
    _config(run, f"corpora:\n  - name: wiki\n    path: {folder}\n")
    run("index")
    _config(run, f"corpora:\n  - name: wiki\n    path: {folder}\nembedding:\n  provider: static\n")
    return _only(run("search", "what do ducks eat?"), "error:")


def vector_repair(root: Path) -> str:
    """Part of a vector file zeroed: the next open restores it (warnings on stderr)."""
    run = Run(root)
    run("index", "--path", str(_wiki(root)))
    catalog = next(run.home.rglob("catalog.sqlite"))
    vectors = next(v for v in sorted(catalog.parent.glob("vectors*.f32")))
    with vectors.open("r+b") as fh:
        fh.seek(4096)  # inside the first rows in use (the file is preallocated)
        fh.write(bytes(4096))
    return _only(run("search", "what do ducks eat?", "--top-k", "1"), "WARNING")


def catalog_refused(root: Path) -> str:
    """The catalog's header zeroed: one line naming the damage and the repair."""
    run = Run(root)
    run("index", "--path", str(_wiki(root)))
    catalog = next(run.home.rglob("catalog.sqlite"))
    with catalog.open("r+b") as fh:
        fh.write(bytes(100))
    return _only(run("search", "what do ducks eat?"), "error:")


def migrate(root: Path) -> str:
    """An embedded index copied to Qdrant (qdrant-client's local mode, the qdrant extra)."""
    run = Run(root)
    folder = _wiki(root)
    _config(
        run,
        f"corpora:\n  - name: wiki\n    path: {folder}\n"
        f"storage:\n  backend: embedded\n  qdrant:\n    path: {root / 'qdrant'}\n",
    )
    run("index")
    return run("migrate", "--to", "qdrant")


SAMPLES: dict[str, Callable[[Path], str]] = {
    "quickstart": quickstart,
    "search-budget": search_budget,
    "check": check,
    "install-service": install_service,
    "mcp-exchange": mcp_exchange,
    "walkthrough": walkthrough,
    "model-mismatch": model_mismatch,
    "vector-repair": vector_repair,
    "catalog-refused": catalog_refused,
    "migrate": migrate,
}


# -- writing and checking --------------------------------------------------------------
_VOLATILE = (
    (re.compile(r"\d+(?:\.\d+)? (s|ms)\b"), r"… \1"),
    (re.compile(r"\d+(?:\.\d+)? (\w+)/s\b"), r"… \1/s"),  # rates: the machine's speed
    (re.compile(r"(score[\"']?:? )(\d\.\d\d)\d+"), r"\1\2"),
)


def _masked(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def generate(names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="readme-") as tmp:
            print(f"readme_samples: {name}…", file=sys.stderr, flush=True)
            out[name] = SAMPLES[name](Path(tmp))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a sample differs")
    parser.add_argument("names", nargs="*", help="only these samples (default: all)")
    options = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    found = [m.group(2) for m in _SAMPLE.finditer(text)]
    unknown = sorted(set(found) - set(SAMPLES))
    missing = sorted(set(SAMPLES) - set(found))
    if unknown or missing:
        print(f"readme_samples: unknown {unknown}, not in README.md {missing}", file=sys.stderr)
        return 1
    fresh = generate(options.names or found)

    def replace(m: re.Match[str]) -> str:
        indent, name = m.group(1), m.group(2)
        if name not in fresh:
            return m.group(0)
        body = "".join(f"{indent}{line}".rstrip() + "\n" for line in fresh[name].splitlines())
        return f"{indent}<!-- sample: {name} -->\n{indent}{m.group(3)}{body}{indent}```"

    new = _SAMPLE.sub(replace, text)
    if options.check:
        old_lines = _masked(text).splitlines()
        diff = list(difflib.unified_diff(old_lines, _masked(new).splitlines(), lineterm=""))
        if diff:
            print("\n".join(diff[:80]))
            print("readme_samples: README.md is stale; run scripts/readme_samples.py", file=sys.stderr)
            return 1
        print(f"readme_samples: {len(fresh)} samples match README.md")
        return 0
    README.write_text(new, encoding="utf-8")
    print(f"readme_samples: wrote {len(fresh)} samples into README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
