"""The MCP tools, driven through the SDK's in-memory client against a real on-disk index.

The deterministic hashing embedder stands in for the model (this layer sits above
embedding); every result is checked against the library API on the same index.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guaipeca import Index, InvalidArgumentError, NewDocument
from guaipeca.config import LoadedSettings, load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.ingest import SyncReport
from guaipeca.server import Service, build_server
from guaipeca.server import files as files_module
from guaipeca.server import service as service_module
from support.mcp import tool_data as data
from support.mcp import tool_error as error

GUIDE = (
    "# Guide\n\nIntro to the installer guide.\n\n"
    "## Install\n\n" + "Run the installer with care on every machine. " * 30 + "\n\n"
    "### On Linux\n\nUse the installer package on Linux.\n\n"
    "## Usage\n\nSearch the index. Use filters to narrow results.\n\n"
    "## Troubleshooting\n\nWhen the installer fails, read the log file first.\n"
)
NOTES = "# Notes\n\n## Meeting\n\nWe discussed the budget and the installer release.\n"
DEEP = "# Deep\n\nA nested document about tax rates and the budget.\n"
ARCHIVE = "# Old report\n\nAn archived report on budget planning.\n"

TOOLS = {
    # name: (required arguments, every argument, read-only, destructive)
    "search": (
        {"query"},
        {
            "query",
            "top_k",
            "corpora",
            "mode",
            "hybrid",
            "where",
            "return_mode",
            "section_mode",
            "section_filter",
            "max_chars",
            "explain",
            "budget",
        },
        True,
        False,
    ),
    "get_chunk": (set(), {"chunk_ids", "chunk_id"}, True, False),
    "get_document": (
        set(),
        {"doc_id", "source_path", "corpus", "offset", "max_chars"},
        True,
        False,
    ),
    "list_documents": (set(), {"corpus", "where", "limit", "offset"}, True, False),
    "get_toc": (set(), {"doc_id", "corpus", "document"}, True, False),
    "index": (set(), {"corpus", "force"}, False, False),
    "status": (set(), {"job"}, True, False),
    "list_folders": (set(), set(), True, False),
    "upload": (
        {"corpus", "filename"},
        {"corpus", "filename", "content_base64", "content", "subfolder", "overwrite", "index"},
        False,
        True,
    ),
    "delete": ({"corpus"}, {"corpus", "doc_id", "filename", "index"}, False, True),
}
# The agentic tools (tests/server/tools/test_agentic.py checks them in detail).
_SEARCH_ARGS = {"query", "top_k_after", "top_k_before", "rerank", "corpora", "where", "budget"}
TOOLS.update(
    {
        "keyword_search": ({"query"}, _SEARCH_ARGS, True, False),
        "keyword_and_semantic_search": ({"query"}, _SEARCH_ARGS, True, False),
        "semantic_search": ({"query"}, _SEARCH_ARGS, True, False),
        "filtered_search": (
            {"query"},
            _SEARCH_ARGS
            | {"keywords", "entities", "content_types", "date_from", "date_to", "mode"},
            True,
            False,
        ),
        "read_chunk": ({"chunk_ids"}, {"chunk_ids"}, True, False),
        "read_neighbors": ({"chunk_ids"}, {"chunk_ids", "window"}, True, False),
        "find_related": (
            {"chunk_ids"},
            {"chunk_ids", "query", "exclude", "same_document"}
            | (_SEARCH_ARGS - {"where", "rerank", "budget"}),
            True,
            False,
        ),
    }
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "guide.md").write_text(GUIDE, encoding="utf-8")
    (docs / "notes.md").write_text(NOTES, encoding="utf-8")
    (docs / "sub" / "deep.md").write_text(DEEP, encoding="utf-8")
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "report.md").write_text(ARCHIVE, encoding="utf-8")
    return {"docs": docs, "archive": archive, "data": tmp_path / "data"}


@pytest.fixture
def loaded(tmp_path: Path, folders: dict[str, Path]) -> LoadedSettings:
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora:\n"
        "  - name: docs\n"
        "    path: docs\n"
        "    topic: guides and notes\n"
        "    weight: 1.5\n"
        "    extensions: [.md, .txt, .pdf]\n"
        "    exclude: ['drafts/*']\n"
        "  - name: archive\n"
        "    path: archive\n"
        "    topic: old reports\n"
        "    language: portuguese\n"
        "upload:\n"
        "  allow: [docs]\n"
        "  max_file_size: 4096\n"
        "  allowed_extensions: [.md, .txt, .pdf, .docx]\n"
        "storage:\n"
        "  data_dir: data\n",
        encoding="utf-8",
    )
    return load_settings(config, env={}, cwd=tmp_path)


@pytest.fixture
def service(loaded: LoadedSettings) -> Iterator[Service]:
    index = Index(
        loaded.data_dir / "index", embedder=HashingEmbedder(64), settings=loaded.settings.engine()
    )
    svc = Service(index, loaded)
    svc.reindex("docs")
    svc.reindex("archive")
    assert index.wait_for_embedding(60)  # the embedding phase runs behind the server
    yield svc
    index.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Client]:
    async with Client(build_server(service)) as c:
        yield c


def listing(folder: Path) -> list[str]:
    """Every entry under ``folder``, hidden ones included, but the audit log (a refused
    write is logged there: that is its point)."""
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if not p.name.startswith("audit.")
    )


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# -- the tool list -------------------------------------------------------------------------
@pytest.mark.anyio
async def test_tool_list_is_pinned_with_descriptions_schemas_and_hints(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == list(TOOLS)
    for tool in listed:
        required, every, read_only, destructive = TOOLS[tool.name]
        assert tool.description and len(tool.description) > 80, tool.name
        assert tool.input_schema["type"] == "object"
        assert set(tool.input_schema.get("properties", {})) == every, tool.name
        assert set(tool.input_schema.get("required", [])) == required, tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.title
        assert tool.annotations.read_only_hint is read_only, tool.name
        assert tool.annotations.destructive_hint is destructive, tool.name
        assert tool.annotations.open_world_hint is False


@pytest.mark.anyio
async def test_schema_carries_bounds_and_choices(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    props = tools["search"].input_schema["properties"]
    assert (props["top_k"]["minimum"], props["top_k"]["maximum"]) == (1, 100)
    assert props["mode"]["enum"] == ["hybrid", "dense", "keyword"]
    assert props["mode"]["default"] == "hybrid"
    assert props["return_mode"]["enum"] == ["chunks", "documents", "auto", "documents_if_fit"]
    ids = tools["get_chunk"].input_schema["properties"]["chunk_ids"]["anyOf"]
    assert {"type": "string"} in ids and any(s.get("maxItems") == 100 for s in ids)


# -- search --------------------------------------------------------------------------------
SEARCHES: list[dict[str, Any]] = [
    {"query": "installer"},
    {"query": "installer", "mode": "keyword", "top_k": 3},
    {"query": "budget", "mode": "dense", "top_k": 4},
    {"query": "budget", "corpora": ["archive"]},
    {"query": "installer", "where": {"doc_id": {"$ne": "guide.md"}}},
    {"query": "installer", "return_mode": "documents"},
    {"query": "installer", "return_mode": "auto"},
    {"query": "installer", "return_mode": "documents_if_fit"},
    {"query": "installer", "section_mode": True, "mode": "keyword"},
    {"query": "installer", "section_filter": "Guide > Install", "mode": "keyword"},
    {"query": "installer log file", "budget": 300},
    {"query": "installer", "budget": 120, "mode": "keyword", "top_k": 1},
]


@pytest.mark.anyio
@pytest.mark.parametrize("args", SEARCHES, ids=lambda a: json.dumps(a, sort_keys=True))
async def test_search_returns_what_the_library_returns(
    client: Client, service: Service, args: dict[str, Any]
) -> None:
    out = data(await client.call_tool("search", args))
    options = {k: v for k, v in args.items() if k != "query"}
    options.setdefault("top_k", 10)
    expected = service.index.search(args["query"], **options)
    assert expected, "the case should find something"
    assert out["count"] == len(out["hits"]) == len(expected)
    got = [(h["chunk_id"], h["start"], h["end"], h["text"], h["score"]) for h in out["hits"]]
    assert got == [(h.chunk_id, h.start, h.end, h.text, h.score) for h in expected]
    assert out["mode"] == args.get("mode", "hybrid")
    assert out["budget"] == args.get("budget")
    if "budget" in args:
        assert sum(len(h["text"]) for h in out["hits"]) <= args["budget"]


@pytest.mark.anyio
async def test_search_explains_each_hit_when_asked_and_only_then(
    client: Client, service: Service
) -> None:
    plain = data(await client.call_tool("search", {"query": "installer"}))
    assert all(h["explanation"] is None for h in plain["hits"])
    out = data(await client.call_tool("search", {"query": "installer", "explain": True}))
    expected = service.index.search("installer", top_k=10, explain=True)
    assert [h["explanation"] for h in out["hits"]] == [
        h.explanation.to_dict() for h in expected if h.explanation is not None
    ]
    for hit in out["hits"]:
        e = hit["explanation"]
        assert e["score"] == pytest.approx(hit["score"]) and e["fusion"] == "combmnz"
        parts = [p for p in (e["dense"], e["keyword"]) if p is not None]
        present = sum(p["rank"] is not None for p in parts)
        assert e["fused"] == pytest.approx(present * sum(p["contribution"] for p in parts))


@pytest.mark.anyio
async def test_search_hits_cite_spans_relative_to_the_corpus_folder(
    client: Client, service: Service, tmp_path: Path
) -> None:
    result = await client.call_tool("search", {"query": "tax rates budget", "top_k": 10})
    out = data(result)
    deep = next(h for h in out["hits"] if h["doc_id"] == "sub/deep.md")
    assert deep["source_path"] == "sub/deep.md"
    assert deep["heading_path"] == ["Deep"]
    assert set(deep["scores"]) == {"dense", "lexical", "dense_rank", "lexical_rank", "rerank"}
    assert "**budget**" in deep["snippet"]
    for hit in out["hits"]:
        doc = service.index.get_document(hit["doc_id"], corpus=hit["corpus"])
        assert doc.text[hit["start"] : hit["end"]] == hit["text"]
        assert hit["section_id"] and hit["chunk_id"].startswith(hit["corpus"] + ":")
    # No server path anywhere in what the client sees.
    assert str(tmp_path) not in json.dumps(out)
    assert str(tmp_path) not in str(result.content)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"query": "x", "mode": "fuzzy"}, "mode: Input should be 'hybrid', 'dense' or 'keyword'"),
        ({"query": "x", "top_k": 0}, "top_k: Input should be greater than or equal to 1"),
        ({"query": "x", "top_k": 10**9}, "top_k: Input should be less than or equal to 100"),
        ({"query": ""}, "query: String should have at least 1 character"),
        ({}, "query: is required"),
        ({"query": "x", "topk": 3}, "unknown argument 'topk' (did you mean 'top_k'?)"),
        ({"query": "x", "where": {"year": {"$regex": "a"}}}, "unknown operator '$regex'"),
        ({"query": "x", "where": {"$where": 1}}, "filter"),
        ({"query": "x", "where": "not json"}, "where: Input should be a valid dictionary"),
        ({"query": "x", "corpora": ["nope"]}, "no corpus named 'nope'"),
        ({"query": "x", "corpora": ["doc"]}, "no corpus named 'doc'; did you mean 'docs'?"),
        ({"query": "x", "return_mode": "pages"}, "return_mode: Input should be"),
        ({"query": "x", "section_filter": ""}, "section_filter: String should have at least"),
        ({"query": "x", "budget": 0}, "budget: Input should be greater than or equal to 1"),
        ({"query": "x", "budget": 10**7}, "budget: Input should be less than or equal to"),
        ({"query": "x", "budget": 500, "return_mode": "documents"}, "return_mode 'chunks'"),
    ],
)
async def test_search_refuses_bad_arguments_with_one_clear_line(
    client: Client, args: dict[str, Any], expected: str
) -> None:
    message = error(await client.call_tool("search", args))
    assert message.startswith("Error executing tool search: ")
    assert expected in message


# -- reading -------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_get_chunk_reads_one_or_many_ids_like_the_library(
    client: Client, service: Service
) -> None:
    hits = service.index.search("installer", top_k=3)
    one = data(await client.call_tool("get_chunk", {"chunk_ids": hits[0].chunk_id}))
    (chunk,) = one["chunks"]
    lib = service.index.get_chunk(hits[0].chunk_id)
    assert (chunk["chunk_id"], chunk["text"], chunk["start"], chunk["end"]) == (
        lib.chunk_id,
        lib.text,
        lib.start,
        lib.end,
    )
    ids = [h.chunk_id for h in reversed(hits)] + [hits[-1].chunk_id]
    many = data(await client.call_tool("get_chunk", {"chunk_ids": ids}))
    assert [c["chunk_id"] for c in many["chunks"]] == [h.chunk_id for h in reversed(hits)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ("docs:99999", "no chunk with id 'docs:99999'"),
        (["docs:1", "nope"], "no chunk with id 'nope'"),
        ("nochunk", "no chunk with id 'nochunk'"),
        ([], "chunk_ids: List should have at least 1 item"),
        (["docs:1"] * 101, "chunk_ids: List should have at most 100 items"),
        (5, "chunk_ids: Input should be a valid string or a valid list"),
    ],
)
async def test_get_chunk_refuses_unknown_and_too_many_ids(
    client: Client, ids: object, expected: str
) -> None:
    assert expected in error(await client.call_tool("get_chunk", {"chunk_ids": ids}))


@pytest.mark.anyio
async def test_get_document_pages_through_a_long_document(client: Client, service: Service) -> None:
    whole = data(await client.call_tool("get_document", {"doc_id": "guide.md"}))
    doc = service.index.get_document("guide.md")
    assert whole["text"] == doc.text and whole["truncated"] is False
    assert whole["next_offset"] is None and whole["chars"] == len(doc.text)
    assert whole["source_path"] == "guide.md" and whole["chunk_count"] == doc.chunk_count
    parts, offset = [], 0
    while offset is not None:
        part = data(
            await client.call_tool(
                "get_document", {"doc_id": "guide.md", "offset": offset, "max_chars": 500}
            )
        )
        assert len(part["text"]) <= 500 and part["offset"] == offset
        assert part["truncated"] is (part["next_offset"] is not None)
        parts.append(part["text"])
        offset = part["next_offset"]
    assert "".join(parts) == doc.text and len(parts) > 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"doc_id": "missing.md"}, "no document 'missing.md'"),
        ({"doc_id": "guide.md", "corpus": "archive"}, "no document 'guide.md' in corpus"),
        ({"doc_id": "guide.md", "max_chars": 0}, "max_chars: Input should be greater"),
        ({"doc_id": "guide.md", "offset": -1}, "offset: Input should be greater"),
    ],
)
async def test_get_document_refuses_unknown_documents_and_bad_ranges(
    client: Client, args: dict[str, Any], expected: str
) -> None:
    assert expected in error(await client.call_tool("get_document", args))


@pytest.mark.anyio
async def test_list_documents_pages_and_filters_like_the_library(
    client: Client, service: Service
) -> None:
    every = data(await client.call_tool("list_documents", {}))
    lib = service.index.list_documents()
    assert [(d["corpus"], d["doc_id"]) for d in every["documents"]] == [
        (d.corpus, d.doc_id) for d in lib
    ]
    assert every["next_offset"] is None
    first = data(await client.call_tool("list_documents", {"limit": 2}))
    assert first["count"] == 2 and first["next_offset"] == 2
    rest = data(await client.call_tool("list_documents", {"limit": 2, "offset": 2}))
    assert first["documents"] + rest["documents"] == every["documents"]
    docs = data(await client.call_tool("list_documents", {"corpus": "docs"}))
    assert {d["source_path"] for d in docs["documents"]} == {
        "guide.md",
        "notes.md",
        "sub/deep.md",
    }
    filtered = data(
        await client.call_tool("list_documents", {"where": {"doc_id": {"$startswith": "sub/"}}})
    )
    assert [d["doc_id"] for d in filtered["documents"]] == ["sub/deep.md"]
    message = error(await client.call_tool("list_documents", {"where": {"a": {"$bad": 1}}}))
    assert "unknown operator '$bad'" in message
    assert "limit: Input should be" in error(await client.call_tool("list_documents", {"limit": 0}))


@pytest.mark.anyio
async def test_get_toc_is_the_library_tree(client: Client, service: Service) -> None:
    out = data(await client.call_tool("get_toc", {"doc_id": "guide.md"}))
    library = json.loads(json.dumps(service.index.toc("guide.md")))
    assert out == {**library, "documents": None, "more_documents": False}
    (title,) = out["headings"]
    assert [c["title"] for c in title["children"]] == ["Install", "Usage", "Troubleshooting"]
    assert "no document 'nope.md'" in error(
        await client.call_tool("get_toc", {"doc_id": "nope.md"})
    )


# -- status and folders --------------------------------------------------------------------
@pytest.mark.anyio
async def test_status_reports_model_and_every_corpus(client: Client, service: Service) -> None:
    out = data(await client.call_tool("status", {}))
    stats = service.index.stats()
    assert (out["version"], out["model"], out["dimension"]) == ("0.1.0", "hashing-64", 64)
    assert (out["documents"], out["chunks"]) == (stats.documents, stats.chunks)
    corpora = {c["name"]: c for c in out["corpora"]}
    assert corpora["docs"] == {
        "name": "docs",
        "topic": "guides and notes",
        "language": "english",
        "weight": 1.5,
        "documents": 3,
        "chunks": next(c.chunks for c in stats.corpora if c.name == "docs"),
        "pending_chunks": 0,
        "pending_seconds": 0.0,
        "configured": True,
        "indexed": True,
        "searched": True,
        "upload_allowed": True,
        "note": None,
        "model": "custom hashing-64 (64-d)",
        "model_mismatch": None,
    }
    assert corpora["archive"]["language"] == "portuguese"
    assert corpora["archive"]["upload_allowed"] is False
    assert out["broken"] == [] and out["indexing"] is None
    assert (out["pending_chunks"], out["pending_seconds"]) == (0, 0.0)


@pytest.mark.anyio
async def test_status_shows_chunks_waiting_for_vectors(client: Client, service: Service) -> None:
    # Committed for keyword search, not embedded yet (as the server's own runs leave them
    # until its background thread gets to them).
    service.index.add_documents(
        {"late.md": "# Late\n\nA note that arrived late."}, corpus="docs", wait=False
    )
    out = data(await client.call_tool("status", {}))
    assert out["pending_chunks"] == 1
    assert {c["name"]: c["pending_chunks"] for c in out["corpora"]}["docs"] == 1
    assert out["pending_seconds"] is None or out["pending_seconds"] >= 0
    hits = data(await client.call_tool("search", {"query": "arrived late", "mode": "keyword"}))
    assert hits["hits"][0]["doc_id"] == "late.md" and hits["hits"][0]["embedded"] is False
    service.index.embed_in_background()
    assert service.index.wait_for_embedding(60)
    out = data(await client.call_tool("status", {}))
    assert out["pending_chunks"] == 0


@pytest.mark.anyio
async def test_list_folders_shows_the_configured_corpora_and_upload_limits(
    client: Client,
) -> None:
    out = data(await client.call_tool("list_folders", {}))
    docs, archive = out["folders"]
    assert docs["name"] == "docs" and docs["path"].endswith("/docs") and docs["exists"]
    assert (docs["topic"], docs["weight"], docs["extensions"]) == (
        "guides and notes",
        1.5,
        [".md", ".txt", ".pdf"],
    )
    assert (docs["upload_allowed"], archive["upload_allowed"]) == (True, False)
    assert out["upload"] == {
        "corpora": ["docs"],
        "max_file_size": 4096,
        "allowed_extensions": [".md", ".txt", ".pdf", ".docx"],
        "auto_index": True,
    }


# -- index ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_index_picks_up_new_changed_and_removed_files(
    client: Client, service: Service, folders: dict[str, Path]
) -> None:
    docs = folders["docs"]
    (docs / "new.md").write_text("# New\n\nA brand new page about gardening.\n")
    (docs / "notes.md").write_text(NOTES + "\nAnd one more line.\n")
    (docs / "sub" / "deep.md").unlink()
    (docs / "broken.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01\x02\x03\xff")
    out = data(await client.call_tool("index", {"corpus": "docs"}))
    (summary,) = out["corpora"]
    assert (summary["added"], summary["changed"], summary["removed"]) == (1, 1, 1)
    assert summary["unchanged"] == 1 and summary["documents"] == 3
    assert [f["file"] for f in summary["failed"]] == ["broken.md"]
    assert "binary" in summary["failed"][0]["reason"]
    assert str(docs) not in json.dumps(out)
    hits = service.index.search("gardening", mode="keyword")
    assert hits[0].doc_id == "new.md"
    again = data(await client.call_tool("index", {}))
    assert [s["corpus"] for s in again["corpora"]] == ["docs", "archive"]
    assert all(s["added"] == s["changed"] == s["removed"] == 0 for s in again["corpora"])


@pytest.mark.anyio
async def test_index_refuses_an_unknown_corpus_and_a_missing_folder(
    client: Client, folders: dict[str, Path]
) -> None:
    message = error(await client.call_tool("index", {"corpus": "nope"}))
    assert "no configured corpus named 'nope' (configured: docs, archive)" in message
    for child in folders["archive"].iterdir():
        child.unlink()
    folders["archive"].rmdir()
    message = error(await client.call_tool("index", {}))
    assert "the folder of corpus 'archive' is missing" in message


@pytest.mark.anyio
async def test_searches_answer_while_an_indexing_run_is_in_progress(
    client: Client, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    real_sync = service_module.sync_folder

    def slow_sync(*args: Any, **kwargs: Any) -> SyncReport:
        started.set()
        assert release.wait(30), "the test never released the indexing run"
        return real_sync(*args, **kwargs)

    monkeypatch.setattr(service_module, "sync_folder", slow_sync)
    results: dict[str, Any] = {}

    async def run_index() -> None:
        results["index"] = await client.call_tool("index", {"corpus": "docs"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_index)
        try:
            assert await anyio.to_thread.run_sync(started.wait, 30)
            with anyio.fail_after(20):  # the run is blocked: readers must not wait for it
                status = data(await client.call_tool("status", {}))
                assert status["indexing"]["corpus"] == "docs"
                hits = data(await client.call_tool("search", {"query": "installer"}))
                assert hits["count"] > 0
        finally:
            release.set()
    assert data(results["index"])["corpora"][0]["corpus"] == "docs"
    assert data(await client.call_tool("status", {}))["indexing"] is None


# -- upload --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_upload_writes_converts_and_indexes_the_file(
    client: Client, service: Service, folders: dict[str, Path]
) -> None:
    docs = folders["docs"]
    text = "# Receipts\n\nThe zanzibar receipt for the conference.\n"
    out = data(
        await client.call_tool(
            "upload",
            {
                "corpus": "docs",
                "filename": "receipts.md",
                "content_base64": b64(text.encode()),
                "subfolder": "finance/2024",
            },
        )
    )
    assert out["doc_id"] == "finance/2024/receipts.md" and out["replaced"] is False
    assert out["format"] == "markdown" and out["bytes"] == len(text.encode())
    assert out["indexed"]["added"] == 1 and out["indexed"]["corpus"] == "docs"
    assert (docs / "finance" / "2024" / "receipts.md").read_text() == text
    assert not [p for p in docs.rglob(".*")], "no temporary file is left behind"
    hits = service.index.search("zanzibar", mode="keyword")
    assert hits[0].doc_id == "finance/2024/receipts.md"
    # The same name again is refused unless overwrite is true.
    again = {"corpus": "docs", "filename": "receipts.md", "subfolder": "finance/2024"}
    newer = "# Receipts\n\nThe quokka receipt.\n"
    message = error(await client.call_tool("upload", {**again, "content_base64": b64(b"x")}))
    assert "already exists; pass overwrite: true" in message
    assert (docs / "finance" / "2024" / "receipts.md").read_text() == text
    out = data(
        await client.call_tool(
            "upload", {**again, "content_base64": b64(newer.encode()), "overwrite": True}
        )
    )
    assert out["replaced"] is True and out["indexed"]["changed"] == 1
    assert (docs / "finance" / "2024" / "receipts.md").read_text() == newer
    assert service.index.search("quokka", mode="keyword")[0].doc_id == out["doc_id"]


@pytest.mark.anyio
async def test_upload_without_auto_index_only_writes(
    service: Service, loaded: LoadedSettings, folders: dict[str, Path]
) -> None:
    settings = loaded.settings.model_copy(
        update={"upload": loaded.settings.upload.model_copy(update={"auto_index": False})}
    )
    quiet = Service(service.index, LoadedSettings(settings, loaded.source, loaded.data_dir))
    async with Client(build_server(quiet)) as client:
        args = {"corpus": "docs", "filename": "later.txt", "content_base64": b64(b"plain words")}
        out = data(await client.call_tool("upload", args))
    assert out["indexed"] is None and (folders["docs"] / "later.txt").exists()
    assert "later.txt" not in {d.doc_id for d in service.index.list_documents()}


@pytest.mark.anyio
async def test_upload_of_a_file_over_the_chunk_budget_writes_nothing(
    service: Service, loaded: LoadedSettings, tmp_path: Path
) -> None:
    # 2 KB of one-line sections makes 150 chunks, over chunking.max_chunks (100 here):
    # refused before anything is written, not skipped by the index run after.
    settings = loaded.settings.model_copy(
        update={"chunking": loaded.settings.chunking.model_copy(update={"max_chunks": 100})}
    )
    tight = Service(service.index, LoadedSettings(settings, loaded.source, loaded.data_dir))
    spam = "".join(f"# h{i}\n\nx\n\n" for i in range(150)).encode()
    before = listing(tmp_path)
    async with Client(build_server(tight)) as client:
        args = {"corpus": "docs", "filename": "spam.md", "content_base64": b64(spam)}
        message = error(await client.call_tool("upload", args))
    assert message.endswith(
        "'spam.md' cannot be read as a .md file: it makes 150 chunks; the limit is "
        "chunking.max_chunks (100); nothing was written"
    )
    assert listing(tmp_path) == before


TRAVERSALS = [
    "../x.md",
    "/etc/passwd",
    "a/../../b.md",
    "%2e%2e/x.md",
    "%2e%2e.md",
    "..\\x.md",
    "..",
    ".hidden.md",
    "x.md\x00.txt",
    "..／x.md",
    "a／b.md",
    "．．",
    "．．.md",
    "‥.md",
    "evil\u202edm.txt",
    "tab\there.md",
    " spaced.md",
    "C:\\Windows\\x.md",
    "x" * 300 + ".md",
]


@pytest.mark.anyio
@pytest.mark.parametrize("filename", TRAVERSALS, ids=ascii)
async def test_upload_refuses_paths_and_tricky_names_and_writes_nothing(
    client: Client, folders: dict[str, Path], tmp_path: Path, filename: str
) -> None:
    before = listing(tmp_path)
    args = {"corpus": "docs", "filename": filename, "content_base64": b64(b"# Hi\n")}
    message = error(await client.call_tool("upload", args))
    assert "filename" in message
    assert "not a plain name" in message or "at most 255 characters" in message
    assert listing(tmp_path) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    "subfolder", ["../outside", "/tmp", "a/../../b", "a\\..\\b", ".git", "ok/．．", "a//b"]
)
async def test_upload_refuses_a_subfolder_that_leaves_the_corpus(
    client: Client, tmp_path: Path, subfolder: str
) -> None:
    before = listing(tmp_path)
    args = {
        "corpus": "docs",
        "filename": "x.md",
        "content_base64": b64(b"# Hi\n"),
        "subfolder": subfolder,
    }
    message = error(await client.call_tool("upload", args))
    assert "subfolder" in message
    assert listing(tmp_path) == before


@pytest.mark.anyio
async def test_upload_refuses_a_subfolder_linked_outside_the_corpus(
    client: Client, folders: dict[str, Path], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (folders["docs"] / "link").symlink_to(outside, target_is_directory=True)
    before = listing(tmp_path)
    args = {
        "corpus": "docs",
        "filename": "x.md",
        "content_base64": b64(b"# Hi\n"),
        "subfolder": "link",
    }
    assert "outside the folder of corpus 'docs'" in error(await client.call_tool("upload", args))
    assert listing(tmp_path) == before and not list(outside.iterdir())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"corpus": "archive"}, "corpus 'archive' does not accept uploads"),
        ({"corpus": "nope"}, "no configured corpus named 'nope'"),
        ({"filename": "tool.exe"}, "file type '.exe' is not accepted in corpus 'docs'"),
        ({"filename": "page.html"}, "file type '.html' is not accepted"),
        ({"filename": "slides.docx"}, "file type '.docx' is not accepted"),  # not a docs type
        ({"filename": "README"}, "file type (no extension) is not accepted"),
        ({"content_base64": "not base64!"}, "content_base64 is not valid base64"),
        ({"content_base64": "aGk"}, "content_base64 is not valid base64"),
        ({"content_base64": b64(b"a" * 4097)}, "the file is 4,097 bytes; the limit is 4,096 by"),
        ({"content_base64": "A" * 10_000}, "the file is about 7,500 bytes; the limit is 4,096"),
        ({"content_base64": ""}, "content_base64: String should have at least 1 character"),
        ({"content_base64": b64(b"\xff\xfe\x00\x80garbage")}, "cannot be read as a .md file"),
        ({"filename": "x.pdf", "content_base64": b64(b"%PDF-1.4 broken")}, "nothing was written"),
        ({"subfolder": "drafts"}, "matches an exclude pattern"),
        ({"filename": "guide.md"}, "'guide.md' in corpus 'docs' already exists"),
        ({"surprise": 1}, "unknown argument 'surprise'"),
    ],
)
async def test_upload_refuses_what_the_settings_do_not_allow_and_writes_nothing(
    client: Client, tmp_path: Path, args: dict[str, Any], expected: str
) -> None:
    before = listing(tmp_path)
    full = {"corpus": "docs", "filename": "new.md", "content_base64": b64(b"# New\n"), **args}
    message = error(await client.call_tool("upload", full))
    assert expected in message
    assert str(tmp_path) not in message
    assert listing(tmp_path) == before


def test_check_name_normalises_to_nfc_and_keeps_plain_unicode_names() -> None:
    decomposed = "Relato\u0301rio.md"  # NFD, as macOS writes it
    assert files_module.check_name(decomposed) == "Relatório.md"
    assert files_module.check_name("ação fiscal 2024.md") == "ação fiscal 2024.md"
    assert files_module.check_name("日本語.pdf") == "日本語.pdf"
    with pytest.raises(InvalidArgumentError, match="not a plain name"):
        files_module.check_name("a\u2215b.md".replace("\u2215", "\uff0f"))
    assert files_module.check_subfolder("notes/2024/") == ("notes", "2024")


# -- delete --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_delete_removes_the_file_and_the_document(
    client: Client, service: Service, folders: dict[str, Path]
) -> None:
    out = data(await client.call_tool("delete", {"corpus": "docs", "doc_id": "sub/deep.md"}))
    assert out == {
        "corpus": "docs",
        "doc_id": "sub/deep.md",
        "removed_from_index": True,
        "file_deleted": True,
    }
    assert not (folders["docs"] / "sub" / "deep.md").exists()
    assert "sub/deep.md" not in {d.doc_id for d in service.index.list_documents()}
    message = error(await client.call_tool("delete", {"corpus": "docs", "doc_id": "sub/deep.md"}))
    assert "no document 'sub/deep.md' in corpus 'docs'" in message


@pytest.mark.anyio
async def test_delete_of_a_text_document_touches_no_file(
    client: Client, service: Service, tmp_path: Path
) -> None:
    service.index.add_documents({"../../guide.md": "# Sneaky\n\ntext"}, corpus="docs")
    before = listing(tmp_path / "docs")
    out = data(await client.call_tool("delete", {"corpus": "docs", "doc_id": "../../guide.md"}))
    assert out["removed_from_index"] is True and out["file_deleted"] is False
    assert listing(tmp_path / "docs") == before


@pytest.mark.anyio
async def test_delete_never_touches_a_file_outside_the_corpus_folder(
    client: Client, service: Service, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.md"
    victim.write_text("# Keep me\n")
    # Documents whose recorded source lies outside the folder (e.g. indexed with --path).
    service.index.add_documents(
        [
            NewDocument(doc_id, "# Keep me\n", source_path=str(victim))
            for doc_id in ("../victim.md", "victim.md")
        ],
        corpus="docs",
    )
    for doc_id in ("../victim.md", "victim.md"):
        out = data(await client.call_tool("delete", {"corpus": "docs", "doc_id": doc_id}))
        assert out["removed_from_index"] is True and out["file_deleted"] is False
    assert victim.exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"corpus": "archive", "doc_id": "report.md"}, "'archive' does not accept uploads or de"),
        ({"corpus": "docs", "doc_id": "nope.md"}, "no document 'nope.md' in corpus 'docs'"),
        ({"corpus": "docs"}, "give doc_id (or filename)"),
    ],
)
async def test_delete_refuses_read_only_corpora_and_unknown_documents(
    client: Client, tmp_path: Path, args: dict[str, Any], expected: str
) -> None:
    before = listing(tmp_path / "archive"), listing(tmp_path / "docs")
    assert expected in error(await client.call_tool("delete", args))
    assert (listing(tmp_path / "archive"), listing(tmp_path / "docs")) == before


# -- errors --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_an_unexpected_failure_is_a_generic_error_and_a_logged_traceback(
    client: Client,
    service: Service,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret detail in /srv/private/index")

    monkeypatch.setattr(service.index, "search", boom)
    message = error(await client.call_tool("search", {"query": "x"}))
    assert message == (
        "Error executing tool search: internal error (the server log has the details)"
    )
    logged = [r for r in caplog.records if r.exc_info and "search" in r.getMessage()]
    assert logged and "secret detail" in str(logged[0].exc_info[1])  # type: ignore[index]


@pytest.mark.anyio
async def test_library_errors_reach_the_client_without_server_paths(
    client: Client,
    service: Service,
    monkeypatch: pytest.MonkeyPatch,
    folders: dict[str, Path],
) -> None:
    def locked(*args: Any, **kwargs: Any) -> None:
        raise InvalidArgumentError(
            f"{folders['docs']}/x.md is odd;\nsee {folders['data']}/index and {Path.home()}/y"
        )

    monkeypatch.setattr(service.index, "read_document", locked)
    message = error(await client.call_tool("get_document", {"doc_id": "x"}))
    assert message == (
        "Error executing tool get_document: <docs folder>/x.md is odd; "
        "see <data folder>/index and ~/y"
    )


def test_service_runs_one_write_at_a_time(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard = threading.Lock()
    active, peak, runs = [0], [0], [0]
    real = service_module.sync_folder

    def counting(*args: Any, **kwargs: Any) -> SyncReport:
        with guard:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            runs[0] += 1
        try:
            assert service.indexing is not None
            return real(*args, **kwargs)
        finally:
            with guard:
                active[0] -= 1

    monkeypatch.setattr(service_module, "sync_folder", counting)
    threads = [
        threading.Thread(target=service.reindex, args=(name,))
        for name in ("docs", "archive", "docs", "archive")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert runs[0] == 4 and peak[0] == 1
    assert service.indexing is None


def test_sanitise_replaces_whole_server_paths_only(
    service: Service, folders: dict[str, Path]
) -> None:
    docs = str(folders["docs"])
    message = f"{docs}/a.md and {docs}x/b.md\nand '{docs}'"
    assert service.sanitise(message) == f"<docs folder>/a.md and {docs}x/b.md and '<docs folder>'"
