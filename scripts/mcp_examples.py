"""Write docs/mcp-tools.md: one real call of every MCP tool and its real output (abridged).

    .venv/bin/python scripts/mcp_examples.py            # rewrite docs/mcp-tools.md
    .venv/bin/python scripts/mcp_examples.py --check    # exit 1 if a tool has no example

A small sample corpus is written to a temporary folder and indexed with the configured
default model; the calls go through the official MCP client (in memory) to the real
server. Long strings and lists are cut so that the page stays readable.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import load_embedder
from guaipeca.server import Service, build_server

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "mcp-tools.md"

HANDBOOK = """\
# Operations handbook

## Backups

The nightly backup runs at 02:00 and copies the database to the tape library in Building 4.
Restores are tested on the first Monday of every month by Maria Santos.

## Incidents

### Reporting

Report an outage to the on-call engineer within 15 minutes; the incident channel is #ops.

### Post-mortems

Every incident longer than one hour gets a written post-mortem within five working days.
"""
NOTES = """\
# Meeting notes 2024-03-12

Decided: move the backup window to 03:00 from April; Maria Santos checks the tape capacity.
"""
UPLOAD = "# Visitor policy\n\nVisitors sign in at reception and wear a badge at all times.\n"

# The calls, in order; "$chunk" is replaced by the first hit's chunk id.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_folders", {}),
    ("status", {}),
    ("index", {"corpus": "handbook"}),
    ("search", {"query": "when does the backup run?", "top_k": 2}),
    ("keyword_search", {"query": "post-mortem", "top_k_after": 1}),
    (
        "keyword_and_semantic_search",
        {"query": "who restores backups?", "top_k_before": 10, "top_k_after": 1},
    ),
    ("semantic_search", {"query": "who tests restoring data?", "top_k_after": 1}),
    (
        "filtered_search",
        {"query": "backup", "entities": ["Maria Santos"], "top_k_after": 2},
    ),
    ("get_chunk", {"chunk_ids": ["$chunk"]}),
    ("read_chunk", {"chunk_ids": "$chunk"}),
    ("read_neighbors", {"chunk_ids": ["$chunk"], "window": 1}),
    ("find_related", {"chunk_ids": ["$chunk"], "top_k_after": 2}),
    ("get_toc", {"doc_id": "handbook.md"}),
    ("get_document", {"doc_id": "handbook.md", "max_chars": 120}),
    ("list_documents", {"corpus": "handbook"}),
    (
        "upload",
        {
            "corpus": "inbox",
            "filename": "visitors.md",
            "content_base64": base64.b64encode(UPLOAD.encode()).decode(),
        },
    ),
    ("delete", {"corpus": "inbox", "doc_id": "visitors.md"}),
]
_MAX_STR, _MAX_LIST = 140, 2

# How the calls of the two seeds' documentation map onto these tools (each call works as
# written: tests/server/tools/test_seed_calls.py makes every one through the MCP client).
SEED_MAPPINGS = """\
## Drop-in for agents written for the seeds

Agents set up for the seed Guaipeca or for A-RAG-OG call the tools as those projects
documented them; every such call works verbatim here (argument aliases and one thin tool),
and `tests/server/tools/test_seed_calls.py` makes each of them through the official MCP
client and checks the result is what the seed describes.

**The seed Guaipeca**

| call as documented | here |
|---|---|
| `search(query, top_k, corpora, hybrid=true, return_mode, section_mode, section_filter)` | `search`; `hybrid: true` is `mode: "hybrid"`, `false` is `mode: "dense"` (with a different `mode` as well: an error). `section_filter` takes a section id, a heading path prefix (`"Report > Financial Statements"`), or a heading right under any document title (`"Financial Statements"`) |
| `get_chunk(chunk_id=…)` | `get_chunk`; `chunk_id` is one id, `chunk_ids` one or a list |
| `get_document(corpus=…, source_path=…)` | `get_document`; `source_path` is the path relative to the corpus folder (as hits show it) or absolute inside it; or `doc_id` |
| `list_documents()`, `list_documents(corpus=…)` | `list_documents`: every configured corpus, or one; each document with `source_path`, `filename`, `file_size` (bytes of the file now), `chunk_count`, `chars` and metadata (no indexing time is kept) |
| `index(corpus="all", force=false)` | `index`; `"all"` (unless a corpus has that name) or no corpus: every configured one; `force: true` rebuilds |
| `status()`, `list_folders()` | the same |
| `upload(corpus, filename, content, index=true)` | `upload`; `content` is `content_base64`; `index` overrides `upload.auto_index` |
| `delete(corpus, filename, index=true)` | `delete`; `filename` is `doc_id` (the path in the corpus folder); `index: false` removes only the file (the next `index` run drops the document) |
| `get_toc(corpus=…)` | `get_toc` with a corpus only: its documents (up to 200) with the top two levels of their headings, under `documents` |
| `get_toc(corpus=…, document=…)` | `get_toc`; `document` is a path as in `get_document`'s `source_path`; or `doc_id` |

**A-RAG-OG**

| call as documented | here |
|---|---|
| `keyword_and_semantic_search(query, top_k_before, top_k_after)` (its default) | `keyword_and_semantic_search`: hybrid (keywords and meaning fused), the same ranking as `search` in mode hybrid; `top_k_before` candidates reordered by the lexical reranker when `rerank` (default `search.rerank`), `top_k_after` kept |
| `semantic_search(query, top_k_before, top_k_after)` | `semantic_search` (dense) |
| `keyword_search(query, top_k_before, top_k_after)` | `keyword_search` (BM25) |
| `filtered_search(query, keywords, entities, content_types, date_from, date_to)` | `filtered_search`, on the keywords, entities, dates and content types extracted from each chunk at indexing (`enrich.local`, no LLM) |
| `find_related`, `read_chunk`, `read_neighbors` | the same names |

