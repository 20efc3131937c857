"""Budgets of the resources a long-lived connection holds (issue 29, item 4): event
streams, connections and the file descriptors under them.

- :func:`raise_open_files_limit`: at start, the soft ``RLIMIT_NOFILE`` raised to the hard
  one where the process may; :func:`connection_budget` and :func:`stream_budget` are then
  derived from the limit it got, leaving descriptors for the index, uploads and logs.
- :class:`StreamBudget`: event streams (legacy ``GET /sse``, Streamable HTTP ``GET /mcp``)
  per identity and in total, 429 JSON beyond; opening a legacy SSE session takes a
  rate-limit token, as ``initialize`` does on ``/mcp``.
- :func:`quiet_descriptor_errors`: running out of descriptors is logged once per interval,
  not as a traceback per refused ``accept``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import resource
import time
from collections import Counter
from collections.abc import Collection
from typing import Any, Final

from starlette.types import ASGIApp, Receive, Scope, Send

from guaipeca.server.asgi import caller_of, error_response
from guaipeca.server.limits import TokenBucket, reserved_share, too_many_requests

__all__ = [
    "DESCRIPTOR_ERRNOS",
    "StreamBudget",
    "connection_budget",
    "open_files_limit",
    "quiet_descriptor_errors",
    "raise_open_files_limit",
    "stream_budget",
]

log = logging.getLogger("guaipeca.server")

#: Errors of a process (or system) out of descriptors or socket buffers.
DESCRIPTOR_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Highest soft limit asked for when the hard one is unlimited.
_NOFILE_CEILING: Final = 1 << 20


def open_files_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` in force."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _NOFILE_CEILING if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (systemd's default soft limit is
    1024); returns ``(before, after)``. Where the process may not, the limit stays."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = open_files_limit()
    target = _NOFILE_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.info("could not raise the open-files limit from %d to %d: %s", soft, target, exc)
    return before, open_files_limit()


def connection_budget(nofile: int) -> int:
    """Connections served at once within ``nofile`` descriptors: an eighth (at least 64)
    stays for the index, uploads, worker pipes and logs."""
    return max(16, nofile - max(64, nofile // 8))


def stream_budget(max_streams: int, nofile: int) -> int:
    """Event streams open at once: ``server.max_streams``, but at most half the
    connections, so that searches and ``/health`` always find one."""
    return max(2, min(max_streams, connection_budget(nofile) // 2))


class StreamBudget:
    """At most ``per_identity`` event streams per caller and ``total`` in all (``GET`` of
    ``paths``); the last tenth of ``total`` is kept for callers that hold none. Beyond:
    429 JSON with ``Retry-After``. A ``GET`` of ``rate_paths`` (a legacy SSE session being
    opened) also takes a token from ``bucket``."""

    def __init__(
        self,
        app: ASGIApp,
        bucket: TokenBucket,
        *,
        total: int,
        per_identity: int,
        paths: Collection[str] = ("/sse", "/mcp"),
        rate_paths: Collection[str] = ("/sse",),
    ) -> None:
        self.app = app
        self.bucket = bucket
        self.total = total
        self.per_identity = min(per_identity, total)
        self.paths = frozenset(paths)
        self.rate_paths = frozenset(rate_paths)
        self.open: Counter[str] = Counter()
        self.refused = 0

    @property
    def count(self) -> int:
        return sum(self.open.values())

    def problem(self, owner: str) -> str | None:
        """Why ``owner`` may not open one more stream now, or None."""
        held, count = self.open[owner], self.count
        if held >= self.per_identity:
            return (
                f"too many open event streams for this caller ({held}, "
                f"server.max_streams_per_identity = {self.per_identity}); close one first"
            )
        reserve = reserved_share(self.total)
        if count >= self.total or (held > 0 and count >= self.total - reserve):
            return (
                f"the server has {count} event streams open (server.max_streams and the "
                f"open-files limit allow {self.total}); retry later"
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        owner = caller_of(scope)
        problem = self.problem(owner)
        wait = 0.0
        if problem is None and scope["path"] in self.rate_paths:
            wait = self.bucket.take(owner)
            problem = too_many_requests(wait) if wait > 0 else None
        if problem is not None:
            self.refused += 1
            retry = str(max(1, math.ceil(wait)) if wait > 0 else 10)
            await error_response(429, problem, {"Retry-After": retry})(scope, receive, send)
            return
        self.open[owner] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open[owner] -= 1
            if self.open[owner] <= 0:
                del self.open[owner]


class _DescriptorErrors:
    """A loop exception handler: an ``accept`` (or any callback) failing for want of
    descriptors is one warning per ``interval`` seconds with a count; anything else goes
    to the handler that was there before."""

    def __init__(self, previous: Any, interval: float) -> None:
        self.previous = previous
        self.interval = interval
        self.last = -math.inf
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in DESCRIPTOR_ERRNOS:
            now = time.monotonic()
            if now - self.last < self.interval:
                self.suppressed += 1
                return
            more = f" ({self.suppressed} more since the last warning)" if self.suppressed else ""
            log.warning(
                "out of file descriptors (%s, limit %d): new connections wait%s",
                errno.errorcode.get(exc.errno or 0, exc.errno),
                open_files_limit(),
                more,
            )
            self.last, self.suppressed = now, 0
            return
        if isinstance(exc, ValueError) and "_start_serving" in repr(context.get("handle")):
            # asyncio's accept retry, scheduled under EMFILE, firing after the listening
            # socket was closed (the shutdown): nothing is lost.
            log.debug("accept retry after the socket closed: %s", exc)
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)


def quiet_descriptor_errors(loop: asyncio.AbstractEventLoop, interval: float = 10.0) -> None:
    """Log descriptor exhaustion on ``loop`` once per ``interval`` seconds."""
    loop.set_exception_handler(_DescriptorErrors(loop.get_exception_handler(), interval))
