"""The access contract with every identity source (issue 30, Must 5 and "Done when"): the
doors of tests/support/doors.py walked by people whose identity comes from a named token
(tokens.json, made with the real token file), an HS256 JWT with groups, and a real OpenID
provider (oidc-provider on node, tests/support/oidc) issuing tokens for two users in two
groups. One provider and one server for the module.

- alice (group ``legal``, or the named token ``alice-laptop``): reads ``contracts`` and
  ``handbook``;
- bob (group ``finance``, or the named token ``bob-laptop``): reads ``handbook`` and
  ``archive``; his answer about ``contracts`` equals the answer about a missing corpus at
  every door.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import jwt
import pytest

from guaipeca.server import Service
from guaipeca.server.audit import read_audit
from guaipeca.server.http import build_app
from guaipeca.server.tokens import TokenFile
from support import MemoEmbedder
from support.access import FILES, GRANTS, bearer, person, team_service
from support.doors import mcp_calls, targets_of, walk_mcp, walk_routes, walk_web_api
from support.http import LiveServer
from support.oidc import OidcProvider, key_set, require_provider

pytestmark = pytest.mark.slow  # a real provider, a real server, the real model

#: This server's audience (RFC 8707): the provider's tokens must name it.
RESOURCE = "http://guaipeca/mcp"
SOURCES = ("named token", "HS256 JWT", "OpenID provider")
#: Grants by group for the JWTs, by name for the named tokens (with the team's own).
SOURCE_GRANTS: list[dict[str, Any]] = [
    *GRANTS,
    {"who": {"group": "finance"}, "corpora": ["archive"], "can": ["read"]},
    {"who": {"token": "alice-laptop"}, "corpora": ["contracts"], "can": ["read", "write"]},
    {"who": {"token": "bob-laptop"}, "corpora": ["archive"], "can": ["read"]},
]
READS = {"alice": {"contracts", "handbook"}, "bob": {"handbook", "archive"}}
GROUPS = {"alice": "legal", "bob": "finance"}
#: The audit log's identity of bob, by source.
BOB_KEYS = {
    "named token": "token:bob-laptop",
    "HS256 JWT": "jwt:bob",
    "OpenID provider": "oidc:bob",
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider | None]:
    """The provider, or None without node (its cases skip; CI fails instead)."""
    try:
        require_provider()
    except pytest.skip.Exception:
        yield None
        return
    with OidcProvider(tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory,
    real_embedder: MemoEmbedder,
    provider: OidcProvider | None,
) -> Iterator[Service]:
    server: dict[str, Any] = {}
    if provider is not None:  # refresh at once: the rotation test rotates within a second
        oidc = {"issuer": provider.issuer, "resource": RESOURCE, "jwks_refresh_seconds": 0}
        server["oidc"] = oidc
    root = tmp_path_factory.mktemp("team")
    with team_service(root, real_embedder, server=server, access=SOURCE_GRANTS) as service:
        yield service


@pytest.fixture(scope="module")
def named(team: Service) -> dict[str, str]:
    """The named tokens' secrets, by person, made as ``guaipeca token add`` makes them."""
    tokens = TokenFile(team.loaded.data_dir)
    return {who: tokens.add(f"{who}-laptop") for who in READS}


@pytest.fixture(scope="module")
def live(team: Service, named: dict[str, str]) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(team, host="127.0.0.1", port=port)) as server:
        yield server


@pytest.fixture
def token_of(provider: OidcProvider | None, named: dict[str, str]) -> Any:
    """A credential for ``who`` (alice or bob) from ``source``."""

    def token(source: str, who: str) -> str:
        if source == "named token":
            return named[who]
        if source == "HS256 JWT":
            return person(who, GROUPS[who])
        if provider is None:
            pytest.skip("no node 20.19+ or no oidc-provider (npm ci in tests/support/oidc)")
        return provider.token(who, RESOURCE)

    return token


