"""A live server for the web page's tests: two corpora (``docs``: real files from
``tests/data`` plus a Markdown guide; ``inbox``: accepts uploads), the real model,
a Bearer token, on 127.0.0.1 at an ephemeral port."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.server import Service
from guaipeca.server.http import build_app
from support import MemoEmbedder, shared_data
from support.http import LiveServer
from support.web import TOKEN

GUIDE = """\
# Field guide

A short guide to the pond, used by the web page's tests.

## Birds

### Ducks

Mallards dabble for food; their waterproof feathers come from preening oil.

### Herons

The grey heron stands still in shallow water and spears fish.

| Bird | Call |
|------|------|
| Mallard | quack |
| Heron | frahnk |

A [pond map](https://example.invalid/map) and a photo: ![a heron](https://example.invalid/heron.png)

## Safety

Never feed bread to waterfowl. <script>window.pwned = true</script>
<img src=x onerror="window.pwned = true">
"""
NOTE = "# Inbox\n\nNotes dropped here through the web page.\n"


@pytest.fixture(scope="module")
def web_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web")
    docs = root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE, encoding="utf-8")
    for name in ("wikipedia_duck.html", "nics-background-checks-2015-11.pdf"):
        shutil.copy(shared_data("docs", name), docs / name)
    (root / "inbox").mkdir()
    (root / "inbox" / "inbox.md").write_text(NOTE, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def web_service(web_root: Path, real_embedder: MemoEmbedder) -> Iterator[Service]:
    data = web_root / "data"
    settings = parse_settings(
        {
            "corpora": [
                {"name": "docs", "path": str(web_root / "docs"), "topic": "reference"},
                {"name": "inbox", "path": str(web_root / "inbox"), "topic": "uploads"},
            ],
            "upload": {"allow": ["inbox"], "max_file_size": 1_000_000},
            "storage": {"data_dir": str(data)},
            "server": {
                "auth_token": TOKEN,
                "allowed_hosts": ["guaipeca"],
                "rate_limit_rps": 1000,
                "rate_limit_burst": 1000,
            },
        },
        env={},
        cwd=web_root,
    )
    index = Index(data / "index", embedder=real_embedder, settings=settings.engine())
    service = Service(index, LoadedSettings(settings, None, data))
    for corpus in ("docs", "inbox"):
        service.reindex(corpus)
    assert index.wait_for_embedding(60)  # the embedding phase runs behind the server
    yield service
    index.close()


@pytest.fixture(scope="module")
def web_live(web_service: Service) -> Iterator[LiveServer]:
    with LiveServer(lambda port: build_app(web_service, host="127.0.0.1", port=port)) as live:
        yield live
