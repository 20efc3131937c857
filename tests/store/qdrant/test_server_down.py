"""The MCP/HTTP server with a Qdrant server that is down: it starts, and `status` and
`/health` keep answering, reporting the backend as down (a closed port on 127.0.0.1 plays
the dead server)."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx2

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service
from guaipeca.server.http import build_app
from guaipeca.server.overview import status_of
from guaipeca.store.backends import open_backend
from support.http import LiveServer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_status_and_health_report_a_down_backend(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    url = f"http://127.0.0.1:{_closed_port()}"
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(docs)}],
            "storage": {
                "data_dir": str(tmp_path / "data"),
                "backend": "qdrant",
                "qdrant": {"url": url, "timeout": 1},
            },
        },
        env={},
        cwd=tmp_path,
    )
    loaded = LoadedSettings(settings, None, tmp_path / "data")
    index = Index(
        embedder=HashingEmbedder(),
        settings=settings.engine(),
        backend=open_backend(settings.storage),
    )
    assert index.corpora == [] and index.backend_error is not None
    service = Service(index, loaded)
    status = status_of(service)
    assert status.backend == "qdrant"
    assert status.backend_error is not None and "is not answering" in status.backend_error
    assert [c.name for c in status.corpora] == ["docs"] and not status.corpora[0].indexed
    with (
        LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live,
        httpx2.Client(base_url=live.url, timeout=30) as client,
    ):
        response = client.get("/health")
        assert response.status_code == 503
        body = response.json()
        assert (body["backend"], body["backend_status"]) == ("qdrant", "down")
        assert url not in response.text and "Traceback" not in response.text
    index.close()


def test_health_reports_an_up_backend(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha beta\n")
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(docs)}],
            "storage": {"backend": "qdrant", "qdrant": {"path": str(tmp_path / "q")}},
        },
        env={},
        cwd=tmp_path,
    )
    loaded = LoadedSettings(settings, None, tmp_path / "data")
    index = Index(
        embedder=HashingEmbedder(),
        settings=settings.engine(),
        backend=open_backend(settings.storage),
    )
    service = Service(index, loaded)
    service.reindex("docs")
    assert status_of(service).backend_error is None
    with (
        LiveServer(lambda port: build_app(service, host="127.0.0.1", port=port)) as live,
        httpx2.Client(base_url=live.url, timeout=30) as client,
    ):
        body = client.get("/health").json()
        assert (body["backend_status"], body["documents"]) == ("up", 1)
    index.close()
