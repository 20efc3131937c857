"""The MCP server: every tool group registered on one :class:`ToolServer`, in a fixed order
(the order clients list them in)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from guaipeca import __version__
from guaipeca.server.limits import search_gate
from guaipeca.server.service import Service
from guaipeca.server.tools.agentic import (
    register_filtered_search,
    register_find_related,
    register_keyword_and_semantic_search,
    register_keyword_search,
    register_read_chunk,
    register_read_neighbors,
    register_semantic_search,
)
from guaipeca.server.tools.common import INSTRUCTIONS, ToolServer, registrar
from guaipeca.server.tools.manage import (
    register_delete,
    register_index,
    register_list_folders,
    register_status,
    register_upload,
)
from guaipeca.server.tools.read import (
    register_get_chunk,
    register_get_document,
    register_get_toc,
    register_list_documents,
)
from guaipeca.server.tools.resources import register_resources
from guaipeca.server.tools.search import register_search
from guaipeca.server.writes import current_caller

__all__ = ["build_server"]


def build_server(service: Service) -> MCPServer[Any]:
    """An MCP server whose tools search, read and manage the service's corpora (§7.1), and
    whose resources are their documents and chunks."""
    server = ToolServer("guaipeca", version=__version__, instructions=INSTRUCTIONS)
    # A cap on concurrent searches and a deadline per search (server settings).
    gate = search_gate(service.settings, caller=current_caller)
    tool = registrar(server, service)
    register_search(tool, service, gate)
    register_get_chunk(tool, service)
    register_get_document(tool, service)
    register_list_documents(tool, service)
    register_get_toc(tool, service)
    register_index(tool, service)
    register_status(tool, service)
    register_list_folders(tool, service)
    register_upload(tool, service)
    register_delete(tool, service)
    register_keyword_search(tool, service, gate)
    register_keyword_and_semantic_search(tool, service, gate)
    register_semantic_search(tool, service, gate)
    register_filtered_search(tool, service, gate)
    register_read_chunk(tool, service)
    register_read_neighbors(tool, service)
    register_find_related(tool, service, gate)
    # Documents and chunks that results link to, read by URI.
    register_resources(server, service)
    return server
