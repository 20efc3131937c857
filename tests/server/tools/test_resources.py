"""Documents and chunks as MCP resources, and the resource links tool results carry to them,
through the SDK's in-memory client (both eras: the handshake and the stateless 2026-07-28
path) over a real on-disk index."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ResourceLink, TextResourceContents

from guaipeca import Index, NewDocument
from guaipeca.config import LoadedSettings, load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server
from guaipeca.server.tools.common import TOOL_MAX_READ_CHARS
from guaipeca.server.tools.links import chunk_uri, document_uri

DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun the zebra installer twice.\n\n## Use\n\nAsk.\n",
    "sub/deep notes #1.md": "# Deep\n\nA nested document about the zebra budget.\n",
}
SECRET = "TOP SECRET: never served"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resources")


@pytest.fixture(scope="module")
def service(root: Path) -> Iterator[Service]:
    for rel, text in DOCS.items():
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / rel).write_text(text, encoding="utf-8")
    (root / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (root / "docs" / "link.md").symlink_to(root / "secret.md")
    config = root / "guaipeca.yaml"
    config.write_text(
        "corpora:\n  - name: docs\n    path: docs\nstorage:\n  data_dir: data\n", encoding="utf-8"
    )
    loaded: LoadedSettings = load_settings(config, env={}, cwd=root)
    index = Index(
        loaded.data_dir / "index", embedder=HashingEmbedder(64), settings=loaded.settings.engine()
    )
    svc = Service(index, loaded)
    svc.reindex("docs")
    # A corpus left in the data folder but not configured: searches skip it, and so do reads.
    index.add_documents({"left.md": f"# Left\n\n{SECRET}\n"}, corpus="stale")
    assert index.wait_for_embedding(60)
    yield svc
    index.close()


@pytest.fixture
def outside(service: Service, root: Path) -> Iterator[None]:
    """A document whose recorded file leads outside its corpus folder (indexed by a version
    before links were checked): its text is never served."""
    secret = str(root / "secret.md")
    doc = NewDocument("outside.md", f"# Out\n\n{SECRET}\n", source_path=secret)
    service.index.add_documents([doc], corpus="docs")
    yield
    service.index.delete_document("outside.md", corpus="docs")


@pytest.fixture(params=["legacy", "2026-07-28"])
async def client(service: Service, request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    async with Client(build_server(service), mode=request.param) as c:
        yield c


def links_of(result: Any) -> list[ResourceLink]:
    assert not result.is_error, result.content
    return [b for b in result.content if isinstance(b, ResourceLink)]


async def read_text(client: Client, uri: str) -> str:
    (contents,) = (await client.read_resource(uri)).contents
    assert isinstance(contents, TextResourceContents)
    assert contents.mime_type == "text/markdown" and contents.uri == uri
    return contents.text


@pytest.mark.anyio
async def test_the_templates_are_listed(client: Client) -> None:
    listed = (await client.list_resource_templates()).resource_templates
    assert [(t.name, t.uri_template, t.mime_type) for t in listed] == [
        ("document", "guaipeca://corpus/{corpus}/doc/{doc_id}", "text/markdown"),
        ("chunk", "guaipeca://corpus/{corpus}/chunk/{chunk}", "text/markdown"),
    ]


@pytest.mark.anyio
async def test_search_links_each_hit_and_its_document_and_both_read_back(client: Client) -> None:
    result = await client.call_tool("search", {"query": "zebra", "top_k": 5})
    hits = result.structured_content["hits"] if result.structured_content else []
    links = links_of(result)
    chunk_links, doc_links = links[: len(hits)], links[len(hits) :]
    assert [link.uri for link in chunk_links] == [chunk_uri(h["chunk_id"]) for h in hits]
    assert [link.name for link in doc_links] == list(dict.fromkeys(h["doc_id"] for h in hits))
    for hit, link in zip(hits, chunk_links, strict=True):
        assert await read_text(client, link.uri) == hit["text"]
    documents = {link.name: await read_text(client, link.uri) for link in doc_links}
    for hit in hits:
        assert documents[hit["doc_id"]][hit["start"] : hit["end"]] == hit["text"]
    # A doc id with a folder, a space and a '#' is one percent-encoded segment.
    assert document_uri("docs", "sub/deep notes #1.md") in {link.uri for link in doc_links}
    assert "guaipeca://corpus/docs/doc/sub%2Fdeep%20notes%20%231.md" in {
        link.uri for link in doc_links
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("get_chunk", {"chunk_ids": "docs:1"}),
        ("read_chunk", {"chunk_ids": ["docs:1"]}),
        ("read_neighbors", {"chunk_ids": ["docs:1"]}),
        ("find_related", {"chunk_ids": ["docs:1"]}),
        ("keyword_search", {"query": "zebra"}),
        ("semantic_search", {"query": "zebra"}),
        ("keyword_and_semantic_search", {"query": "zebra"}),
        ("filtered_search", {"query": "zebra"}),
        ("list_documents", {}),
        ("get_toc", {"corpus": "docs"}),
    ],
)
async def test_every_link_a_tool_gives_reads_back(
    client: Client, tool: str, args: dict[str, Any]
) -> None:
    links = links_of(await client.call_tool(tool, args))
    assert links, tool
    for link in links:
        assert link.mime_type == "text/markdown"
        assert await read_text(client, link.uri)


@pytest.mark.anyio
async def test_tools_that_name_no_hit_or_document_carry_no_links(client: Client) -> None:
    for tool, args in [("status", {}), ("get_document", {"doc_id": "guide.md"})]:
        assert links_of(await client.call_tool(tool, args)) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "uri",
    [
        document_uri("docs", "nope.md"),  # missing
        document_uri("stale", "left.md"),  # a corpus that is not served
        chunk_uri("stale:0"),
        document_uri("docs", "outside.md"),  # its file leads outside the corpus folder
        document_uri("docs", "link.md"),  # a link to a file outside
        document_uri("nowhere", "guide.md"),
        chunk_uri("docs:999999"),
        "guaipeca://corpus/docs/chunk/x",
        "guaipeca://corpus/docs/doc/../../secret.md",
        "guaipeca://corpus/docs/doc/%2E%2E%2Fsecret.md",
        "guaipeca://nothing/here",  # no template matches
    ],
)
@pytest.mark.usefixtures("outside")
async def test_forbidden_and_missing_resources_get_the_unknown_uri_error(
    client: Client, uri: str
) -> None:
    with pytest.raises(MCPError) as info:
        await client.read_resource(uri)
    assert info.value.error.code == INVALID_PARAMS
    assert info.value.error.message == f"Unknown resource: {uri}"
    assert info.value.error.data == {"uri": uri}


@pytest.mark.usefixtures("outside")
def test_the_stale_and_outside_documents_are_really_there(service: Service) -> None:
    # What the test above refuses exists in the index: the refusal is the access rule.
    assert SECRET in service.index.get_document("left.md", corpus="stale").text
    assert SECRET in service.index.get_document("outside.md", corpus="docs").text


@pytest.fixture
def huge(service: Service) -> Iterator[str]:
    """A document longer than one read's budget (TOOL_MAX_READ_CHARS)."""
    text = "# Huge\n\n" + "".join(f"line {i} of the huge zebra file\n" for i in range(40_000))
    assert len(text) > TOOL_MAX_READ_CHARS
    service.index.add_documents({"huge.md": text}, corpus="docs")
    yield text
    service.index.delete_document("huge.md", corpus="docs")


@pytest.mark.anyio
async def test_a_document_over_the_read_budget_is_served_in_parts(
    client: Client, huge: str
) -> None:
    # The resource gives the first TOOL_MAX_READ_CHARS characters and says where the rest is;
    # get_document pages on from there, and the parts put together are the document.
    text = await read_text(client, document_uri("docs", "huge.md"))
    head, note = text[:TOOL_MAX_READ_CHARS], text[TOOL_MAX_READ_CHARS:]
    assert head == huge[:TOOL_MAX_READ_CHARS]
    assert f"offset {TOOL_MAX_READ_CHARS}" in note and "get_document" in note
    parts, offset = [head], TOOL_MAX_READ_CHARS
    while offset is not None:
        result = await client.call_tool(
            "get_document", {"doc_id": "huge.md", "offset": offset, "max_chars": 100_000}
        )
        out = result.structured_content or {}
        assert out["chars"] == len(huge) and out["offset"] == offset
        parts.append(out["text"])
        offset = out["next_offset"]
    assert "".join(parts) == huge
