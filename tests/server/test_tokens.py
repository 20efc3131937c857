"""Named tokens at rest: hashed, 0600, replaced atomically, re-read when the file changes."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from guaipeca.errors import ConfigError, InvalidArgumentError, NotFoundError
from guaipeca.server.tokens import TOKENS_FILE, TokenFile, digest


def test_add_keeps_only_a_hash_in_a_private_file(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "data")
    secret = tokens.add("alice")
    text = (tmp_path / "data" / TOKENS_FILE).read_text()
    assert secret not in text
    assert secret[8:24] not in text
    assert json.loads(text)["tokens"][0]["sha256"] == digest(secret)
    assert stat.S_IMODE(os.stat(tmp_path / "data" / TOKENS_FILE).st_mode) == 0o600
    assert len(secret) >= 40 and secret != tokens.add("bob")


def test_find_names_the_token_and_nothing_else(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path)
    alice, bob = tokens.add("alice"), tokens.add("bob")
    assert (tokens.find(alice), tokens.find(bob)) == ("alice", "bob")
    assert tokens.find(alice[:-1]) is None
    assert tokens.find(alice + "x") is None
    assert tokens.find("") is None
    assert [t.name for t in tokens.entries()] == ["alice", "bob"]


def test_a_revoked_token_is_refused_by_a_reader_that_saw_it(tmp_path: Path) -> None:
    writer, reader = TokenFile(tmp_path), TokenFile(tmp_path)  # the CLI, the server
    secret = writer.add("alice")
    assert reader.find(secret) == "alice"
    writer.revoke("alice")
    assert reader.find(secret) is None
    again = writer.add("alice")  # same name, same file size: a new secret all the same
    assert reader.find(secret) is None and reader.find(again) == "alice"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "invalid token name"),
        ("two words", "invalid token name"),
        ("-dash", "invalid token name"),
        ("x" * 65, "invalid token name"),
        ("../up", "invalid token name"),
        ("0123456789abcdef", "server.auth_token"),
    ],
)
def test_bad_names_are_refused(tmp_path: Path, name: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        TokenFile(tmp_path).add(name)
    assert not (tmp_path / TOKENS_FILE).exists()


def test_duplicate_and_unknown_names_are_one_line_errors(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path)
    tokens.add("alice")
    with pytest.raises(InvalidArgumentError, match="exists already"):
        tokens.add("alice")
    with pytest.raises(NotFoundError, match="no token named 'bob'"):
        tokens.revoke("bob")
    assert [t.name for t in tokens.entries()] == ["alice"]


def test_a_damaged_file_is_named_and_refuses_every_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = TokenFile(tmp_path)
    secret = tokens.add("alice")
    assert tokens.find(secret) == "alice"
    (tmp_path / TOKENS_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=f"{TOKENS_FILE}: not a token file"):
        tokens.entries()
    with pytest.raises(ConfigError, match="not a token file"):
        tokens.add("bob")
    with caplog.at_level(logging.ERROR, "guaipeca.server"):
        assert tokens.find(secret) is None
    assert "named tokens refused until the file is fixed" in caplog.text


def test_a_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = TokenFile(tmp_path)
    secret = tokens.add("alice")
    os.chmod(tmp_path / TOKENS_FILE, 0o644)
    with caplog.at_level(logging.WARNING, "guaipeca.server"):
        assert tokens.find(secret) == "alice"
    assert "chmod 600" in caplog.text


def test_no_file_means_no_tokens(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "missing")
    assert not tokens.exists()
    assert tokens.entries() == []
    assert tokens.find("anything") is None
