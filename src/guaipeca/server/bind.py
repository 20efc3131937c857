"""The HTTP server's listening sockets, bound before the index opens and before the address
is announced: a port already in use is one line saying what to do, not a server that loads
its model, starts, fails to bind and stops."""

from __future__ import annotations

import errno
import socket

from guaipeca.errors import GuaipecaError

__all__ = ["listen"]


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``port`` on every address ``host`` resolves to (as uvicorn would
    bind them), not yet listening: uvicorn's ``serve(sockets=...)`` starts them.

    Raises:
        GuaipecaError: the port is in use, or the address cannot be bound (one line that
            names the host and port and the setting or option to change).
    """
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise GuaipecaError(
            f"cannot listen on {host}:{port}: {exc.strerror} (set --host or server.host)"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio does: one socket per family
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise GuaipecaError(_why(host, port, exc)) from None
    return sockets


def _why(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another guaipeca serve?): choose "
            "another with --port (or server.port), or stop the process that holds it"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {host}:{port}: permission denied (ports below 1024 need "
            "privileges): choose another with --port (or server.port)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {host}:{port}: no such address on this machine "
            "(set --host or server.host)"
        )
    return f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}"
