"""The MCP server: tools over one open :class:`~guaipeca.Index` and its loaded settings."""

from guaipeca.server.service import Service
from guaipeca.server.tools import build_server

__all__ = ["Service", "build_server"]
