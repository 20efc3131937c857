"""The MCP server: tools over one open :class:`~guaipeca.Index` and its loaded settings."""

from .tools import Service, build_server

__all__ = ["Service", "build_server"]
