"""Grants to rights (server/access.py): which identities a grant names, write including
read, ``*``, and the group/role/scope claims of an HS256 JWT."""

from __future__ import annotations

from typing import Any

import jwt

from guaipeca.config import AccessGrant
from guaipeca.server.access import FULL, AccessPolicy, Rights, hs256_claims
from guaipeca.server.asgi import Identity
from support.access import GRANTS, JWT_SECRET, person


def _policy(grants: list[dict[str, Any]] | None) -> AccessPolicy:
    return AccessPolicy(None if grants is None else [AccessGrant(**g) for g in grants])


def _jwt(subject: str, **claims: Any) -> Identity:
    token = jwt.encode({"sub": subject, **claims}, JWT_SECRET, algorithm="HS256")
    return hs256_claims(
        Identity(f"jwt:{subject}", "jwt", subject), f"Bearer {token}", JWT_SECRET.encode()
    )


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


def test_claims_are_read_only_from_a_jwt_that_verifies() -> None:
    assert _jwt("a", groups=["x", "y"], role="r", scp=["s"]).claims == {
        "group": frozenset({"x", "y"}),
        "role": frozenset({"r"}),
        "scope": frozenset({"s"}),
    }
    forged = jwt.encode({"sub": "a", "groups": ["legal"]}, "another-secret-0123456789abcdef01")
    who = Identity("jwt:a", "jwt", "a")
    assert hs256_claims(who, f"Bearer {forged}", JWT_SECRET.encode()) is who
    token = Identity("token:x", "token", "x")
    assert hs256_claims(token, f"Bearer {person('a', 'legal')}", JWT_SECRET.encode()) is token
