"""Who a request is: the Bearer credential of ``Authorization`` checked against each
identity source, and the :class:`~guaipeca.server.asgi.Identity` it proves (§7.4).

Sources, tried in this order:

- ``server.auth_token``: one shared token, compared in constant time; identity
  ``token:<first 16 hex of its SHA-256>``;
- named tokens (``guaipeca token add``, server/tokens.py): identity ``token:<name>``;
- HS256 JWTs signed with ``server.jwt_secret`` (OpenWebUI's): identity ``jwt:<sub or id>``;
- an OpenID provider's RS256/ES256/EdDSA access tokens (``server.oidc``, server/oidc.py):
  identity ``oidc:<sub>``.

A JWT goes to the source its header's ``alg`` belongs to, so an HS256 token is never
checked against a provider's public key (nor the reverse). The groups, roles and scopes of
either kind of JWT are read from the claims ``server.claims`` names.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import jwt

from guaipeca.config import ClaimSettings, ServerSettings
from guaipeca.errors import AuthError
from guaipeca.server.asgi import Identity
from guaipeca.server.oidc import OidcVerifier
from guaipeca.server.resource import ProtectedResource
from guaipeca.server.tokens import TokenFile

__all__ = ["Authenticator", "read_claims"]

log = logging.getLogger("guaipeca.server")

#: HS256 keys shorter than this are weak (RFC 7518 §3.2); PyJWT warns on every decode.
_MIN_HMAC_KEY_BYTES: Final = 32
_MAX_IDENTITY_CHARS: Final = 128
_MAX_CLAIM_VALUES: Final = 256
_MAX_CLAIM_CHARS: Final = 256


def _claim(claims: Mapping[str, Any], name: str) -> object:
    """The claim ``name``, or, when there is none and the name has dots, the nested value
    that path leads to (``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    value: object = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _values(value: object, *, split: bool) -> frozenset[str]:
    """A claim as a set of strings: a list's strings, or a string (split on spaces for
    scopes, whole otherwise). Anything else, and anything past the size caps, is dropped."""
    if isinstance(value, str):
        items: list[object] = list(value.split()) if split else [value]
    elif isinstance(value, list):
        items = value
    else:
        return frozenset()
    return frozenset(
        item
        for item in items[:_MAX_CLAIM_VALUES]
        if isinstance(item, str) and item and len(item) <= _MAX_CLAIM_CHARS
    )


def read_claims(claims: Mapping[str, Any], names: ClaimSettings) -> dict[str, frozenset[str]]:
    """The groups, roles and scopes a JWT's ``claims`` carry, under the configured names."""
    return {
        "group": _values(_claim(claims, names.group), split=False),
        "role": _values(_claim(claims, names.role), split=False),
        "scope": _values(_claim(claims, names.scope), split=True),
    }


def _subject(claims: Mapping[str, Any], *fields: str) -> str | None:
    for name in fields:
        value = claims.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)[:_MAX_IDENTITY_CHARS]
    return None


