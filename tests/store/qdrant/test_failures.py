"""A Qdrant server that is down: one clear error after retries, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.config import QdrantSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import BackendUnavailableError
from guaipeca.store.qdrant.backend import QdrantBackend


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def test_a_server_that_is_down_gives_one_clear_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    backend = QdrantBackend.from_settings(QdrantSettings(url=url, timeout=1))
    index = Index(embedder=HashingEmbedder(16), backend=backend)  # opens: a server may start later
    with pytest.raises(BackendUnavailableError) as info:
        index.add_documents({"a": "text"})
    message = str(info.value)
    assert message.startswith(f"Qdrant at {url} is not answering") and "\n" not in message
    assert index.backend_error is not None and "is not answering" in index.backend_error
    with pytest.raises(BackendUnavailableError):
        backend.check()
    index.close()


@pytest.mark.slow
def test_the_cli_reports_a_down_server_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "guaipeca.yaml"
    (tmp_path / "docs").mkdir()
    config.write_text(
        "corpora: [{name: docs, path: docs}]\n"
        f"storage: {{backend: qdrant, qdrant: {{url: 'http://127.0.0.1:{_closed_port()}', "
        "timeout: 1}}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "guaipeca.cli", "--config", str(config), "search", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert "is not answering" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
