"""Documents and chunks as MCP resources: two templates (links.py has the URIs) whose
``resources/read`` returns the text of the document or chunk a tool result linked to.

What a client may read is what the tools serve: documents of the corpora searches cover
(the configured ones; every one without a configuration file), and never the text of a
file that leads outside its corpus folder. A document or chunk that is missing, in another
corpus, or not served gets the same error as a URI no template matches (``ToolServer``),
so the answer tells nothing about what exists. Reads take the caller's rate-limit token,
as tool calls do.
"""

import functools
from collections.abc import Awaitable, Callable

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from guaipeca.errors import GuaipecaError, InvalidArgumentError, NotFoundError
from guaipeca.server.limits import too_many_requests
from guaipeca.server.service import Service
from guaipeca.server.tools.common import TOOL_MAX_READ_CHARS, ToolServer, in_thread, rate_wait
from guaipeca.server.tools.links import CHUNK_URI_TEMPLATE, DOCUMENT_URI_TEMPLATE, MARKDOWN

__all__ = ["readable_corpus", "register_resources"]


def readable_corpus(service: Service, corpus: str) -> bool:
    """Whether resources of ``corpus`` may be read: an indexed corpus that searches cover."""
    scope = service.scope(None)
    return corpus in service.index.corpora and (scope is None or corpus in scope)


def _document_text(service: Service, corpus: str, doc_id: str) -> str:
    """Blocking.

    Raises:
        NotFoundError: no such document in a readable corpus, or one not served.
    """
    if not readable_corpus(service, corpus):
        raise NotFoundError(f"no corpus {corpus!r:.70}")
    doc = service.index.read_document(doc_id, corpus=corpus, max_chars=TOOL_MAX_READ_CHARS)
    service.check_served(doc.corpus, doc.doc_id, doc.source_path)
    if not doc.truncated:
        return doc.text
    # A resource has no paging: past the budget, say where the rest is.
    return (
        f"{doc.text}\n\n[truncated: the first {doc.end:,} of {doc.chars:,} characters; read on "
        f"with the get_document tool, doc_id {doc.doc_id!r}, offset {doc.end}]\n"
    )


def _chunk_text(service: Service, corpus: str, chunk: str) -> str:
    """Blocking.

    Raises:
        NotFoundError: no such chunk in a readable corpus, or its document is not served.
    """
    if not chunk.isdigit() or not readable_corpus(service, corpus):
        raise NotFoundError(f"no chunk {chunk!r:.30} in corpus {corpus!r:.70}")
    found = service.index.get_chunk(f"{corpus}:{chunk}")
    service.check_served(found.corpus, found.doc_id, found.source_path)
    return found.text


async def _read(service: Service, read: Callable[[], str]) -> str:
    """``read()`` in a worker thread, counted and rate-limited like a tool call.

    Raises:
        ResourceNotFoundError: nothing to read there (ToolServer words it as an unknown URI).
        ResourceError: the caller is over its rate, or the index failed (sanitised).
    """
    wait = rate_wait(service)
    if wait > 0:
        raise ResourceError(too_many_requests(wait))
    service.tool_calls.started()
    try:
        return await in_thread(read)
    except (NotFoundError, InvalidArgumentError):
        raise ResourceNotFoundError("not found") from None
    except GuaipecaError as exc:  # the storage backend is down, ...
        raise ResourceError(service.sanitise(str(exc))) from None
    finally:
        service.tool_calls.done()


def register_resources(server: ToolServer, service: Service) -> None:
    """Registers the document and chunk resource templates on ``server``."""

    def resource(
        uri: str, name: str, title: str, description: str
    ) -> Callable[[Callable[..., Awaitable[str]]], Callable[..., Awaitable[str]]]:
        return server.resource(
            uri, name=name, title=title, description=description, mime_type=MARKDOWN
        )

    @resource(
        DOCUMENT_URI_TEMPLATE,
        "document",
        "A document's text",
        "The whole text of an indexed document (canonical Markdown), the one search hits "
        "point into: their start/end offsets index it. doc_id is percent-encoded.",
    )
    async def document(corpus: str, doc_id: str) -> str:
        return await _read(service, functools.partial(_document_text, service, corpus, doc_id))

    @resource(
        CHUNK_URI_TEMPLATE,
        "chunk",
        "A chunk's text",
        "The text of one chunk, the passage a search hit names: chunk is the number of "
        "its chunk_id 'corpus:number'.",
    )
    async def chunk(corpus: str, chunk: str) -> str:
        return await _read(service, functools.partial(_chunk_text, service, corpus, chunk))
