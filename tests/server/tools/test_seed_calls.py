"""Drop-in for agents set up for either seed: every tool call written in the seed Guaipeca's
documentation and in A-RAG-OG's tool table, verbatim, through the official MCP client
against the real server (docs/mcp-tools.md maps both).

The index is on disk with the deterministic hashing embedder (this layer sits above the
model). The config file names one corpus; a corpus left over in the data folder
(``default``, as ``scripts/quickstart`` leaves one) must not show up in searches.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent

from guaipeca import Index
from guaipeca.config import load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server
from guaipeca.server.http import build_app
from support.http import LiveServer

REPORT = """\
# Annual report

## Financial Statements

Revenue grew to 12 million in 2024. The consolidation of the two subsidiaries closed in March.

| Quarter | Revenue |
|---|---|
| Q1 | 2.9 |
| Q2 | 3.1 |

## HFM data audit

The HFM data audit found three mapping errors; Maria Santos fixed them on 2024-05-02.

## Outlook

Consolidation work continues into 2025.
"""
MEMO = "# Memo\n\nThe HFM data audit schedule moves to June.\n"
LEFTOVER = "# Reliability\n\nA leftover page about the Mozilla browser and HFM audits.\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    docs = tmp_path / "epm"
    docs.mkdir()
    (docs / "report.md").write_text(REPORT, encoding="utf-8")
    (docs / "memo.md").write_text(MEMO, encoding="utf-8")
    leftover = tmp_path / "old"
    leftover.mkdir()
    (leftover / "reliability.md").write_text(LEFTOVER, encoding="utf-8")
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora:\n"
        "  - name: epm-docs\n"
        "    path: epm\n"
        "    topic: EPM & Oracle HFM/ARCS\n"
        "upload:\n"
        "  allow: [epm-docs]\n"
        "storage:\n"
        "  data_dir: data\n",
        encoding="utf-8",
    )
    loaded = load_settings(config, env={}, cwd=tmp_path)
    index = Index(
        loaded.data_dir / "index", embedder=HashingEmbedder(64), settings=loaded.settings.engine()
    )
    # A corpus from an earlier run without this config (e.g. scripts/quickstart's).
    index.add_documents({"reliability.md": LEFTOVER}, corpus="default")
    svc = Service(index, loaded)
    svc.reindex("epm-docs")
    assert index.wait_for_embedding(60)  # the embedding phase runs behind the server
    yield svc
    index.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Client]:
    async with Client(build_server(service)) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(client: Client, tool: str, **args: Any) -> str:
    result: CallToolResult = await client.call_tool(tool, args)
    assert result.is_error
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def root(service: Service) -> Path:
    return service.corpus_root("epm-docs")


# -- the seed Guaipeca ----------------------------------------------------------------------
@pytest.mark.anyio
async def test_seed_search_calls(client: Client) -> None:
    out = await call(
        client,
        "search",
        query="HFM data audit",
        top_k=5,
        corpora=["epm-docs"],
        hybrid=True,
        return_mode="chunks",
    )
    assert out["mode"] == "hybrid" and out["hits"]
    assert out["hits"][0]["heading_path"][-1] == "HFM data audit"
    assert {h["corpus"] for h in out["hits"]} == {"epm-docs"}
    dense = await call(client, "search", query="HFM data audit", hybrid=False)
    assert dense["mode"] == "dense"

    sections = await call(client, "search", query="consolidation", section_mode=True)
    assert sections["section_mode"] is True
    assert any(h["text"].startswith("## Financial Statements") for h in sections["hits"])

    only = await call(client, "search", query="revenue", section_filter="Financial Statements")
    assert only["hits"]
    assert all(h["heading_path"][1] == "Financial Statements" for h in only["hits"])

    message = await refused(client, "search", query="x", hybrid=True, mode="keyword")
    assert (await call(client, "search", query="x", hybrid=False, mode="dense"))["mode"] == "dense"
    assert "hybrid=true means mode 'hybrid', but mode is 'keyword'" in message


@pytest.mark.anyio
async def test_searches_cover_the_configured_corpora_only(client: Client) -> None:
    for tool, args in (
        ("search", {"query": "Mozilla browser HFM audits"}),
        ("keyword_search", {"query": "Mozilla"}),
        ("keyword_and_semantic_search", {"query": "Mozilla browser"}),
        ("semantic_search", {"query": "Mozilla browser"}),
    ):
        out = await call(client, tool, **args)
        assert all(h["corpus"] == "epm-docs" for h in out["hits"]), tool
    # Named explicitly, the leftover corpus is still searchable.
    named = await call(client, "search", query="Mozilla", corpora=["default"])
    assert named["hits"][0]["doc_id"] == "reliability.md"
    listed = await call(client, "list_documents")
    assert {d["corpus"] for d in listed["documents"]} == {"epm-docs"}
    status = await call(client, "status")
    notes = {c["name"]: c["note"] for c in status["corpora"]}
    assert notes["epm-docs"] is None
    assert notes["default"] == (
        "not in the configuration, so not searched; drop it with 'guaipeca drop default'"
    )
    # Issue 31: the totals count what a search covers; the leftover is listed, not counted.
    by_name = {c["name"]: c for c in status["corpora"]}
    assert (by_name["epm-docs"]["searched"], by_name["default"]["searched"]) == (True, False)
    assert by_name["default"]["documents"] == 1
    assert status["documents"] == by_name["epm-docs"]["documents"] == 2
    assert status["chunks"] == by_name["epm-docs"]["chunks"]


def test_health_totals_leave_out_the_corpora_not_searched(service: Service) -> None:
    with (
        LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live,
        httpx2.Client(base_url=live.url) as http,
    ):
        body = http.get("/health").json()
    corpora = {c["name"]: c for c in body["corpora"]}
    assert (corpora["epm-docs"]["searched"], corpora["default"]["searched"]) == (True, False)
    assert corpora["default"]["documents"] == 1
    assert body["documents"] == corpora["epm-docs"]["documents"] == 2
    assert body["chunks"] == corpora["epm-docs"]["chunks"]
    assert body["pending_chunks"] == corpora["epm-docs"]["pending_chunks"]


@pytest.mark.anyio
async def test_seed_get_chunk_get_document_and_list_documents(
    client: Client, service: Service
) -> None:
    hit = (await call(client, "search", query="HFM data audit", top_k=1))["hits"][0]
    (chunk,) = (await call(client, "get_chunk", chunk_id=hit["chunk_id"]))["chunks"]
    assert chunk["chunk_id"] == hit["chunk_id"] and chunk["text"] == hit["text"]
    assert "give chunk_ids or chunk_id, not both" in await refused(
        client, "get_chunk", chunk_id=hit["chunk_id"], chunk_ids=[hit["chunk_id"]]
    )
    assert "give chunk_ids (or chunk_id)" in await refused(client, "get_chunk")

    absolute = str(root(service) / "report.md")
    doc = await call(client, "get_document", corpus="epm-docs", source_path=absolute)
    assert doc["doc_id"] == "report.md" and doc["text"].startswith("# Annual report")
    assert doc["chunk_count"] >= 3 and doc["source_path"] == "report.md"
    relative = await call(client, "get_document", corpus="epm-docs", source_path="report.md")
    assert relative["text"] == doc["text"]
    outside = await refused(client, "get_document", corpus="epm-docs", source_path="/etc/passwd")
    assert "is not inside corpus 'epm-docs''s folder" in outside

    for args in ({"corpus": "epm-docs"}, {}):
        listed = await call(client, "list_documents", **args)
        by_id = {d["doc_id"]: d for d in listed["documents"]}
        assert set(by_id) == {"memo.md", "report.md"}
        report = by_id["report.md"]
        assert report["filename"] == "report.md" and report["source_path"] == "report.md"
        assert report["file_size"] == len(REPORT.encode()) and report["chunk_count"] >= 3


@pytest.mark.anyio
async def test_seed_index_upload_get_toc_and_delete(client: Client, service: Service) -> None:
    out = await call(client, "index", corpus="all", force=False)
    assert [c["corpus"] for c in out["corpora"]] == ["epm-docs"]
    assert out["corpora"][0]["unchanged"] == 2
    forced = await call(client, "index", corpus="epm-docs", force=True)
    assert forced["corpora"][0]["added"] == 2  # rebuilt from the files

    folders = await call(client, "list_folders")
    assert [f["name"] for f in folders["folders"]] == ["epm-docs"]

    content = base64.b64encode(b"# Policy\n\n## Travel\n\nBook trains, not flights.\n").decode()
    up = await call(
        client, "upload", corpus="epm-docs", filename="policy.md", content=content, index=True
    )
    assert up["doc_id"] == "policy.md" and up["indexed"]["documents"] == 3
    quiet = await call(
        client,
        "upload",
        corpus="epm-docs",
        filename="later.md",
        content=base64.b64encode(b"# Later\n\nIndexed on the next run.\n").decode(),
        index=False,
    )
    assert quiet["indexed"] is None and (root(service) / "later.md").is_file()

    toc = await call(client, "get_toc", corpus="epm-docs")
    assert toc["doc_id"] is None and toc["more_documents"] is False
    by_id = {d["doc_id"]: d for d in toc["documents"]}
    assert set(by_id) == {"memo.md", "policy.md", "report.md"}
    (top,) = by_id["report.md"]["headings"]
    assert top["title"] == "Annual report"
    assert [c["title"] for c in top["children"]] == [
        "Financial Statements",
        "HFM data audit",
        "Outlook",
    ]
    one = await call(
        client, "get_toc", corpus="epm-docs", document=str(root(service) / "report.md")
    )
    assert one["doc_id"] == "report.md" and one["headings"][0]["title"] == "Annual report"
    assert "give doc_id (or document), or a corpus" in await refused(client, "get_toc")

    gone = await call(client, "delete", corpus="epm-docs", filename="policy.md", index=True)
    assert gone["removed_from_index"] is True and gone["file_deleted"] is True
    assert not (root(service) / "policy.md").exists()
    left = await call(client, "list_documents", corpus="epm-docs")
    assert "policy.md" not in {d["doc_id"] for d in left["documents"]}


# -- A-RAG-OG ------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_rag_og_tool_set(client: Client) -> None:
    default = await call(
        client,
        "keyword_and_semantic_search",
        query="HFM data audit",
        top_k_before=20,
        top_k_after=3,
    )
    assert default["mode"] == "hybrid" and 1 <= default["count"] <= 3
    plain = await call(client, "search", query="HFM data audit", top_k=3)
    assert [h["chunk_id"] for h in default["hits"]] == [h["chunk_id"] for h in plain["hits"]]
    for tool, mode in (("semantic_search", "dense"), ("keyword_search", "keyword")):
        out = await call(client, tool, query="HFM data audit", top_k_before=20, top_k_after=2)
        assert out["mode"] == mode and 1 <= out["count"] <= 2
    filtered = await call(
        client,
        "filtered_search",
        query="audit errors",
        keywords=["audit"],
        entities=["Maria Santos"],
        content_types=["text"],
        date_from="2024-01-01",
        date_to="2024-12-31",
    )
    assert filtered["hits"]
    assert all("HFM data audit" in h["heading_path"] for h in filtered["hits"])
    assert json.dumps(filtered["filter"])  # the filter it applied is shown


# -- over HTTP, against a running server ---------------------------------------------------
def test_seed_calls_over_streamable_http(service: Service) -> None:
    """A few of the calls again, through the MCP client to a server on 127.0.0.1."""

    async def main(url: str) -> dict[str, dict[str, Any]]:
        async with Client(f"{url}/mcp") as mcp:
            out = {}
            for name, args in (
                ("search", {"query": "HFM data audit", "top_k": 2, "hybrid": True}),
                ("get_toc", {"corpus": "epm-docs"}),
                ("index", {"corpus": "all", "force": False}),
                ("keyword_and_semantic_search", {"query": "revenue", "top_k_after": 1}),
            ):
                result = await mcp.call_tool(name, args)
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                out[name] = result.structured_content
            return out

    with LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live:
        out = anyio.run(main, live.url)
    assert out["search"]["mode"] == "hybrid" and out["search"]["hits"]
    assert {d["doc_id"] for d in out["get_toc"]["documents"]} == {"memo.md", "report.md"}
    assert [c["corpus"] for c in out["index"]["corpora"]] == ["epm-docs"]
    assert out["keyword_and_semantic_search"]["count"] == 1
