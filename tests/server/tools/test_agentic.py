"""The agentic MCP tools, driven through the SDK's in-memory client against a real on-disk
index; every result is checked against the library call on the same index."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from guaipeca import Index, agentic
from guaipeca.config import LoadedSettings, load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server
from support.mcp import tool_data as data
from support.mcp import tool_error as error

MEMO = (
    "# Board memo\n\n"
    "## Budget\n\nThe Banco do Brasil approved the budget on 3 March 2024.\n\n"
    "## Staff\n\nMaria Silva joined NASA in 2019 as an engineer.\n\n"
    "## Plans\n\nThe launch is planned for 2025-06-01 with ESA and NASA.\n"
)
MISSION = "# Mission log\n\nNASA engineers tested the heat shield in the Mojave desert.\n"
OTHER = "# Recipes\n\nBake the bread for forty minutes.\n"

AGENT_TOOLS = {
    "keyword_search": {
        "query",
        "top_k_after",
        "top_k_before",
        "rerank",
        "corpora",
        "where",
        "budget",
    },
    "semantic_search": {
        "query",
        "top_k_after",
        "top_k_before",
        "rerank",
        "corpora",
        "where",
        "budget",
    },
    "filtered_search": {
        "query",
        "keywords",
        "entities",
        "content_types",
        "date_from",
        "date_to",
        "where",
        "mode",
        "top_k_after",
        "top_k_before",
        "rerank",
        "corpora",
        "budget",
    },
    "read_chunk": {"chunk_ids"},
    "read_neighbors": {"chunk_ids", "window"},
    "find_related": {
        "chunk_ids",
        "query",
        "top_k_after",
        "top_k_before",
        "corpora",
        "exclude",
        "same_document",
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedSettings:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "memo.md").write_text(MEMO, encoding="utf-8")
    (docs / "mission.md").write_text(MISSION, encoding="utf-8")
    (docs / "recipes.md").write_text(OTHER, encoding="utf-8")
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora:\n  - name: docs\n    path: docs\nchunking:\n  max_size: 80\n"
        "storage:\n  data_dir: data\n",
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
    assert svc.index.wait_for_embedding(60)  # the embedding phase runs behind the server
    yield svc
    index.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[Client]:
    async with Client(build_server(service)) as c:
        yield c


@pytest.mark.anyio
async def test_agent_tools_are_listed_read_only_with_schemas(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, args in AGENT_TOOLS.items():
        tool = tools[name]
        assert set(tool.input_schema["properties"]) == args, name
        assert tool.description and len(tool.description) > 80
        assert all(p.get("description") for p in tool.input_schema["properties"].values()), name
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.output_schema is not None


@pytest.mark.anyio
async def test_keyword_and_semantic_search_match_the_library(
    client: Client, service: Service
) -> None:
    idx = service.index
    for tool, call in (
        ("keyword_search", functools.partial(agentic.keyword_search, idx)),
        ("semantic_search", functools.partial(agentic.semantic_search, idx)),
    ):
        out = data(await client.call_tool(tool, {"query": "NASA engineer", "top_k_after": 3}))
        expected = call("NASA engineer", top_k_after=3)
        assert [h["chunk_id"] for h in out["hits"]] == [h.chunk_id for h in expected]
        assert out["count"] == len(expected)
    args = {"query": "NASA engineer", "top_k_after": 2, "top_k_before": 4, "rerank": True}
    out = data(await client.call_tool("semantic_search", args))
    expected = agentic.semantic_search(
        idx, "NASA engineer", top_k_after=2, top_k_before=4, rerank=True
    )
    assert [h["chunk_id"] for h in out["hits"]] == [h.chunk_id for h in expected]
    assert all(h["scores"]["rerank"] is not None for h in out["hits"])
    bad = await client.call_tool(
        "keyword_search", {"query": "NASA", "top_k_after": 5, "top_k_before": 2}
    )
    assert "top_k_before" in error(bad)


@pytest.mark.anyio
async def test_filtered_search_applies_entities_dates_and_reports_the_filter(
    client: Client, service: Service
) -> None:
    out = data(
        await client.call_tool(
            "filtered_search", {"query": "engineer", "entities": ["nasa"], "date_to": "2020"}
        )
    )
    assert [h["heading_path"][-1] for h in out["hits"]] == ["Staff"]
    assert out["filter"] == {
        "$and": [{"entity_keys": {"$contains": "nasa"}}, {"dates": {"$lte": "2020\uffff"}}]
    }
    lib = agentic.filtered_search(service.index, "engineer", entities=["nasa"], date_to="2020")
    assert [h["chunk_id"] for h in out["hits"]] == [h.chunk_id for h in lib]
    bad = await client.call_tool("filtered_search", {"query": "x", "date_from": "3 May"})
    assert "date_from" in error(bad)


@pytest.mark.anyio
async def test_read_chunk_returns_many_chunks_with_their_enrichment(
    client: Client, service: Service
) -> None:
    hit = agentic.filtered_search(service.index, "engineer", entities=["Maria Silva"])[0]
    out = data(await client.call_tool("read_chunk", {"chunk_ids": [hit.chunk_id, "docs:1"]}))
    assert [c["chunk_id"] for c in out["chunks"]] == [hit.chunk_id, "docs:1"]
    first = out["chunks"][0]
    assert first["text"] == hit.text
    assert "Maria Silva" in first["enrichment"]["entities"]
    assert first["enrichment"]["dates"] == ["2019"]
    assert "docs:999" in error(await client.call_tool("read_chunk", {"chunk_ids": "docs:999"}))


@pytest.mark.anyio
async def test_read_neighbors_returns_the_exact_span(client: Client, service: Service) -> None:
    idx = service.index
    chunks = idx.neighbors("docs:1", window=50)
    doc = idx.get_document(chunks[0].doc_id)
    mid = chunks[2]
    out = data(await client.call_tool("read_neighbors", {"chunk_ids": [mid.chunk_id]}))
    (span,) = out["spans"]
    assert span["chunk_ids"] == [c.chunk_id for c in chunks[1:4]]
    assert span["text"] == doc.text[chunks[1].start : chunks[3].end]
    assert (span["start"], span["end"]) == (chunks[1].start, chunks[3].end)
    assert span["source_path"] == "memo.md" or span["source_path"].endswith(".md")
    assert "window" in error(
        await client.call_tool("read_neighbors", {"chunk_ids": [mid.chunk_id], "window": 99})
    )


@pytest.mark.anyio
async def test_find_related_follows_an_entity_to_another_document(
    client: Client, service: Service
) -> None:
    seed = agentic.filtered_search(service.index, "engineer", entities=["Maria Silva"])[0]
    out = data(await client.call_tool("find_related", {"chunk_ids": seed.chunk_id}))
    assert "NASA" in out["entities"]
    docs = {h["doc_id"] for h in out["hits"]}
    assert "mission.md" in docs and seed.doc_id not in docs
    mission = next(h for h in out["hits"] if h["doc_id"] == "mission.md")
    assert "NASA" in mission["shared_entities"]
    lib = agentic.find_related(service.index, seed.chunk_id)
    assert [h["chunk_id"] for h in out["hits"]] == [r.hit.chunk_id for r in lib]
    # Excluded chunks stay out.
    again = data(
        await client.call_tool(
            "find_related", {"chunk_ids": [seed.chunk_id], "exclude": [mission["chunk_id"]]}
        )
    )
    assert mission["chunk_id"] not in {h["chunk_id"] for h in again["hits"]}
    assert "no chunk" in error(await client.call_tool("find_related", {"chunk_ids": "docs:999"}))
