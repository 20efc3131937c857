"""The access contract (issue 30): every MCP tool and every HTTP route, with every kind of
caller, against a real server on 127.0.0.1 with a team's grants (tests/support/access.py).

- allowed (alice, legal): reads and writes ``contracts``;
- forbidden (bob, sales; the static token): their answer about ``contracts`` equals the
  answer about a corpus that does not exist, at every door;
- none (no credentials): 401.

The tool list comes from the server itself (MCP tools/list): a new tool without a case in
tests/support/doors.py fails. tests/server/test_guard_sources.py walks the same doors with
named tokens and a real OpenID provider's tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client

from guaipeca.server import Service
from guaipeca.server.audit import AuditQuery, read_audit
from guaipeca.server.http import build_app
from support import MemoEmbedder
from support.access import STATIC_TOKEN, bearer, person, static_identity, team_service
from support.doors import (
    CASES,
    LISTINGS,
    ROUTES,
    Target,
    mcp_calls,
    mcp_tools,
    same,
    targets_of,
    walk_mcp,
    walk_routes,
    walk_web_api,
)
from support.http import LiveServer

pytestmark = pytest.mark.slow  # a real server, the real model, every tool three times over

ALICE = person("alice", "legal")
BOB = person("bob", "sales")


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
    return targets_of(team)


def test_every_tool_has_a_case(live: LiveServer) -> None:
    assert set(mcp_tools(live.url, STATIC_TOKEN)) == set(CASES)


@pytest.mark.parametrize("caller", ["bob", "static token"])
def test_a_forbidden_corpus_answers_as_a_missing_one_over_mcp(
    live: LiveServer, targets: tuple[Target, Target], caller: str
) -> None:
    walk_mcp(live.url, BOB if caller == "bob" else STATIC_TOKEN, *targets)


def test_a_forbidden_corpus_answers_as_a_missing_one_over_the_web_api(
    live: LiveServer, targets: tuple[Target, Target]
) -> None:
    walk_web_api(live.url, BOB, *targets)


def test_the_allowed_caller_uses_every_tool_on_its_corpus(
    live: LiveServer, targets: tuple[Target, Target]
) -> None:
    allowed, _ = targets
    calls = [(n, args) for n in mcp_tools(live.url, ALICE) for args in CASES[n](allowed)]
    for (name, args), (error, text) in zip(calls, mcp_calls(live.url, ALICE, calls), strict=True):
        assert not error, (name, args, text)
        if name in LISTINGS:
            assert "contracts" in text and "archive" not in text


def test_searches_without_corpora_never_reach_another_corpus(live: LiveServer) -> None:
    names = ("search", "keyword_search", "semantic_search", "keyword_and_semantic_search")
    query = "pond agreement confidential"
    calls = [(n, {"query": query, "top_k" if n == "search" else "top_k_after": 20}) for n in names]
    for token, mine in ((BOB, {"handbook"}), (ALICE, {"contracts", "handbook"})):
        for error, text in mcp_calls(live.url, token, calls):
            assert not error, text
            corpora = {h["corpus"] for h in json.loads(text)["hits"]}
            assert corpora and corpora <= mine


def test_plain_routes_answer_a_forbidden_corpus_as_a_missing_one(
    live: LiveServer, team: Service
) -> None:
    for token in (BOB, STATIC_TOKEN):
        walk_routes(live.url, token)
    with httpx2.Client(base_url=live.url, timeout=60) as http:
        for method, path, body in ROUTES:  # alice: uploaded, downloaded, deleted
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
                out.append((bool(result.is_error), same(result.content[0].text)))  # type: ignore[union-attr]
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
    # Never the missing corpus (nothing was denied there); None: a 401, no corpus checked.
    assert {x["corpus"] for x in denied} <= {"contracts", "handbook", None}
    assert any(x["door"] == "GET /download/contracts/nda.md" for x in denied)
    assert any(x["door"] == "tool:get_chunk" for x in denied)
    refused = [x for x in lines if x.get("detail") == "HTTP 401"]
    assert {x["door"] for x in refused} >= {"POST /mcp", "GET /api/me"}
    assert {str(x["identity"]) for x in refused} == {"ip:127.0.0.1"}
    writes = list(read_audit(path, AuditQuery(identity="jwt:alice", corpus="contracts")))
    assert {x["door"] for x in writes} >= {"tool:upload", "tool:delete", "tool:index"}
    assert all(x["outcome"] == "ok" for x in writes)
