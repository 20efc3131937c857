"""Memory-pressure child. ``build PATH CHUNKS``: an index of CHUNKS chunks whose passage
vectors are random unit vectors (fast to make; the query side is the real bundled model).
``serve PATH PORT``: serve that index over HTTP (the same app as ``guaipeca serve``),
printing the query cache's size and pressure evictions every second."""

from __future__ import annotations

import sys
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import uvicorn

from guaipeca import Index, NewDocument
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import OnnxEmbedder
from guaipeca.server import Service
from guaipeca.server.http import build_app

WORDS = [
    "river",
    "stone",
    "cedar",
    "lantern",
    "harbor",
    "meadow",
    "copper",
    "violet",
    "falcon",
    "orchard",
    "glacier",
]


class BulkEmbedder:
    """The real model for queries; random unit vectors (seeded by the text) for passages."""

    def __init__(self) -> None:
        self.model = OnnxEmbedder()
        self.name, self.dimension = self.model.name, self.model.dimension

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
            v = rng.standard_normal(self.dimension).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.model.embed_query(text)


def _settings(root: Path) -> LoadedSettings:
    folder = root / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(folder)}],
            "storage": {"data_dir": str(root / "data")},
            "chunking": {"max_size": 300},
            "server": {"rate_limit_rps": 100000, "rate_limit_burst": 100000},
        },
        env={},
        cwd=root,
    )
    return LoadedSettings(settings, None, root / "data")


def build(root: Path, chunks: int) -> None:
    loaded = _settings(root)
    rng = np.random.default_rng(1)
    per_doc = 10
    with Index(
        root / "data" / "index", embedder=BulkEmbedder(), settings=loaded.settings.engine()
    ) as index:
        for start in range(0, chunks // per_doc, 500):
            docs = []
            for d in range(start, min(start + 500, chunks // per_doc)):
                sections = [
                    f"## Part {s}\n\n" + " ".join(rng.choice(WORDS, 30)) + f" doc{d}"
                    for s in range(per_doc)
                ]
                docs.append(NewDocument(f"doc-{d}.md", f"# Doc {d}\n\n" + "\n\n".join(sections)))
            index.add_documents(docs, corpus="docs")
        print("chunks", index.stats().chunks, flush=True)


def serve(root: Path, port: int) -> None:
    # Under ulimit -v every thread's stack reservation counts (8 MiB each by default); a
    # worker thread needs far less. See docs/reliability.md, memory pressure.
    threading.stack_size(2 * 1024 * 1024)
    loaded = _settings(root)
    index = Index(
        root / "data" / "index", embedder=BulkEmbedder(), settings=loaded.settings.engine()
    )
    service = Service(index, loaded)
    cache = index.embedder

    def watch() -> None:
        while True:
            stats = cache.stats() if hasattr(cache, "stats") else {}
            print(
                "cache", stats.get("entries", -1), stats.get("pressure_evictions", -1), flush=True
            )
            time.sleep(1)

    threading.Thread(target=watch, daemon=True).start()
    config = uvicorn.Config(
        build_app(service, host="127.0.0.1", port=port),
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        ws="none",
    )
    print("ready", flush=True)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        serve(Path(sys.argv[2]), int(sys.argv[3]))
