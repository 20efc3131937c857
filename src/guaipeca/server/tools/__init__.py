"""The MCP server and its tools, one module per tool group: search, read, manage and the
agentic tools, on what they share (common), put together by ``server.build_server``."""

from guaipeca.server.tools.server import build_server

__all__ = ["build_server"]
