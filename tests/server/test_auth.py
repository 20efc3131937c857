"""Who a request is: each identity source (the shared token, named tokens, HS256 JWTs) and
the groups, roles and scopes read from JWT claims, checked alone and over a live ``/mcp``."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest

from guaipeca.config import ClaimSettings
from guaipeca.errors import AuthError
from guaipeca.server import Service
from guaipeca.server.asgi import Identity
from guaipeca.server.auth import Authenticator, read_claims
from guaipeca.server.http import build_app
from guaipeca.server.tokens import TokenFile
from support.http import LiveServer
from support.identity import whoami, whoami_server
from support.reliability import make_service

TOKEN = "the-shared-token-0123456789"
SECRET = "an-hs256-secret-long-enough-for-the-rfc-0123456789"


def hs256(claims: dict[str, Any]) -> str:
    return jwt.encode(claims, SECRET, algorithm="HS256")


# -- claims --------------------------------------------------------------------------------
def test_claims_are_read_under_the_configured_names() -> None:
    claims = {
        "groups": ["legal", "finance", 7, ""],
        "roles": "editor",
        "scope": "read  write",
        "realm_access": {"roles": ["admin"]},
        "https://example.org/groups": ["auth0-group"],
    }
    assert read_claims(claims, ClaimSettings()) == {
        "group": frozenset({"legal", "finance"}),
        "role": frozenset({"editor"}),
        "scope": frozenset({"read", "write"}),
    }
    keycloak = ClaimSettings(role="realm_access.roles", scope="scp")
    assert read_claims(claims, keycloak)["role"] == {"admin"}
    assert read_claims(claims, keycloak)["scope"] == frozenset()
    auth0 = ClaimSettings(group="https://example.org/groups")  # a claim whose name has dots
    assert read_claims(claims, auth0)["group"] == {"auth0-group"}
    assert read_claims({"scp": ["a", "b"]}, keycloak)["scope"] == {"a", "b"}


def test_claims_of_the_wrong_shape_or_size_are_dropped() -> None:
    names = ClaimSettings()
    assert read_claims({"groups": {"x": 1}, "roles": 3, "scope": None}, names) == {
        "group": frozenset(),
        "role": frozenset(),
        "scope": frozenset(),
    }
    many = read_claims({"groups": [f"g{i}" for i in range(1000)] + ["x" * 1000]}, names)
    assert len(many["group"]) == 256


def test_claim_names_are_checked() -> None:
    with pytest.raises(ValueError, match="claim name"):
        ClaimSettings(group=" groups")


# -- sources -------------------------------------------------------------------------------
@pytest.fixture
def auth(tmp_path: Path) -> Authenticator:
    return Authenticator(TOKEN, SECRET, tokens=TokenFile(tmp_path))


def test_each_source_proves_its_identity(auth: Authenticator, tmp_path: Path) -> None:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
    assert auth.identify(f"Bearer {TOKEN}") == Identity(f"token:{digest}", "token", digest)
    secret = TokenFile(tmp_path).add("ci-bot")
    assert auth.identify(f"Bearer {secret}") == Identity("token:ci-bot", "token", "ci-bot")
    token = hs256({"sub": "ana", "groups": ["legal"], "roles": ["editor"], "scope": "read"})
    assert auth.identify(f"Bearer {token}") == Identity(
        "jwt:ana",
        "jwt",
        "ana",
        {"group": frozenset({"legal"}), "role": frozenset({"editor"}), "scope": {"read"}},
    )
    openwebui = auth.identify(f"Bearer {hs256({'id': 'u-7', 'role': 'user'})}")
    assert (openwebui.key, openwebui.subject) == ("jwt:u-7", "u-7")


def test_a_named_token_works_once_added_and_not_once_revoked(
    auth: Authenticator, tmp_path: Path
) -> None:
    cli = TokenFile(tmp_path)
    with pytest.raises(AuthError):
        auth.identify("Bearer gpq_not-a-token")
    secret = cli.add("alice")
    assert auth.authenticate(f"Bearer {secret}") == "token:alice"
    cli.revoke("alice")
    with pytest.raises(AuthError, match="invalid token"):
        auth.identify(f"Bearer {secret}")


def test_a_jwt_goes_only_to_the_source_of_its_algorithm(tmp_path: Path) -> None:
    hs_only = Authenticator(None, SECRET)
    rs = jwt.encode({"sub": "x"}, SECRET, algorithm="HS384")
    with pytest.raises(AuthError, match="invalid token"):
        hs_only.identify(f"Bearer {rs}")
    no_secret = Authenticator(TOKEN, None)
    with pytest.raises(AuthError, match="invalid token"):
        no_secret.identify(f"Bearer {hs256({'sub': 'x'})}")


def test_a_token_file_turns_auth_on_only_when_it_exists(tmp_path: Path) -> None:
    assert not Authenticator(tokens=TokenFile(tmp_path)).enabled
    TokenFile(tmp_path).add("alice")
    assert Authenticator(tokens=TokenFile(tmp_path)).enabled


def test_the_challenge_names_the_resource_metadata() -> None:
    plain = Authenticator(TOKEN)
    assert plain.challenge() == 'Bearer realm="guaipeca"'
    meta = "https://rag.example.org/.well-known/oauth-protected-resource/mcp"
    oauth = Authenticator(TOKEN, resource_metadata=meta)
    assert oauth.challenge("invalid_token") == (
        f'Bearer realm="guaipeca", error="invalid_token", resource_metadata="{meta}"'
    )


# -- over /mcp -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("auth")
    service = make_service(root, {"auth_token": TOKEN, "jwt_secret": SECRET}, docs=2)
    yield service
    service.index.close()


@pytest.fixture(scope="module")
def live(service: Service) -> Iterator[LiveServer]:
    app = lambda port: build_app(service, mcp_server=whoami_server(service), port=port)  # noqa: E731
    with LiveServer(app) as live:
        yield live


def test_every_source_reaches_the_tools_as_its_identity(live: LiveServer, service: Service) -> None:
    url = f"{live.url}/mcp"
    named = TokenFile(service.loaded.data_dir).add("reporting")
    assert whoami(url, named)["key"] == "token:reporting"
    assert whoami(url, TOKEN)["source"] == "token"
    token = hs256({"sub": "ana", "groups": ["legal"], "exp": int(time.time()) + 60})
    assert whoami(url, token) == {
        "key": "jwt:ana",
        "source": "jwt",
        "subject": "ana",
        "claims": {"group": ["legal"], "role": [], "scope": []},
    }
    TokenFile(service.loaded.data_dir).revoke("reporting")
    response = httpx2.get(f"{live.url}/tools", headers={"Authorization": f"Bearer {named}"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer realm="guaipeca", error="invalid_token"'
    )