class Authenticator:
    """Checks ``Authorization: Bearer <credential>`` against the configured sources (see
    the module docstring) and returns the :class:`Identity` it proves.

    HS256 JWTs: ``exp``/``nbf``/``iat`` are enforced when present (OpenWebUI issues tokens
    without ``exp`` unless told to). Any algorithm no source accepts, ``none`` included, is
    refused.
    """

    def __init__(
        self,
        token: str | None = None,
        jwt_secret: str | None = None,
        *,
        tokens: TokenFile | None = None,
        oidc: OidcVerifier | None = None,
        claims: ClaimSettings | None = None,
        resource_metadata: str | None = None,
    ) -> None:
        self._token = token.encode("utf-8") if token else None
        self._jwt_secret = jwt_secret.encode("utf-8") if jwt_secret else None
        self.tokens = tokens
        # Named tokens turn auth on when their file exists at start; once on, tokens added
        # later work at once.
        self._named_on = tokens is not None and tokens.exists()
        self.oidc = oidc
        self.claims = claims or ClaimSettings()
        #: Where a 401 sends MCP clients for the protected resource metadata (RFC 9728).
        self.resource_metadata = resource_metadata
        self._short_secret = (
            self._jwt_secret is not None and len(self._jwt_secret) < _MIN_HMAC_KEY_BYTES
        )
        if self._short_secret:
            log.warning(
                "server.jwt_secret is shorter than %d bytes: such JWTs are easy to forge; "
                "use a longer secret",
                _MIN_HMAC_KEY_BYTES,
            )

    @classmethod
    def from_settings(cls, settings: ServerSettings, data_dir: Path | None = None) -> Authenticator:
        """The sources ``settings`` configure, plus the named tokens of ``data_dir`` (when
        their file exists at start, auth is on, even while it lists no token)."""
        token = settings.auth_token.get_secret_value() if settings.auth_token else None
        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        return cls(
            token,
            secret,
            tokens=TokenFile(data_dir) if data_dir is not None else None,
            oidc=OidcVerifier(settings.oidc) if settings.oidc.issuer else None,
            claims=settings.claims,
            resource_metadata=ProtectedResource(settings.oidc).metadata_url,
        )

    @property
    def enabled(self) -> bool:
        """False when no source is configured: no auth at all."""
        sources = (self._token, self._jwt_secret, self.oidc)
        return self._named_on or any(s is not None for s in sources)

    def challenge(self, error: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of a 401: Bearer, the RFC 6750 ``error`` when a
        credential was sent, and where the resource metadata is (RFC 9728 §5.1)."""
        value = 'Bearer realm="guaipeca"'
        if error:
            value += f', error="{error}"'
        if self.resource_metadata:
            value += f', resource_metadata="{self.resource_metadata}"'
        return value

    @property
    def may_block(self) -> bool:
        """True when checking a credential may wait on the network (the provider's keys):
        the caller should do it in a worker thread."""
        return self.oidc is not None

    def authenticate(self, authorization: str | None) -> str:
        """The caller's identity key (see :meth:`identify`).

        Raises:
            AuthError: as :meth:`identify`.
            IdentityProviderError: as :meth:`identify`.
        """
        return self.identify(authorization).key

    def identify(self, authorization: str | None) -> Identity:
        """The identity an ``Authorization`` header value proves.

        Raises:
            AuthError: no Bearer credential, or one no source accepts.
            IdentityProviderError: an OpenID token came while its provider's keys cannot
                be fetched.
        """
        if not authorization:
            raise AuthError("missing bearer token")
        scheme, _, credential = authorization.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise AuthError("missing bearer token")
        raw = credential.encode("utf-8", "surrogateescape")
        if self._token is not None and hmac.compare_digest(raw, self._token):
            key = f"token:{hashlib.sha256(raw).hexdigest()[:16]}"
            return Identity(key, "token", key.partition(":")[2])
        if self.tokens is not None and (name := self.tokens.find(credential)) is not None:
            return Identity(f"token:{name}", "token", name)
        if credential.count(".") == 2 and (self._jwt_secret is not None or self.oidc):
            return self._jwt_identity(credential, raw)
        raise AuthError("invalid token")

    def _jwt_identity(self, credential: str, raw: bytes) -> Identity:
        try:
            header = jwt.get_unverified_header(credential)
        except jwt.PyJWTError:
            raise AuthError("invalid token") from None
        alg = header.get("alg")
        if alg == "HS256" and self._jwt_secret is not None:
            claims = self._hs256_claims(credential)
            subject = _subject(claims, "sub", "id")
            key = f"jwt:{subject}" if subject else f"jwt:#{hashlib.sha256(raw).hexdigest()[:16]}"
            return Identity(key, "jwt", subject, read_claims(claims, self.claims))
        if self.oidc is not None and alg in self.oidc.algorithms:
            claims = self.oidc.verify(credential, header)
            subject = _subject(claims, "sub", "client_id", "azp")
            if subject is None:
                raise AuthError("token names no subject")
            return Identity(f"oidc:{subject}", "oidc", subject, read_claims(claims, self.claims))
        raise AuthError("invalid token")

    def _hs256_claims(self, credential: str) -> dict[str, Any]:
        assert self._jwt_secret is not None
        try:
            if self._short_secret:  # logged once at start-up, not on every request
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
                    return jwt.decode(credential, self._jwt_secret, algorithms=["HS256"])
            return jwt.decode(credential, self._jwt_secret, algorithms=["HS256"])
        except jwt.ExpiredSignatureError:
            raise AuthError("token expired") from None
        except jwt.PyJWTError:
            raise AuthError("invalid token") from None