A-RAG-OG's reranker is a cross-encoder served elsewhere; here it is a lexical reranker on
the same CPU (query-term coverage and proximity), so rankings differ while the calls and
the shape of the answer are the same.
"""


def _abridge(value: Any, key: str = "") -> Any:
    if isinstance(value, str):
        if key == "content_base64" or len(value) <= _MAX_STR:
            return value
        return value[:_MAX_STR] + "…"
    if isinstance(value, list):
        cut = [_abridge(v) for v in value[:_MAX_LIST]]
        if len(value) > _MAX_LIST:
            cut.append(f"… {len(value) - _MAX_LIST} more")
        return cut
    if isinstance(value, dict):
        return {k: _abridge(v, k) for k, v in value.items()}
    return value


def _substitute(args: dict[str, Any], chunk: str) -> dict[str, Any]:
    def sub(v: Any) -> Any:
        if v == "$chunk":
            return chunk
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    return {k: sub(v) for k, v in args.items()}


async def _run(root: Path) -> tuple[list[str], list[tuple[str, str, dict[str, Any], Any]]]:
    (root / "handbook").mkdir()
    (root / "handbook" / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (root / "handbook" / "notes-2024-03-12.md").write_text(NOTES, encoding="utf-8")
    (root / "inbox").mkdir()
    settings = parse_settings(
        {
            "corpora": [
                {"name": "handbook", "path": str(root / "handbook"), "topic": "operations"},
                {"name": "inbox", "path": str(root / "inbox"), "topic": "uploads"},
            ],
            "upload": {"allow": ["inbox"]},
            "storage": {"data_dir": str(root / "data")},
        },
        env={},
        cwd=root,
    )
    index = Index(
        root / "data" / "index",
        embedder=load_embedder(settings.embedding),
        settings=settings.engine(),
    )
    service = Service(index, LoadedSettings(settings, None, root / "data"))
    service.reindex("handbook")
    service.reindex("inbox")
    server = build_server(service)
    results: list[tuple[str, str, dict[str, Any], Any]] = []
    chunk = ""
    try:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name, raw in CALLS:
                if name not in tools:
                    continue  # a tool this version does not have
                args = _substitute(raw, chunk)
                result = await client.call_tool(name, args)
                out = (
                    {"isError": True, "text": result.content[0].text}  # type: ignore[union-attr]
                    if result.is_error
                    else result.structured_content
                )
                if name == "search" and not result.is_error and not chunk:
                    chunk = out["hits"][0]["chunk_id"]  # type: ignore[index]
                out = json.loads(json.dumps(out).replace(json.dumps(str(root))[1:-1], "~/sample"))
                first = (tools[name].description or "").strip().split("\n\n")[0]
                results.append((name, " ".join(first.split()), args, out))
            return sorted(tools), results
    finally:
        index.close()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _object(value: Any) -> str:
    """An item of a list: one key per line when it is an object."""
    if not isinstance(value, dict):
        return _compact(value)
    inner = ",\n".join(f"        {_compact(k)}: {_compact(v)}" for k, v in value.items())
    return "{\n" + inner + "\n      }"


def _pretty(value: Any) -> str:
    """Top-level keys one per line; a list of objects one object per line; the rest compact."""
    if not isinstance(value, dict):
        return _compact(value)
    lines = []
    for key, v in value.items():
        if isinstance(v, list) and any(isinstance(x, dict) for x in v):
            items = ",\n".join("      " + _object(x) for x in v)
            lines.append(f"    {_compact(key)}: [\n{items}\n    ]")
        else:
            lines.append(f"    {_compact(key)}: {_compact(v)}")
    return "{\n" + ",\n".join(lines) + "\n  }"


def render(results: list[tuple[str, str, dict[str, Any], Any]]) -> str:
    lines = [
        "# MCP tools: one real call each",
        "",
        "Written by `scripts/mcp_examples.py` (run it to refresh): a sample corpus",
        "`handbook` (an operations handbook and a meeting note) and an upload corpus `inbox`,",
        "indexed with the bundled model, called through the official MCP client. Outputs are",
        f"real, abridged: strings cut at {_MAX_STR} characters, lists at {_MAX_LIST} items.",
        "The same calls work over HTTP: `POST /api/tools/{name}` with the arguments as the",
        "JSON body (the web page's API, same token) or `tools/call` on `/mcp`.",
        "",
        *SEED_MAPPINGS.splitlines(),
        "",
    ]
    for name, description, args, out in results:
        shown_args = _abridge(args)
        if "content_base64" in shown_args:
            shown_args["content_base64"] = shown_args["content_base64"][:24] + "…"
        lines += [
            f"## `{name}`",
            "",
            description,
            "",
            "```json",
            "→ " + json.dumps(shown_args, ensure_ascii=False),
            "← " + _pretty(_abridge(out)),
            "```",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every tool has one")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names, results = anyio.run(_run, Path(tmp))
    missing = sorted(set(names) - {r[0] for r in results})
    if missing:
        print(f"mcp_examples: no example call for {', '.join(missing)}", file=sys.stderr)
        return 1
    if not options.check:
        OUT.write_text(render(results), encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)} ({len(results)} tools)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
