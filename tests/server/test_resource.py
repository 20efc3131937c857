"""MCP authorization: the Protected Resource Metadata (RFC 9728) names the provider, a 401
points to it, and the official SDK's OAuth client (client credentials, no person) finds the
provider from the server alone, gets a token for this resource and calls tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from guaipeca.config import OidcSettings
from guaipeca.server.http import build_app
from guaipeca.server.resource import METADATA_PATH, ProtectedResource
from support.http import LiveServer
from support.identity import call_whoami, whoami_server
from support.oidc import CLIENTS, OidcProvider
from support.reliability import make_service


def test_the_metadata_url_follows_rfc_9728() -> None:
    off = ProtectedResource(OidcSettings())
    assert (off.enabled, off.paths, off.metadata_url) == (False, (), None)
    settings = OidcSettings(issuer="https://id.example.org", resource="https://rag.example.org/mcp")
    on = ProtectedResource(settings)
    assert on.paths == (METADATA_PATH, f"{METADATA_PATH}/mcp")
    assert on.metadata_url == f"https://rag.example.org{METADATA_PATH}/mcp"
    assert on.document()["authorization_servers"] == ["https://id.example.org"]
    root = ProtectedResource(
        OidcSettings(
            issuer="https://id.example.org",
            resource="https://rag.example.org",
            authorization_servers=["https://a.example.org", "https://b.example.org"],
        )
    )
    assert root.paths == (METADATA_PATH,)
    assert root.metadata_url == f"https://rag.example.org{METADATA_PATH}"
    assert root.document()["authorization_servers"] == [
        "https://a.example.org",
        "https://b.example.org",
    ]


@pytest.fixture(scope="module")
def live(provider: OidcProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("resource")
    services = []

    def build(port: int) -> Any:
        oidc = {
            "issuer": provider.issuer,
            "resource": f"http://127.0.0.1:{port}/mcp",
            "scopes": ["read"],
        }
        services.append(make_service(root, {"oidc": oidc}, docs=2))
        return build_app(services[0], mcp_server=whoami_server(services[0]), port=port)

    with LiveServer(build) as live:
        yield live
    services[0].index.close()


def test_the_metadata_is_public_and_names_the_provider(
    provider: OidcProvider, live: LiveServer
) -> None:
    for path in (METADATA_PATH, f"{METADATA_PATH}/mcp"):
        response = httpx2.get(f"{live.url}{path}")
        assert response.status_code == 200, path
        assert response.json() == {
            "resource": f"{live.url}/mcp",
            "authorization_servers": [provider.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "Guaipeca",
            "scopes_supported": ["read"],
        }


def test_a_401_points_to_the_metadata(live: LiveServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx2.post(f"{live.url}/mcp", json={}, headers=headers)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert f'resource_metadata="{live.url}{METADATA_PATH}/mcp"' in challenge


class MemoryStorage:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_sdk_oauth_client_discovers_the_provider_and_calls_tools(
    provider: OidcProvider, live: LiveServer
) -> None:
    url = f"{live.url}/mcp"
    bob = CLIENTS["bob"]

    async def main() -> tuple[dict[str, Any], list[str], OAuthToken | None]:
        storage = MemoryStorage()
        oauth = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=bob.client_id,
            client_secret=bob.secret,
            issuer=provider.issuer,
        )
        async with httpx2.AsyncClient(auth=oauth, timeout=30) as client:
            me = await call_whoami(url, client)
            async with Client(streamable_http_client(url, http_client=client)) as mcp:
                found = await mcp.call_tool("search", {"query": "document", "top_k": 2})
                assert not found.is_error, found.content
                assert found.structured_content is not None
                hits = [h["doc_id"] for h in found.structured_content["hits"]]
        return me, hits, storage.tokens

    me, hits, token = anyio.run(main)
    assert me["key"] == "oidc:bob"
    assert me["claims"] == {"group": ["finance"], "role": ["auditor"], "scope": ["read"]}
    assert hits
    assert token is not None
    response = httpx2.get(
        f"{live.url}/tools", headers={"Authorization": f"Bearer {token.access_token}"}
    )
    assert response.status_code == 200