def reads(url: str, token: str) -> dict[str, set[str]]:
    """What the caller reads, as each door tells: the web page's /api/me, MCP status and
    list_documents, the web API's list_documents, /download."""
    seen: dict[str, set[str]] = {}
    with httpx2.Client(base_url=url, headers=bearer(token), timeout=60) as http:
        seen["/api/me"] = set(http.get("/api/me").json()["read"])
        seen["/api/tools"] = {
            c
            for c in FILES
            if http.post("/api/tools/list_documents", json={"corpus": c}).status_code == 200
        }
        seen["/download"] = {
            c for c in FILES if http.get(f"/download/{c}/{next(iter(FILES[c]))}").status_code == 200
        }
    calls = [("status", {})] + [("list_documents", {"corpus": c}) for c in FILES]
    (_, status), *listings = mcp_calls(url, token, calls)
    seen["mcp status"] = {c["name"] for c in json.loads(status)["corpora"]}
    seen["mcp list_documents"] = {
        c for c, (error, _) in zip(FILES, listings, strict=True) if not error
    }
    return seen


@pytest.mark.parametrize("source", SOURCES)
def test_a_forbidden_identity_finds_contracts_missing_at_every_door(
    live: LiveServer, team: Service, token_of: Any, source: str
) -> None:
    bob = token_of(source, "bob")
    forbidden, missing = targets_of(team)
    walk_mcp(live.url, bob, forbidden, missing)
    walk_web_api(live.url, bob, forbidden, missing)
    walk_routes(live.url, bob)
    health = httpx2.get(f"{live.url}/health", headers=bearer(bob)).json()  # public: anyone's
    assert [c["name"] for c in health["corpora"]] == ["handbook"]
    assert team.audit.path is not None
    mine = [x for x in read_audit(team.audit.path) if x["identity"] == BOB_KEYS[source]]
    denied = [x for x in mine if x["outcome"] == "denied"]
    assert {x["corpus"] for x in denied} == {"contracts"}  # never the missing one
    assert {"GET /download/contracts/nda.md", "tool:get_chunk"} <= {x["door"] for x in denied}


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize("source", SOURCES)
def test_each_person_reads_exactly_their_corpora(
    live: LiveServer, token_of: Any, source: str, who: str
) -> None:
    seen = reads(live.url, token_of(source, who))
    assert seen == dict.fromkeys(seen, READS[who])


def test_rotated_keys_keep_each_persons_corpora(
    live: LiveServer, provider: OidcProvider | None
) -> None:
    if provider is None:
        pytest.skip("no node 20.19+ or no oidc-provider (npm ci in tests/support/oidc)")
    before = {who: provider.token(who, RESOURCE) for who in READS}
    old = provider.keys
    provider.restart(key_set("rotated") + old)  # new keys sign, the old ones still published
    after = {who: provider.token(who, RESOURCE) for who in READS}
    assert jwt.get_unverified_header(after["alice"])["kid"] == "es256-rotated"
    for who in READS:
        for token in (before[who], after[who]):
            seen = reads(live.url, token)
            assert seen == dict.fromkeys(seen, READS[who]), (who, seen)
    provider.restart(key_set("latest"))  # the old keys retired
    for who in READS:
        # The first token with a new key id refreshes the server's copy of the key set
        # (until then, or jwks_cache_seconds, a retired key is still trusted).
        seen = reads(live.url, provider.token(who, RESOURCE))
        assert seen == dict.fromkeys(seen, READS[who]), (who, seen)
        refused = httpx2.get(f"{live.url}/api/me", headers=bearer(before[who]))
        assert refused.status_code == 401, refused.text


def test_a_token_for_another_audience_is_refused_at_every_door(
    live: LiveServer, provider: OidcProvider | None
) -> None:
    if provider is None:
        pytest.skip("no node 20.19+ or no oidc-provider (npm ci in tests/support/oidc)")
    token = provider.token("alice", "http://127.0.0.1:9/another-mcp-server")
    with httpx2.Client(base_url=live.url, headers=bearer(token), timeout=30) as http:
        for method, path in [
            ("POST", "/mcp"), ("GET", "/api/me"), ("POST", "/api/tools/search"),
            ("GET", "/download/contracts/lease.md"),
            ("DELETE", "/documents?corpus=contracts&filename=lease.md"),
        ]:  # fmt: skip
            got = http.request(method, path)
            assert got.status_code == 401, (path, got.text)
            assert got.json() == {"error": "token is for another audience (resource)"}
