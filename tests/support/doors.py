"""Every door of the access contract (issue 30), for tests/server/test_guard.py and
test_guard_sources.py: each MCP tool's calls about a corpus, the MCP client that makes them,
and the walks that check a forbidden corpus answers as a missing one.

The tool list comes from the server itself (MCP ``tools/list``): a tool without a case in
:data:`CASES` fails the walk.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from guaipeca.server import Service
from support.access import bearer

#: A corpus that does not exist: a forbidden corpus must answer as this one does.
MISSING = "nosuch"
#: Tools without a corpus argument: what they list is checked instead.
LISTINGS = ("status", "list_folders")


@dataclass(frozen=True)
class Target:
    """What a call names: a corpus, a chunk and a document of it."""

    corpus: str
    chunk: str
    doc: str
    readable_chunk: str  # of handbook, which everyone reads


def _search(t: Target) -> list[dict[str, Any]]:
    return [{"query": "pond agreement", "corpora": [t.corpus]}]


def _chunks(t: Target) -> list[dict[str, Any]]:
    return [{"chunk_ids": [t.chunk]}, {"chunk_ids": [t.readable_chunk, t.chunk]}]


def _upload(t: Target) -> list[dict[str, Any]]:
    text = base64.b64encode(b"# Memo\n\nA memo about the pond.\n").decode()
    return [{"corpus": t.corpus, "filename": "memo.md", "content_base64": text}]


#: Each tool's calls about a target (the forbidden corpus, a missing one, or the allowed).
CASES: dict[str, Callable[[Target], list[dict[str, Any]]]] = {
    "search": _search,
    "keyword_search": _search,
    "semantic_search": _search,
    "keyword_and_semantic_search": _search,
    "filtered_search": lambda t: [{"query": "pond", "corpora": [t.corpus], "keywords": ["pond"]}],
    "get_chunk": _chunks,
    "read_chunk": _chunks,
    "read_neighbors": _chunks,
    "find_related": lambda t: [{"chunk_ids": [t.chunk], "query": "pond"}],
    "get_document": lambda t: [{"doc_id": t.doc, "corpus": t.corpus}, {"doc_id": t.doc}],
    "get_toc": lambda t: [{"doc_id": t.doc, "corpus": t.corpus}, {"corpus": t.corpus}],
    "list_documents": lambda t: [{"corpus": t.corpus}],
    "index": lambda t: [{"corpus": t.corpus}],
    "upload": _upload,
    "delete": lambda t: [{"corpus": t.corpus, "doc_id": "memo.md"}],
    # No corpus argument: what they show is checked by the walks.
    "status": lambda t: [{}],
    "list_folders": lambda t: [{}],
}

#: The plain routes about a corpus ``{c}``: method, path, body.
ROUTES: list[tuple[str, str, bytes | None]] = [
    ("PUT", "/api/upload?corpus={c}&filename=nda.md", b"# Memo\n\nA memo.\n"),
    ("GET", "/download/{c}/nda.md", None),
    ("DELETE", "/documents?corpus={c}&filename=nda.md", None),
]


def targets_of(service: Service) -> tuple[Target, Target]:
    """``contracts`` with one of its chunks and documents, and the same ids in a corpus
    that does not exist."""
    hit = service.index.search("pond agreement", corpora=["contracts"], top_k=1)[0]
    other = service.index.search("holidays", corpora=["handbook"], top_k=1)[0].chunk_id
    number = hit.chunk_id.rpartition(":")[2]
    return (
        Target("contracts", hit.chunk_id, "nda.md", other),
        Target(MISSING, f"{MISSING}:{number}", "nda.md", other),
    )


def same(text: str) -> str:
    """An answer with the corpus it names made neutral."""
    return text.replace("contracts", "<corpus>").replace(MISSING, "<corpus>")


async def _session(
    url: str, token: str, calls: list[tuple[str, dict[str, Any]]], listed: list[str]
) -> list[tuple[bool, str]]:
    out = []
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as mcp,
    ):
        listed.extend(t.name for t in (await mcp.list_tools()).tools)
        for name, args in calls:
            result = await mcp.call_tool(name, args)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            out.append((bool(result.is_error), text))
    return out


def mcp_calls(
    url: str, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, str]]:
    """Each call over one MCP session at ``url``/mcp: (is_error, text)."""
    return anyio.run(_session, url, token, calls, [])


def mcp_tools(url: str, token: str) -> list[str]:
    """The tools the server lists (MCP ``tools/list``) to ``token``'s caller."""
    listed: list[str] = []
    anyio.run(_session, url, token, [], listed)
    return listed


def walk_mcp(url: str, token: str, forbidden: Target, missing: Target) -> list[str]:
    """Every listed tool over ``/mcp``, about ``forbidden`` and about ``missing``: both
    errors, the same text but for the name. Returns the tools walked.

    Raises:
        AssertionError: a tool without a case, or an answer that tells them apart.
    """
    names = mcp_tools(url, token)
    assert set(names) == set(CASES), f"tools without a case: {set(names) ^ set(CASES)}"
    about = [n for n in names if n not in LISTINGS]
    calls = [(n, args) for n in about for args in CASES[n](forbidden)]
    twins = [(n, args) for n in about for args in CASES[n](missing)]
    got, expected = mcp_calls(url, token, calls), mcp_calls(url, token, twins)
    for (name, args), (err_f, text_f), (err_m, text_m) in zip(calls, got, expected, strict=True):
        assert err_f and err_m, (name, args, text_f)
        assert same(text_f) == same(text_m), (name, args, text_f, text_m)
    listings = mcp_calls(url, token, [(n, {}) for n in LISTINGS])
    for name, (error, text) in zip(LISTINGS, listings, strict=True):
        assert not error and forbidden.corpus not in text, (name, text)
    return names


def walk_web_api(url: str, token: str, forbidden: Target, missing: Target) -> None:
    """Every listed tool through the web page's API (``/api/tools/*``), as :func:`walk_mcp`.

    Raises:
        AssertionError: an answer that tells them apart, or a listing naming ``forbidden``.
    """
    with httpx2.Client(base_url=url, headers=bearer(token), timeout=60) as http:
        for name in mcp_tools(url, token):
            for args_f, args_m in zip(CASES[name](forbidden), CASES[name](missing), strict=True):
                got = http.post(f"/api/tools/{name}", json=args_f)
                twin = http.post(f"/api/tools/{name}", json=args_m)
                if name in LISTINGS:
                    assert got.status_code == 200, (name, got.text)
                    assert forbidden.corpus not in got.text, (name, got.text)
                    continue
                assert got.status_code == twin.status_code != 200, (name, got.text)
                assert same(got.text) == same(twin.text), (name, got.text, twin.text)


def walk_routes(url: str, token: str, forbidden: str = "contracts") -> None:
    """``/api/upload``, ``/download`` and ``/documents`` about ``forbidden`` and about a
    missing corpus: both 404, the same body but for the name.

    Raises:
        AssertionError: an answer that tells them apart.
    """
    with httpx2.Client(base_url=url, headers=bearer(token), timeout=60) as http:
        for method, path, body in ROUTES:
            got = http.request(method, path.format(c=forbidden), content=body)
            twin = http.request(method, path.format(c=MISSING), content=body)
            assert got.status_code == twin.status_code == 404, (path, got.text)
            assert same(got.text) == same(twin.text), (path, got.text, twin.text)
