"""A server whose configured corpus is not indexed yet (issue 38): the corpus exists from
the first start, empty. Through the official MCP client against the real server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from guaipeca import Index
from guaipeca.config import load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "a.md").write_text("# A\n\nNot indexed yet.\n", encoding="utf-8")
    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        "corpora:\n  - name: samples\n    path: samples\nstorage:\n  data_dir: data\n",
        encoding="utf-8",
    )
    loaded = load_settings(config, env={}, cwd=tmp_path)
    index = Index(
        loaded.data_dir / "index", embedder=HashingEmbedder(64), settings=loaded.settings.engine()
    )
    yield Service(index, loaded)
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


@pytest.mark.anyio
async def test_a_configured_corpus_not_indexed_lists_no_documents(client: Client) -> None:
    listed = await call(client, "list_documents")
    assert listed["documents"] == [] and listed["count"] == 0
    named = await call(client, "list_documents", corpus="samples")
    assert named["documents"] == []


@pytest.mark.anyio
async def test_a_configured_corpus_not_indexed_has_an_empty_toc(client: Client) -> None:
    toc = await call(client, "get_toc", corpus="samples")
    assert toc["corpus"] == "samples"
    assert toc["documents"] == [] and toc["headings"] == []


@pytest.mark.anyio
async def test_a_configured_corpus_not_indexed_finds_nothing(client: Client) -> None:
    found = await call(client, "search", query="indexed")
    assert found["hits"] == []
    named = await call(client, "search", query="indexed", corpora=["samples"])
    assert named["hits"] == []
