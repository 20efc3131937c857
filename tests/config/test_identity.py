"""The identity settings (server.oidc, server.claims): defaults, and one-line problems that
name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca.config import load_settings
from support.config import config_error, write_config


def test_the_defaults_turn_nothing_on(tmp_path: Path) -> None:
    server = load_settings(None, env={}, cwd=tmp_path).settings.server
    assert server.oidc.issuer is None
    assert server.oidc.accepted_audience == [] and server.oidc.named_servers == []
    assert (server.claims.group, server.claims.role, server.claims.scope) == (
        "groups",
        "roles",
        "scope",
    )


def test_a_provider_defaults_to_its_resource_and_itself(tmp_path: Path) -> None:
    text = "server:\n  oidc:\n    issuer: https://id.example.org\n    resource: https://r/mcp\n"
    oidc = load_settings(write_config(tmp_path, text), env={}).settings.server.oidc
    assert oidc.accepted_audience == ["https://r/mcp"]
    assert oidc.named_servers == ["https://id.example.org"]
    assert list(oidc.algorithms) == ["RS256", "ES256", "EdDSA"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("oidc:\n    issuer: https://id.example.org\n", "server.oidc.resource: is needed with"),
        ("oidc:\n    issuer: id.example.org\n    resource: https://r/mcp\n", "server.oidc.issuer"),
        ("oidc:\n    algorithms: [HS256]\n", "server.oidc.algorithms.0: must be one of"),
        ("oidc:\n    clock_skew_seconds: -1\n", "server.oidc.clock_skew_seconds"),
        ("oidc:\n    isuer: https://id.example.org\n", "server.oidc.isuer"),
        ("claims:\n    group: ''\n", "server.claims.group: must be a claim name"),
        (
            "oidc:\n    issuer: https://i\n    resource: https://r/mcp\n  cors_origins: ['*']\n",
            "server.cors_origins.0: '*' is not allowed",
        ),
    ],
)
def test_problems_name_the_key_and_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write_config(tmp_path, "server:\n  " + text)
    error = config_error(path, env={})
    assert message in error and str(path) in error
