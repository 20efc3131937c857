"""Access tokens of an OpenID Connect provider (``server.oidc``): RS256, ES256 and EdDSA
JWTs checked by PyJWT against the provider's published keys (its JWKS).

The keys are found through ``<issuer>/.well-known/openid-configuration`` (or
``server.oidc.jwks_url``), fetched on first use, kept for ``jwks_cache_seconds`` and fetched
again early when a token names a key not among them (the provider rotated its keys), at
most once per ``jwks_refresh_seconds``: a stream of made-up key ids cannot make the server
hammer the provider. ``iss``, ``aud`` (RFC 8707: this server's resource), ``exp`` and
``nbf`` are checked with ``clock_skew_seconds`` of leeway.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx
import jwt

from guaipeca.config import OidcSettings
from guaipeca.errors import AuthError, IdentityProviderError

__all__ = ["OidcVerifier", "ProviderKeys"]

log = logging.getLogger("guaipeca.server")

_DISCOVERY: Final = "/.well-known/openid-configuration"
_MAX_DOCUMENT_BYTES: Final = 1024 * 1024
_FETCH_TIMEOUT_SECONDS: Final = 10.0


def _get_json(url: str) -> dict[str, Any]:
    """A JSON object from ``url`` (no redirects, at most 1 MiB).

    Raises:
        IdentityProviderError: it cannot be fetched or is not a JSON object.
    """
    try:
        with (
            httpx.Client(timeout=_FETCH_TIMEOUT_SECONDS, follow_redirects=False) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            response.raise_for_status()
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _MAX_DOCUMENT_BYTES:
                    raise ValueError("larger than 1 MiB")
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except (httpx.HTTPError, ValueError) as exc:
        raise IdentityProviderError(f"{url}: {exc}") from None


class ProviderKeys:
    """The provider's signing keys by key id, fetched and refreshed as the module says.

    Thread-safe (the server checks tokens in worker threads: a fetch blocks). ``fetch``
    and ``clock`` are the network and the time, replaceable in tests.
    """

    def __init__(
        self,
        settings: OidcSettings,
        *,
        fetch: Callable[[str], dict[str, Any]] = _get_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, jwt.PyJWK] | None = None
        self._fetched = 0.0
        self._attempted: float | None = None
        self.fetches = 0  # JWKS fetches tried, for the log and the tests

    def jwks_url(self) -> str:
        """``jwks_url``, else the ``jwks_uri`` of the issuer's discovery document.

        Raises:
            IdentityProviderError: the document cannot be fetched, names another issuer
                or no ``jwks_uri``.
        """
        if self.settings.jwks_url:
            return self.settings.jwks_url
        issuer = str(self.settings.issuer)
        document = self._fetch(issuer.rstrip("/") + _DISCOVERY)
        if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
            raise IdentityProviderError(
                f"{issuer}{_DISCOVERY} names issuer {str(document.get('issuer'))[:200]!r}, "
                "not server.oidc.issuer"
            )
        uri = document.get("jwks_uri")
        if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
            raise IdentityProviderError(f"{issuer}{_DISCOVERY} names no jwks_uri")
        return uri

    def _load(self) -> dict[str, jwt.PyJWK]:
        """Fetch the key set: signing keys PyJWT can use, by key id ("" for none).

        Raises:
            IdentityProviderError: it cannot be fetched, or holds no usable signing key.
        """
        url = self.jwks_url()
        data = self._fetch(url)
        keys = data.get("keys")
        if not isinstance(keys, list):
            raise IdentityProviderError(f"{url}: not a JSON Web Key Set")
        # Signing keys only; a symmetric key has no place in a public set (and would make
        # PyJWT read it as an HS256 key).
        signing = [
            k
            for k in keys
            if isinstance(k, dict) and k.get("use", "sig") == "sig" and k.get("kty") != "oct"
        ]
        try:
            found = jwt.PyJWKSet.from_dict({"keys": signing}).keys
        except jwt.PyJWTError as exc:
            raise IdentityProviderError(f"{url}: no usable signing key ({exc})") from None
        return {str(k.key_id or ""): k for k in found}

    def _refresh(self, now: float) -> None:
        self._attempted = now
        self.fetches += 1
        try:
            self._keys = self._load()
        except IdentityProviderError as exc:
            if self._keys is None:
                raise
            log.warning("keeping the OpenID provider's last keys: %s", exc)
            return
        self._fetched = now
        log.info("fetched the OpenID provider's keys: %s", ", ".join(sorted(self._keys)))

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        keys = self._keys or {}
        if kid is None:  # a provider with one key may leave the id out
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The key with id ``kid`` (None: the only key), fetching the set when it is stale
        or lacks that key, within the refresh rate limit.

        Raises:
            AuthError: no such key, even after a refresh.
            IdentityProviderError: the keys were never fetched and cannot be now.
        """
        with self._lock:
            now = self._clock()
            may_fetch = (
                self._attempted is None
                or now - self._attempted >= self.settings.jwks_refresh_seconds
            )
            stale = self._keys is None or now - self._fetched >= self.settings.jwks_cache_seconds
            if stale and may_fetch:
                self._refresh(now)
                may_fetch = False
            if self._keys is None:
                raise IdentityProviderError("the OpenID provider's keys are not available yet")
            found = self._lookup(kid)
            if found is None and may_fetch:  # a rotated key: fetch the set again
                self._refresh(now)
                found = self._lookup(kid)
            if found is None:
                raise AuthError("invalid token")
            return found


class OidcVerifier:
    """Checks one provider's access tokens; :meth:`verify` returns their claims."""

    def __init__(self, settings: OidcSettings, keys: ProviderKeys | None = None) -> None:
        self.settings = settings
        self.keys = keys or ProviderKeys(settings)

    @property
    def algorithms(self) -> frozenset[str]:
        return frozenset(self.settings.algorithms)

    def verify(self, credential: str, header: Mapping[str, Any]) -> dict[str, Any]:
        """The claims of ``credential`` (whose unverified JOSE header is ``header``).

        Raises:
            AuthError: a bad signature or key, another issuer or audience, expired, not yet
                valid, or ``exp``/``iss``/``aud`` missing.
            IdentityProviderError: the provider's keys cannot be fetched now.
        """
        kid = header.get("kid")
        key = self.keys.key(kid if isinstance(kid, str) else None)
        s = self.settings
        try:
            claims: dict[str, Any] = jwt.decode(
                credential,
                key,
                algorithms=list(s.algorithms),
                audience=s.accepted_audience,
                issuer=s.issuer,
                leeway=s.clock_skew_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthError("token expired") from None
        except jwt.ImmatureSignatureError:
            raise AuthError("token not valid yet") from None
        except jwt.InvalidAudienceError:
            raise AuthError("token is for another audience (resource)") from None
        except jwt.PyJWTError:
            raise AuthError("invalid token") from None
        return claims
