"""Where the server's identities come from, beyond its one token: the JWT claims that carry
groups, roles and scopes (``server.claims``) and an OpenID provider whose signed tokens it
accepts (``server.oidc``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from guaipeca.config.fields import FrozenModel, check_url
from guaipeca.errors import KeyProblems

__all__ = ["ClaimSettings", "OidcSettings"]

#: The asymmetric JWS algorithms an OpenID provider's tokens may use (RFC 7518, RFC 8037).
OidcAlgorithm = Literal["RS256", "ES256", "EdDSA"]
_ALGORITHMS: tuple[OidcAlgorithm, ...] = ("RS256", "ES256", "EdDSA")


def _claim_name(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise ValueError("must be a claim name, e.g. groups or realm_access.roles")
    return value


class ClaimSettings(FrozenModel):
    """The JWT claims (HS256 and OpenID tokens alike) an identity's groups, roles and scopes
    are read from. A name with dots that is not itself a claim is a path into nested
    claims (Keycloak's ``realm_access.roles``)."""

    group: str = Field("groups", description="JWT claim listing the caller's groups")
    role: str = Field("roles", description="JWT claim listing the caller's roles")
    scope: str = Field(
        "scope", description="JWT claim holding the caller's scopes (a space-separated string)"
    )

    _names = field_validator("group", "role", "scope")(_claim_name)


class OidcSettings(FrozenModel):
    """An OpenID Connect provider whose access tokens (RS256, ES256, EdDSA) the server
    accepts, checked against the provider's published keys; off while ``issuer`` is null."""

    issuer: str | None = Field(
        None,
        description="OpenID provider whose tokens are accepted, e.g. https://id.example.org "
        "(null: off)",
    )
    resource: str | None = Field(
        None,
        description="this server's MCP URL, as clients reach it (needed with issuer)",
    )
    audience: list[str] = Field(
        default_factory=list, description="aud values accepted (none: the resource URL only)"
    )
    jwks_url: str | None = Field(
        None, description="the provider's signing keys (null: from its openid-configuration)"
    )
    authorization_servers: list[str] = Field(
        default_factory=list,
        description="authorization servers named to MCP clients (none: the issuer)",
    )
    scopes: list[str] = Field(
        default_factory=list,
        description="scopes MCP clients should ask the provider for (none: the provider's say)",
    )
    algorithms: list[OidcAlgorithm] = Field(
        default_factory=lambda: list(_ALGORITHMS),
        min_length=1,
        description="signature algorithms accepted: RS256, ES256, EdDSA",
    )
    clock_skew_seconds: float = Field(
        60.0, ge=0, le=600, description="leeway on exp and nbf for clocks that disagree"
    )
    jwks_cache_seconds: float = Field(
        3600.0, ge=0, le=86_400, description="how long fetched keys are used before a refetch"
    )
    jwks_refresh_seconds: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="least time between refetches for a token signed by an unknown key",
    )

    _urls = field_validator("issuer", "resource", "jwks_url")(check_url)

    @field_validator("authorization_servers")
    @classmethod
    def _servers(cls, value: list[str]) -> list[str]:
        return [str(check_url(v)) for v in value]

    @model_validator(mode="after")
    def _resource_with_issuer(self) -> OidcSettings:
        if self.issuer is not None and self.resource is None:
            raise KeyProblems(
                [(("resource",), "is needed with server.oidc.issuer: this server's MCP URL")]
            )
        return self

    @property
    def accepted_audience(self) -> list[str]:
        """The ``aud`` values a token must name one of (RFC 8707)."""
        if self.audience:
            return list(self.audience)
        return [self.resource] if self.resource else []

    @property
    def named_servers(self) -> list[str]:
        """The authorization servers the protected resource metadata names."""
        if self.authorization_servers:
            return list(self.authorization_servers)
        return [self.issuer] if self.issuer else []
