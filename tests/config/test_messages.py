"""Configuration problems worded for people (messages.py): one line per problem naming the
key and the file (or the environment variable), and secrets that never show."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca.config import load_settings
from support.config import SECRET, config_error, write_config

# -- errors: one line, key path, file ----------------------------------------------------
ERRORS = [
    ("embedding: {modle: x}", "embedding.modle: unknown key (did you mean 'model'?)"),
    ("search: {top_k: many}", "search.top_k: must be a whole number, got 'many'"),
    ("search: {mode: fuzzy}", "search.mode: must be one of 'hybrid', 'dense' or 'keyword'"),
    ("corpora: [{name: a, path: ., weight: -1}]", "corpora.0.weight: must be >= 0, got -1"),
    ("chunking: {max_size: .inf}", "chunking.max_size: must be a finite number"),
    ("server: {port: 70000}", "server.port: must be <= 65535, got 70000"),
    ("server: [1, 2]", "server: must be a section"),
    ("corpora: [{name: a, path: .}, {name: A, path: .}]", "corpora.1.name: 'A' is already"),
    ("corpora: [{name: 'a b', path: .}]", "corpora.0.name: 'a b' is not a valid name"),
    ("corpora: [{name: 2024, path: .}]", "corpora.0.name: must be text, got 2024 (put it in"),
    ("corpora: [{path: .}]", "corpora.0.name: required key is missing"),
    ("corpora: [{name: a, path: ''}]", "corpora.0.path: must not be empty"),
    ("corpora: [{name: a, path: ., extensions: [.exe]}]", "corpora.0.extensions: unsupported"),
    ("corpora: [{name: a, path: ., language: klingon}]", "corpora.0.language: unknown language"),
    ("corpora: [{name: a, path: ., exclude: [/abs]}]", "corpora.0.exclude: pattern '/abs'"),
    ("corpora: [{name: a, path: .}]\nupload: {allow: [a, b]}", "upload.allow.1: 'b' is not a"),
    ("upload: {allowed_extensions: [exe]}", "upload.allowed_extensions: unsupported"),
    ("storage: {backend: qdrant}", "storage.qdrant: set exactly one of url or path"),
    (
        "storage: {backend: qdrant, qdrant: {url: 'http://q:6333', path: /q}}",
        "storage.qdrant: set exactly one of url or path when backend is qdrant (not both)",
    ),
    ("storage: {qdrant: {url: 'q:6333'}}", "storage.qdrant.url: must be an http:// or https://"),
    (
        "server: {auth_token: tok, cors_origins: ['https://a.org', '*']}",
        "server.cors_origins.1: '*' is not allowed when server.auth_token",
    ),
    ("server: {jwt_secret: k, cors_origins: ['*']}", "server.cors_origins.0: '*' is not allowed"),
    ("server: {cors_origins: ['https://a.org/']}", "server.cors_origins.0: 'https://a.org/' is"),
    ("server: {auth_token: '  '}", "server.auth_token: must not be empty"),
    ("enrich: {url: 'http://localhost:11434/v1'}", "enrich.model: required when enrich.url"),
    ("7: x", "7: unknown key (valid keys: corpora, embedding"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_each_problem_is_one_line_naming_key_and_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write_config(tmp_path, text)
    message = config_error(path, env={}, cwd=tmp_path)
    assert expected in message
    assert f"(in {path})" in message


def test_wildcard_cors_is_fine_without_auth(tmp_path: Path) -> None:
    path = write_config(tmp_path, "server: {cors_origins: ['*']}")
    assert load_settings(path, env={}, cwd=tmp_path).settings.server.cors_origins == ["*"]


def test_wildcard_cors_with_auth_from_env_is_an_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, "server: {cors_origins: ['*']}")
    message = config_error(path, env={"GUAIPECA_AUTH_TOKEN": SECRET}, cwd=tmp_path)
    assert "server.cors_origins.0" in message
    assert SECRET not in message


def test_several_problems_are_joined_on_one_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search: {top_k: 0, mode: x}\nserver: {prot: 1}")
    parts = config_error(path, env={}, cwd=tmp_path).split("; ")
    assert [p.split(":")[0] for p in parts] == ["search.mode", "search.top_k", "server.prot"]
    assert all(p.endswith(f"(in {path})") for p in parts)


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    path = write_config(tmp_path, "corpora: []")
    message = config_error(path, env={"GUAIPECA_PORT": "eighty"})
    assert message == (
        "server.port: must be a whole number, got 'eighty' "
        "(from environment variable GUAIPECA_PORT)"
    )
    message = config_error(path, env={"GUAIPECA_PORT": "0"})
    assert "GUAIPECA_PORT" in message
    assert "must be >= 1" in message


# -- secrets -----------------------------------------------------------------------------
def test_secrets_never_appear_in_reprs(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        f"server: {{auth_token: {SECRET}}}\nenrich: {{api_key: e-{SECRET}}}\ncorpora: []",
    )
    env = {"GUAIPECA_JWT_SECRET": f"j-{SECRET}", "GUAIPECA_QDRANT_API_KEY": f"q-{SECRET}"}
    loaded = load_settings(path, env=env)
    for text in (repr(loaded), str(loaded.settings), loaded.settings.model_dump_json()):
        assert SECRET not in text
    assert "**********" in repr(loaded.settings.server)


@pytest.mark.parametrize(
    "text",
    [
        f"server: {{auth_tokn: {SECRET}}}",  # misspelt key: its value is still a secret
        f"server: {{auth_token: [{SECRET}]}}",
        f"server: {{jwt_secret: {{k: {SECRET}}}}}",
        f"server: {{auth_token: {SECRET}, cors_origins: ['*']}}",
        f"storage: {{qdrant: {{api_key: {SECRET}, nope: 1}}}}",
        SECRET,  # a token pasted into the wrong file
    ],
)
def test_secrets_never_appear_in_error_messages(tmp_path: Path, text: str) -> None:
    message = config_error(write_config(tmp_path, text), env={}, cwd=tmp_path)
    assert SECRET not in message
