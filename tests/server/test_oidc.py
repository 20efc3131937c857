"""OpenID Connect access tokens: the provider's keys found, cached and refreshed (rate
limited), and a real provider's tokens (RS256, ES256, EdDSA) recognised over ``/mcp`` with
their groups, through key rotation; other audiences, issuers, expired and not-yet-valid
tokens refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest

from guaipeca.config import OidcSettings
from guaipeca.errors import AuthError, IdentityProviderError
from guaipeca.server.http import build_app
from guaipeca.server.oidc import OidcVerifier, ProviderKeys
from support.http import LiveServer
from support.identity import whoami, whoami_server
from support.oidc import OidcProvider, key_set, new_key
from support.reliability import make_service

ISSUER = "https://id.example.org/realms/team"
RESOURCE = "https://rag.example.org/mcp"
HS_SECRET = "an-hs256-secret-long-enough-for-the-rfc-0123456789"


# -- the key set, without a network ---------------------------------------------------------
def public(jwk: dict[str, Any]) -> dict[str, Any]:
    private = {"d", "p", "q", "dp", "dq", "qi"}
    return {k: v for k, v in jwk.items() if k not in private}


class FakeProvider:
    """What the key cache fetches: a discovery document and a key set, with a call log."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.calls: list[str] = []
        self.down = False
        self.issuer = ISSUER

    def fetch(self, url: str) -> dict[str, Any]:
        self.calls.append(url)
        if self.down:
            raise IdentityProviderError(f"{url}: connection refused")
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": self.issuer, "jwks_uri": f"{ISSUER}/certs"}
        return {"keys": [public(k) for k in self.keys]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keys_for(provider: FakeProvider, clock: Clock, **settings: Any) -> ProviderKeys:
    oidc = OidcSettings(issuer=ISSUER, resource=RESOURCE, **settings)
    return ProviderKeys(oidc, fetch=provider.fetch, clock=clock)


def test_keys_are_found_through_discovery_and_cached() -> None:
    provider, clock = FakeProvider([new_key("ES256", "a")]), Clock()
    keys = keys_for(provider, clock, jwks_cache_seconds=600)
    assert keys.key("a").key_id == "a"
    assert keys.key("a").key_id == "a"
    assert provider.calls == [f"{ISSUER}/.well-known/openid-configuration", f"{ISSUER}/certs"]
    clock.now += 601  # stale: fetched again
    assert keys.key("a").key_id == "a" and len(provider.calls) == 4


def test_an_unknown_key_refetches_at_most_once_per_interval() -> None:
    provider, clock = FakeProvider([new_key("ES256", "a")]), Clock()
    keys = keys_for(provider, clock, jwks_refresh_seconds=30, jwks_url=f"{ISSUER}/certs")
    keys.key("a")
    provider.keys.append(new_key("EdDSA", "b"))  # the provider rotates
    clock.now += 30
    assert keys.key("b").key_id == "b"
    assert keys.fetches == 2
    for i in range(50):  # made-up key ids: refused without asking the provider again
        with pytest.raises(AuthError, match="invalid token"):
            keys.key(f"forged-{i}")
    assert keys.fetches == 2
    clock.now += 30
    with pytest.raises(AuthError):
        keys.key("forged")
    assert keys.fetches == 3


def test_a_provider_that_is_down_keeps_the_last_keys_or_is_a_provider_error() -> None:
    provider, clock = FakeProvider([new_key("RS256", "a")]), Clock()
    provider.down = True
    keys = keys_for(provider, clock, jwks_refresh_seconds=0)
    with pytest.raises(IdentityProviderError, match="connection refused"):
        keys.key("a")
    provider.down = False
    assert keys.key("a").key_id == "a"
    provider.down = True
    with pytest.raises(AuthError):
        keys.key("b")  # refetch failed: the last keys stay in use
    assert keys.key("a").key_id == "a"


def test_discovery_must_name_the_configured_issuer() -> None:
    provider, clock = FakeProvider([new_key("ES256", "a")]), Clock()
    provider.issuer = "https://evil.example.org"
    with pytest.raises(IdentityProviderError, match=r"not server\.oidc\.issuer"):
        keys_for(provider, clock).key("a")


def test_symmetric_and_encryption_keys_are_never_used() -> None:
    signing = new_key("ES256", "good")
    oct_key = {"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", "kid": "hmac"}
    provider = FakeProvider([signing, {**new_key("RS256", "enc"), "use": "enc"}])
    provider.keys.append(oct_key)
    keys = keys_for(provider, Clock(), jwks_refresh_seconds=1e3)
    assert keys.key("good").key_id == "good"
    for kid in ("hmac", "enc"):
        with pytest.raises(AuthError):
            keys.key(kid)


def test_the_verifier_checks_audience_issuer_and_times() -> None:
    signing = new_key("EdDSA", "k")
    verifier = OidcVerifier(
        OidcSettings(issuer=ISSUER, resource=RESOURCE, clock_skew_seconds=30),
        keys=keys_for(FakeProvider([signing]), Clock()),
    )
    now = int(time.time())

    def check(**claims: Any) -> dict[str, Any]:
        payload = {"iss": ISSUER, "aud": RESOURCE, "sub": "ana", "exp": now + 60, **claims}
        payload = {k: v for k, v in payload.items() if v is not None}
        token = jwt.encode(payload, jwt.PyJWK(signing).key, "EdDSA", headers={"kid": "k"})
        return verifier.verify(token, jwt.get_unverified_header(token))

    assert check()["sub"] == "ana"
    assert check(exp=now - 10)["sub"] == "ana"  # within the clock skew
    assert check(aud=["other", RESOURCE])["sub"] == "ana"
    for claims, message in [
        ({"exp": now - 120}, "token expired"),
        ({"nbf": now + 120}, "not valid yet"),
        ({"aud": "https://other.example.org/mcp"}, "another audience"),
        ({"aud": None}, "invalid token"),
        ({"iss": "https://evil.example.org"}, "invalid token"),
        ({"exp": None}, "invalid token"),
    ]:
        with pytest.raises(AuthError, match=message):
            check(**claims)


def test_oidc_settings_name_their_problems(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="resource"):
        OidcSettings(issuer=ISSUER)
    with pytest.raises(ValueError, match="http"):
        OidcSettings(issuer="id.example.org", resource=RESOURCE)
    with pytest.raises(ValueError):
        OidcSettings(issuer=ISSUER, resource=RESOURCE, algorithms=["HS256"])
    assert OidcSettings(issuer=ISSUER, resource=RESOURCE).accepted_audience == [RESOURCE]


# -- a real provider, a real server -----------------------------------------------------------
@pytest.fixture(scope="module")
def live(provider: OidcProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("oidc-server")
    services = []

    def build(port: int) -> Any:
        oidc = {
            "issuer": provider.issuer,
            "resource": f"http://127.0.0.1:{port}/mcp",
            "jwks_refresh_seconds": 0,  # the rotation test rotates within a second
        }
        services.append(make_service(root, {"oidc": oidc, "jwt_secret": HS_SECRET}, docs=2))
        return build_app(services[0], mcp_server=whoami_server(services[0]), port=port)

    with LiveServer(build) as live:
        yield live
    services[0].index.close()


def resource(live: LiveServer) -> str:
    return f"{live.url}/mcp"


@pytest.mark.parametrize(
    ("client", "groups", "roles"),
    [
        ("alice", ["legal"], []),
        ("bob", ["finance"], ["auditor"]),
        ("carol", ["finance", "legal"], []),
    ],
)
def test_each_client_is_recognised_with_its_claims(
    provider: OidcProvider, live: LiveServer, client: str, groups: list[str], roles: list[str]
) -> None:
    token = provider.token(client, resource(live), scope="read")
    assert whoami(resource(live), token) == {
        "key": f"oidc:{client}",
        "source": "oidc",
        "subject": client,
        "claims": {"group": groups, "role": roles, "scope": ["read"]},
    }


def refused(live: LiveServer, token: str) -> httpx2.Response:
    response = httpx2.get(f"{live.url}/tools", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401, response.text
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    return response


def test_a_token_for_another_audience_is_refused(provider: OidcProvider, live: LiveServer) -> None:
    token = provider.token("alice", "http://127.0.0.1:9/another-mcp-server")
    assert refused(live, token).json() == {"error": "token is for another audience (resource)"}


def test_expired_and_not_yet_valid_tokens_are_refused(
    provider: OidcProvider, live: LiveServer
) -> None:
    now = int(time.time())
    claims = {"sub": "alice", "aud": resource(live)}
    assert whoami(resource(live), provider.sign({**claims, "exp": now + 60}))["key"] == "oidc:alice"
    assert refused(live, provider.sign({**claims, "exp": now - 3600})).json()["error"] == (
        "token expired"
    )
    early = provider.sign({**claims, "exp": now + 7200, "nbf": now + 3600})
    assert refused(live, early).json()["error"] == "token not valid yet"
    other_issuer = provider.sign({**claims, "exp": now + 60, "iss": "http://127.0.0.1:9"})
    refused(live, other_issuer)
    stranger = new_key("ES256", provider.keys[1]["kid"])  # a known key id, another key
    forged = jwt.encode(
        {**claims, "iss": provider.issuer, "exp": now + 60},
        jwt.PyJWK(stranger).key,
        algorithm="ES256",
        headers={"kid": stranger["kid"]},
    )
    refused(live, forged)


def test_hs256_tokens_still_work_beside_the_provider(live: LiveServer) -> None:
    token = jwt.encode({"sub": "openwebui-user", "groups": ["legal"]}, HS_SECRET, "HS256")
    me = whoami(resource(live), token)
    assert (me["key"], me["claims"]["group"]) == ("jwt:openwebui-user", ["legal"])


def test_rotated_keys_work(provider: OidcProvider, live: LiveServer) -> None:
    before = provider.token("alice", resource(live))
    assert whoami(resource(live), before)["key"] == "oidc:alice"
    old = provider.keys
    provider.restart(key_set("2") + old)  # new keys sign, the old ones are still published
    after = provider.token("alice", resource(live))
    assert jwt.get_unverified_header(after)["kid"] == "es256-2"
    assert whoami(resource(live), after)["key"] == "oidc:alice"
    assert whoami(resource(live), before)["key"] == "oidc:alice"
    provider.restart(key_set("3"))  # the old keys retired
    latest = provider.token("bob", resource(live))
    assert whoami(resource(live), latest)["key"] == "oidc:bob"
    refused(live, before)
