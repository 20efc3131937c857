"""A real OpenID provider for the identity tests: panva/oidc-provider (npm, pinned in this
folder's package-lock.json, installed by ``npm ci`` in scripts/setup and .ci/run, never at
test time) run by node on 127.0.0.1 (provider.mjs).

It knows three clients (client credentials grant, no person), each in its own groups and
signing with its own algorithm, and issues JWT access tokens for whatever resource
(audience, RFC 8707) a client asks for. The test holds the private keys, so it can restart
the provider with a rotated key set, and sign tokens the provider would never issue
(expired, not yet valid) with a key the provider publishes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from support.reliability import wait_for_line

HERE = Path(__file__).resolve().parent
NODE = shutil.which("node")


def _node_version() -> tuple[int, ...]:
    if not NODE:
        return ()
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=False)
    return tuple(int(p) for p in out.stdout.strip().lstrip("v").split(".") if p.isdigit())


def require_provider() -> None:
    """Skip the calling test without node 20.19+ or the npm packages (fail under CI)."""
    if _node_version() >= (20, 19) and (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI: node 20.19+ and `npm ci` in tests/support/oidc are needed")
    pytest.skip("no node 20.19+ or no oidc-provider (npm ci in tests/support/oidc)")


@dataclass(frozen=True)
class Client:
    client_id: str
    secret: str
    alg: str
    claims: dict[str, Any] = field(default_factory=dict)


#: Two people's clients in two groups, and a third client in both (each its own algorithm).
CLIENTS = {
    "alice": Client("alice", "alice-secret-0123456789", "ES256", {"groups": ["legal"]}),
    "bob": Client(
        "bob", "bob-secret-0123456789", "EdDSA", {"groups": ["finance"], "roles": ["auditor"]}
    ),
    "carol": Client("carol", "carol-secret-0123456789", "RS256", {"groups": ["legal", "finance"]}),
}


def new_key(alg: str, kid: str) -> dict[str, Any]:
    """A fresh private JWK for ``alg`` (RS256, ES256 or EdDSA)."""
    if alg == "RS256":
        jwk = RSAAlgorithm.to_jwk(rsa.generate_private_key(65537, 2048), as_dict=True)
    elif alg == "ES256":
        jwk = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()), as_dict=True)
    else:
        jwk = OKPAlgorithm.to_jwk(ed25519.Ed25519PrivateKey.generate(), as_dict=True)
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


def key_set(suffix: str) -> list[dict[str, Any]]:
    """One new key per algorithm, their ids ending in ``suffix``."""
    return [new_key(alg, f"{alg.lower()}-{suffix}") for alg in ("RS256", "ES256", "EdDSA")]


class OidcProvider:
    """oidc-provider on 127.0.0.1 (a fresh port at the first start, the same one after)."""

    def __init__(self, folder: Path, keys: list[dict[str, Any]] | None = None) -> None:
        self.folder = folder
        self.keys = keys or key_set("1")
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OidcProvider:
        config = self.folder / "oidc.json"
        clients = [
            {"client_id": c.client_id, "client_secret": c.secret, "alg": c.alg, "claims": c.claims}
            for c in CLIENTS.values()
        ]
        config.write_text(json.dumps({"port": self.port, "keys": self.keys, "clients": clients}))
        with (self.folder / "oidc.log").open("a") as log:
            self.proc = subprocess.Popen(
                [str(NODE), str(HERE / "provider.mjs"), str(config)],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=HERE,
            )
        self.port = int(wait_for_line(self.proc, "listening ", 60).split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                self.proc.wait(30)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        self.proc = None

    def restart(self, keys: list[dict[str, Any]]) -> None:
        """Stop, then start again on the same port publishing ``keys`` (the first key of an
        algorithm signs)."""
        self.stop()
        self.keys = keys
        self.start()

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def token(self, client: str, resource: str, scope: str | None = None) -> str:
        """An access token for ``client`` (client credentials) to use at ``resource``."""
        c = CLIENTS[client]
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            data["scope"] = scope
        response = httpx2.post(
            f"{self.issuer}/token", data=data, auth=(c.client_id, c.secret), timeout=30
        )
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    def sign(self, claims: dict[str, Any], alg: str = "ES256") -> str:
        """A token signed with the provider's current ``alg`` key (``iss`` added)."""
        jwk = next(k for k in self.keys if k["alg"] == alg)
        key = jwt.PyJWK(jwk).key
        payload = {"iss": self.issuer, **claims}
        return jwt.encode(payload, key, algorithm=alg, headers={"kid": jwk["kid"]})
