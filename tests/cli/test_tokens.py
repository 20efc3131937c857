"""``guaipeca token add | list | revoke`` through the real command line, against a real server
sharing the data folder: each token is its own identity, a revoked one is refused at once."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx2
import pytest

from guaipeca.cli import EXIT_OK, EXIT_USER, main
from guaipeca.server.http import build_app
from support.http import LiveServer
from support.identity import whoami, whoami_server
from support.reliability import make_service


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "guaipeca.yaml"
    path.write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n", encoding="utf-8")
    return path


def test_add_prints_the_secret_once_and_list_shows_names_only(
    capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path
) -> None:
    code, secret, note = run(capsys, "--config", str(config), "token", "add", "alice")
    assert code == EXIT_OK
    secret = secret.strip()
    assert secret.startswith("gpq_") and len(secret) > 40
    assert "shown only now" in note
    code, listed, _ = run(capsys, "--config", str(config), "token", "list")
    assert code == EXIT_OK and listed.startswith("alice  created 20") and secret not in listed
    code, as_json, _ = run(capsys, "--config", str(config), "token", "list", "--json")
    assert [row["name"] for row in json.loads(as_json)] == ["alice"]
    stored = tmp_path / "data" / "tokens.json"
    assert secret not in stored.read_text()
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("token", "add", "no spaces"), "error: invalid token name 'no spaces'"),
        (("token", "revoke", "nobody"), "error: no token named 'nobody'"),
    ],
)
def test_bad_requests_are_one_line_user_errors(
    capsys: pytest.CaptureFixture[str], config: Path, args: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, "--config", str(config), *args)
    assert (code, out) == (EXIT_USER, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_named_tokens_are_identities_of_the_real_server_until_revoked(
    capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path
) -> None:
    secrets = {}
    for name in ("alice", "bob"):
        code, out, _ = run(capsys, "--config", str(config), "token", "add", name)
        assert code == EXIT_OK
        secrets[name] = out.strip()
    service = make_service(tmp_path, docs=2)  # the same data folder as the config's
    try:
        app = lambda port: build_app(service, mcp_server=whoami_server(service), port=port)  # noqa: E731
        with LiveServer(app) as live:
            assert httpx2.get(f"{live.url}/tools").status_code == 401  # the file turned auth on
            for name, secret in secrets.items():
                me = whoami(f"{live.url}/mcp", secret)
                assert (me["key"], me["source"], me["subject"]) == (f"token:{name}", "token", name)
            assert run(capsys, "--config", str(config), "token", "revoke", "alice")[0] == EXIT_OK
            refused = httpx2.get(
                f"{live.url}/tools", headers={"Authorization": f"Bearer {secrets['alice']}"}
            )
            assert refused.status_code == 401
            assert refused.json() == {"error": "invalid token"}
            assert whoami(f"{live.url}/mcp", secrets["bob"])["key"] == "token:bob"
    finally:
        service.index.close()
