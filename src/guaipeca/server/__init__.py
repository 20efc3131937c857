"""The MCP server: tools over one open :class:`~guaipeca.Index` and its loaded settings."""

from .service import Service
from .tools import build_server

__all__ = ["Service", "build_server"]
