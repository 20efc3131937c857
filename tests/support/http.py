"""A live uvicorn server on 127.0.0.1 for HTTP tests (shared by the server test files)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette

from guaipeca.server import Service
from guaipeca.server.http import make_server

#: The headers a raw Streamable HTTP request to ``/mcp`` needs.
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def initialize_message(client: str, version: str = "2025-06-18") -> dict[str, object]:
    """A raw JSON-RPC ``initialize`` request, as a client sends it first."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }


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


class Served:
    """``make_server`` (the server ``guaipeca serve`` runs: read timeouts, drain, idle
    trim) over ``service`` on 127.0.0.1, in a thread."""

    def __init__(self, service: Service) -> None:
        self.server = make_server(service, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not (self.server.started and self.server.servers):
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        self.port = int(self.server.servers[0].sockets[0].getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "server did not stop"
