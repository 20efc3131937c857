"""Grants to rights (server/access.py): which identities a grant names, write including
read, ``*``, and the group/role/scope claims of an HS256 JWT."""

from __future__ import annotations

from typing import Any

import jwt

from guaipeca.config import AccessGrant
from guaipeca.server.access import FULL, AccessPolicy, Rights
from guaipeca.server.asgi import Identity
from guaipeca.server.auth import Authenticator
from support.access import GRANTS, JWT_SECRET


def _policy(grants: list[dict[str, Any]] | None) -> AccessPolicy:
    return AccessPolicy(None if grants is None else [AccessGrant(**g) for g in grants])


def _jwt(subject: str, **claims: Any) -> Identity:
    token = jwt.encode({"sub": subject, **claims}, JWT_SECRET, algorithm="HS256")
    return Authenticator(jwt_secret=JWT_SECRET).identify(f"Bearer {token}")


def test_without_an_access_section_everyone_has_every_right() -> None:
    policy = _policy(None)
    assert not policy.enabled
    assert policy.rights_of(None) is FULL and policy.rights_of(_jwt("x")) is FULL


def test_the_team_grants() -> None:
    policy = _policy(GRANTS)
    alice, bob = _jwt("alice", groups=["legal"]), _jwt("bob", groups=["sales"])
    assert policy.rights_of(alice) == Rights(
        frozenset({"contracts", "handbook"}), frozenset({"contracts"})
    )
    assert policy.rights_of(bob) == Rights(frozenset({"handbook"}), frozenset({"handbook"}))
    assert policy.rights_of(None) == Rights(frozenset({"handbook"}), frozenset())


def test_each_kind_of_holder_matches_only_its_own() -> None:
    policy = _policy(
        [
            {"who": {"token": "ci"}, "corpora": ["a"]},
            {"who": {"subject": "ci"}, "corpora": ["b"]},
            {"who": {"role": "auditor"}, "corpora": ["*"]},
            {"who": {"scope": "docs:write"}, "corpora": ["c"], "can": ["write"]},
        ]
    )
    named_token = Identity("token:ci", "token", "ci")
    assert policy.rights_of(named_token).read == frozenset({"a"})
    assert policy.rights_of(_jwt("ci")).read == frozenset({"b"})
    auditor = policy.rights_of(_jwt("x", roles=["auditor"]))
    assert auditor.read is None and auditor.may_read("anything") and not auditor.may_write("a")
    writer = policy.rights_of(_jwt("x", scope="openid docs:write"))
    assert writer.may_write("c") and writer.may_read("c") and not writer.may_read("a")


def test_the_grants_see_the_claims_the_authenticator_proved() -> None:
    assert _jwt("a", groups=["x", "y"], roles=["r"], scope="s t").claims == {
        "group": frozenset({"x", "y"}),
        "role": frozenset({"r"}),
        "scope": frozenset({"s", "t"}),
    }
    policy = _policy([{"who": {"group": "legal"}, "corpora": ["contracts"]}])
    token = Identity("token:x", "token", "x")
    assert policy.rights_of(token).read == frozenset()
