"""Resource URIs of documents and chunks, and the ``resource_link`` blocks that tool results
carry to them (read by ``resources/read``: server/tools/resources.py).

The URIs are RFC 6570 templates with simple expansion, so each value is percent-encoded
(``/`` as ``%2F``) and a URI names one document or chunk unambiguously::

    guaipeca://corpus/{corpus}/doc/{doc_id}    a document's text (canonical Markdown)
    guaipeca://corpus/{corpus}/chunk/{chunk}   the text of chunk '{corpus}:{chunk}'

Links are built from a tool's structured result (the same JSON the client gets), so a link
names exactly what the result shows: each hit or chunk links to itself and to its document
(once per document), each listed document to itself.
"""

from collections.abc import Iterator, Mapping
from typing import Any, Final

from mcp.shared.uri_template import UriTemplate
from mcp_types import ResourceLink

__all__ = [
    "CHUNK_URI_TEMPLATE",
    "DOCUMENT_URI_TEMPLATE",
    "MARKDOWN",
    "chunk_uri",
    "document_uri",
    "resource_links",
]

DOCUMENT_URI_TEMPLATE: Final = "guaipeca://corpus/{corpus}/doc/{doc_id}"
CHUNK_URI_TEMPLATE: Final = "guaipeca://corpus/{corpus}/chunk/{chunk}"
#: What a document's or chunk's text is: the canonical Markdown every format converts to.
MARKDOWN: Final = "text/markdown"

_DOCUMENT = UriTemplate.parse(DOCUMENT_URI_TEMPLATE)
_CHUNK = UriTemplate.parse(CHUNK_URI_TEMPLATE)
#: The list fields of tool results whose items are hits, chunks, documents or spans.
_RECORD_LISTS: Final = ("hits", "chunks", "spans", "documents")


def document_uri(corpus: str, doc_id: str) -> str:
    return _DOCUMENT.expand({"corpus": corpus, "doc_id": doc_id})


def chunk_uri(chunk_id: str) -> str:
    """The URI of chunk ``'corpus:number'`` (its corpus and its number)."""
    corpus, _, number = chunk_id.rpartition(":")
    return _CHUNK.expand({"corpus": corpus, "chunk": number})


def _text(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def _chunk_link(record: Mapping[str, Any], chunk_id: str) -> ResourceLink:
    trail = record.get("heading_trail") or record.get("heading_path") or []
    where = f"{record.get('doc_id')}, characters {record.get('start')}-{record.get('end')}"
    return ResourceLink(
        type="resource_link",
        name=chunk_id,
        title=" > ".join(str(t) for t in trail) or None,
        uri=chunk_uri(chunk_id),
        description=f"chunk {chunk_id} of {where}",
        mime_type=MARKDOWN,
    )


def _document_link(corpus: str, doc_id: str, record: Mapping[str, Any]) -> ResourceLink:
    path = record.get("heading_path") or []
    return ResourceLink(
        type="resource_link",
        name=doc_id,
        title=str(path[0]) if path else None,
        uri=document_uri(corpus, doc_id),
        description=f"document {doc_id} of corpus {corpus} (its whole text)",
        mime_type=MARKDOWN,
    )


def _records(structured: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(corpus, record)`` for each hit, chunk, span or document of a result; a record
    without its own corpus (get_toc's documents) takes the result's."""
    default = _text(structured, "corpus")
    for key in _RECORD_LISTS:
        items = structured.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping):
                corpus = _text(item, "corpus") or default
                if corpus is not None:
                    yield corpus, item


def resource_links(structured: Mapping[str, Any]) -> list[ResourceLink]:
    """The links of a tool's structured result: each chunk (hits and chunks) first, in
    result order, then each document once."""
    chunks: dict[str, ResourceLink] = {}
    documents: dict[tuple[str, str], ResourceLink] = {}
    for corpus, record in _records(structured):
        chunk_id = _text(record, "chunk_id")
        if chunk_id is not None and chunk_id not in chunks:
            chunks[chunk_id] = _chunk_link(record, chunk_id)
        doc_id = _text(record, "doc_id")
        if doc_id is not None and (corpus, doc_id) not in documents:
            documents[corpus, doc_id] = _document_link(corpus, doc_id, record)
    return [*chunks.values(), *documents.values()]
