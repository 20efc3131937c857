"""A live uvicorn server on 127.0.0.1 for HTTP tests (shared by the server test files)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette


class LiveServer:
    """uvicorn serving ``build(port)`` on 127.0.0.1 at an ephemeral port, in a thread."""

    def __init__(self, build: Callable[[int], Starlette]) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            build(self.port),
            log_config=None,
            access_log=False,
            ws="none",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self._ready = threading.Event()
        startup = self.server.startup

        async def startup_then_signal(sockets: list[socket.socket] | None = None) -> None:
            try:
                await startup(sockets=sockets)
            finally:
                self._ready.set()

        self.server.startup = startup_then_signal  # type: ignore[method-assign]
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self._thread.start()
        assert self._ready.wait(30), "server did not start"
        assert self.server.started, "server failed to start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(30)
        self._sock.close()
        assert not self._thread.is_alive(), "server did not stop"
