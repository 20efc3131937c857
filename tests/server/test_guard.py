"""The access contract (issue 30): every MCP tool and every HTTP route, with every kind of
caller, against a real server on 127.0.0.1 with a team's grants (tests/support/access.py).

- allowed (alice, legal): reads and writes ``contracts``;
- forbidden (bob, sales; the static token): their answer about ``contracts`` equals the
  answer about a corpus that does not exist, at every door;
- none (no credentials): 401.

The tool list comes from the server itself: a new tool without a case here fails.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from guaipeca.server import Service
from guaipeca.server.audit import AuditQuery, read_audit
from guaipeca.server.http import build_app
from support import MemoEmbedder
from support.access import STATIC_TOKEN, bearer, person, static_identity, team_service
from support.http import LiveServer

pytestmark = pytest.mark.slow  # a real server, the real model, every tool three times over

ALICE = person("alice", "legal")
BOB = person("bob", "sales")
MISSING = "nosuch"


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
    # No corpus argument: what they show is checked below.
    "status": lambda t: [{}],
    "list_folders": lambda t: [{}],
}


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, real_embedder: MemoEmbedder
) -> Iterator[Service]:
    with team_service(tmp_path_factory.mktemp("team"), real_embedder) as service:
        yield service


@pytest.fixture(scope="module")
def live(team: Service) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(team, host="127.0.0.1", port=port)) as server:
        yield server


@pytest.fixture(scope="module")
def targets(team: Service) -> tuple[Target, Target]:
    """``contracts`` with one of its chunks and documents, and the same ids in a corpus
    that does not exist."""
    hit = team.index.search("pond agreement", corpora=["contracts"], top_k=1)[0]
    other = team.index.search("holidays", corpora=["handbook"], top_k=1)[0].chunk_id
    number = hit.chunk_id.rpartition(":")[2]
    return (
        Target("contracts", hit.chunk_id, "nda.md", other),
        Target(MISSING, f"{MISSING}:{number}", "nda.md", other),
    )


def _same(text: str) -> str:
    """An answer with the corpus it names made neutral."""
    return text.replace("contracts", "<corpus>").replace(MISSING, "<corpus>")


async def _mcp_calls(
    url: str, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, str]]:
    """Each call over one MCP session: (is_error, text)."""
    out = []
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as mcp,
    ):
        for name, args in calls:
            result = await mcp.call_tool(name, args)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            out.append((bool(result.is_error), text))
    return out


def _tool_names(live: LiveServer) -> list[str]:
    listed = httpx2.get(f"{live.url}/tools", headers=bearer(STATIC_TOKEN)).json()
    return [t["name"] for t in listed["tools"]]


def test_every_tool_has_a_case(live: LiveServer) -> None:
    assert set(_tool_names(live)) == set(CASES)


@pytest.mark.parametrize("caller", ["bob", "static token"])
def test_a_forbidden_corpus_answers_as_a_missing_one_over_mcp(
    live: LiveServer, targets: tuple[Target, Target], caller: str
) -> None:
    token = BOB if caller == "bob" else STATIC_TOKEN
    forbidden, missing = targets
    for name in _tool_names(live):
        if name in ("status", "list_folders"):
            continue
        calls = [(name, args) for args in CASES[name](forbidden)]
        twins = [(name, args) for args in CASES[name](missing)]
        got = anyio.run(_mcp_calls, live.url, token, calls)
        expected = anyio.run(_mcp_calls, live.url, token, twins)
        for ((_, args_f), (err_f, text_f)), (err_m, text_m) in zip(
            zip(calls, got, strict=True), expected, strict=True
        ):
            assert err_f and err_m, (args_f, text_f)
            assert _same(text_f) == _same(text_m), (args_f, text_f, text_m)


def test_a_forbidden_corpus_answers_as_a_missing_one_over_the_web_api(
    live: LiveServer, targets: tuple[Target, Target]
) -> None:
    forbidden, missing = targets
    with httpx2.Client(base_url=live.url, headers=bearer(BOB), timeout=60) as http:
        for name in _tool_names(live):
            for args_f, args_m in zip(CASES[name](forbidden), CASES[name](missing), strict=True):
                got = http.post(f"/api/tools/{name}", json=args_f)
                twin = http.post(f"/api/tools/{name}", json=args_m)
                if name in ("status", "list_folders"):
                    assert got.status_code == 200 and "contracts" not in got.text
                    continue
                assert got.status_code == twin.status_code != 200, (name, got.text)
                assert _same(got.text) == _same(twin.text), (name, got.text, twin.text)


def test_the_allowed_caller_uses_every_tool_on_its_corpus(
    live: LiveServer, targets: tuple[Target, Target]
) -> None:
    allowed, _ = targets
    calls = [(n, args) for n in _tool_names(live) for args in CASES[n](allowed)]
    for (name, args), (error, text) in zip(
        calls, anyio.run(_mcp_calls, live.url, ALICE, calls), strict=True
    ):
        assert not error, (name, args, text)
        if name in ("status", "list_folders"):
            assert "contracts" in text and "archive" not in text


def test_searches_without_corpora_never_reach_another_corpus(live: LiveServer) -> None:
    names = ("search", "keyword_search", "semantic_search", "keyword_and_semantic_search")
    query = "pond agreement confidential"
    calls = [(n, {"query": query, "top_k" if n == "search" else "top_k_after": 20}) for n in names]
    for token, mine in ((BOB, {"handbook"}), (ALICE, {"contracts", "handbook"})):
        for error, text in anyio.run(_mcp_calls, live.url, token, calls):
            assert not error, text
            corpora = {h["corpus"] for h in json.loads(text)["hits"]}
            assert corpora and corpora <= mine


def test_plain_routes_answer_a_forbidden_corpus_as_a_missing_one(
    live: LiveServer, team: Service
) -> None:
    memo = b"# Memo\n\nA memo.\n"  # alice: uploaded, downloaded, deleted
    with httpx2.Client(base_url=live.url, timeout=60) as http:
        routes: list[tuple[str, str, bytes | None]] = [
            ("PUT", "/api/upload?corpus={c}&filename=nda.md", memo),
            ("GET", "/download/{c}/nda.md", None),
            ("DELETE", "/documents?corpus={c}&filename=nda.md", None),
        ]
        for method, path, body in routes:
            for token in (BOB, STATIC_TOKEN):
                got = http.request(
                    method, path.format(c="contracts"), content=body, headers=bearer(token)
                )
                twin = http.request(
                    method, path.format(c=MISSING), content=body, headers=bearer(token)
                )
                assert got.status_code == twin.status_code == 404, (path, got.text)
                assert _same(got.text) == _same(twin.text)
            mine = path.format(c="contracts").replace("nda", "memo2")
            allowed = http.request(method, mine, content=body, headers=bearer(ALICE))
            assert allowed.status_code == 200, (mine, allowed.text)
        health = http.get("/health").json()  # no credentials: what anyone may read
        assert [c["name"] for c in health["corpora"]] == ["handbook"]
        me = http.get("/api/me", headers=bearer(BOB)).json()
        assert (me["identity"], me["groups"], me["read"], me["write"]) == (
            "jwt:bob",
            ["sales"],
            ["handbook"],
            ["handbook"],
        )
        tools = http.get("/tools", headers=bearer(BOB)).text
        assert "contracts" not in tools


def test_a_readable_corpus_without_a_write_grant_is_refused_by_name(live: LiveServer) -> None:
    with httpx2.Client(base_url=live.url, timeout=60) as http:
        got = http.put(
            "/api/upload?corpus=handbook&filename=x.md",
            content=b"# x\n",
            headers=bearer(STATIC_TOKEN),
        )
        assert got.status_code == 403
        assert "you may read corpus 'handbook' but not change it" in got.json()["error"]


def test_the_legacy_sse_transport_runs_tools_with_its_callers_rights(
    live: LiveServer, targets: tuple[Target, Target]
) -> None:
    forbidden, missing = targets

    async def main(token: str) -> list[tuple[bool, str]]:
        out = []
        async with Client(
            sse_client(f"{live.url}/sse", headers=bearer(token)), mode="legacy"
        ) as mcp:
            for target in (forbidden, missing):
                result = await mcp.call_tool("get_chunk", {"chunk_ids": [target.chunk]})
                out.append((bool(result.is_error), _same(result.content[0].text)))  # type: ignore[union-attr]
        return out

    bob = anyio.run(main, BOB)
    assert bob[0] == bob[1] and bob[0][0]
    alice = anyio.run(main, ALICE)
    assert not alice[0][0] and alice[1][0]


def test_no_credentials_get_401_at_every_door(live: LiveServer) -> None:
    with httpx2.Client(base_url=live.url, timeout=30) as http:
        for method, path in [
            ("POST", "/mcp"), ("GET", "/tools"), ("GET", "/download/contracts/nda.md"),
            ("DELETE", "/documents?corpus=contracts&filename=nda.md"),
            ("PUT", "/api/upload?corpus=contracts&filename=x.md"),
            ("POST", "/api/tools/search"), ("GET", "/api/me"), ("POST", "/api/render"),
        ]:  # fmt: skip
            assert http.request(method, path).status_code == 401, path


def test_denials_and_writes_are_audited(live: LiveServer, team: Service) -> None:
    path = team.audit.path
    assert path is not None
    lines = list(read_audit(path))
    denied = [x for x in lines if x["outcome"] == "denied"]
    assert {x["identity"] for x in denied} >= {"jwt:bob", static_identity()}
    assert {x["corpus"] for x in denied} <= {"contracts", "handbook"}  # never the missing one
    assert any(x["door"] == "GET /download/contracts/nda.md" for x in denied)
    assert any(x["door"] == "tool:get_chunk" for x in denied)
    writes = list(read_audit(path, AuditQuery(identity="jwt:alice", corpus="contracts")))
    assert {x["door"] for x in writes} >= {"tool:upload", "tool:delete", "tool:index"}
    assert all(x["outcome"] == "ok" for x in writes)
