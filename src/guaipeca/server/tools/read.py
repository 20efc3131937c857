"""Tools that read: chunks by id, whole documents, document listings and tables of contents."""

# No `from __future__ import annotations` here: the SDK evaluates each tool's annotations when
# it is registered, and they name this function's live locals (settings, limits).
import functools
from typing import Annotated, Any

from pydantic import Field

from guaipeca.errors import NotFoundError
from guaipeca.server.schema import (
    ChunksOut,
    DocumentInfoOut,
    DocumentListOut,
    DocumentOut,
    TocOut,
)
from guaipeca.server.service import Service
from guaipeca.server.tools.common import (
    MAX_CHUNK_IDS,
    READ_ONLY,
    WHERE_DOC,
    Registrar,
    in_thread,
)
from guaipeca.types import Chunk

__all__ = [
    "register_get_chunk",
    "register_get_document",
    "register_get_toc",
    "register_list_documents",
]


def register_get_chunk(tool: Registrar, service: Service) -> None:
    """Registers the ``get_chunk`` tool."""
    idx = service.index

    @tool("Read chunks", **READ_ONLY)
    async def get_chunk(
        chunk_ids: Annotated[
            str | Annotated[list[str], Field(min_length=1, max_length=MAX_CHUNK_IDS)],
            Field(
                description="One chunk id ('corpus:number', from search results or "
                f"get_toc) or a list of up to {MAX_CHUNK_IDS}."
            ),
        ],
    ) -> ChunksOut:
        """Read whole chunks by id, in the order given (duplicates once).

        Use it to read the full text of search hits, or chunks named by get_toc. Every
        id must exist: an unknown id makes the whole call fail with its name.
        """
        ids = [chunk_ids] if isinstance(chunk_ids, str) else list(dict.fromkeys(chunk_ids))

        def read() -> list[Chunk]:
            found, missing = [], []
            for cid in ids:
                try:
                    found.append(idx.get_chunk(cid))
                except NotFoundError:
                    missing.append(cid)
            if missing:
                shown = ", ".join(repr(m[:80]) for m in missing[:5])
                more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
                raise NotFoundError(
                    f"no chunk with id {shown}{more} (ids look like 'corpus:number', "
                    "as in search results)"
                )
            return found

        chunks = await in_thread(read)
        return ChunksOut(chunks=[service.chunk_out(c) for c in chunks])


def register_get_document(tool: Registrar, service: Service) -> None:
    """Registers the ``get_document`` tool."""
    idx = service.index

    @tool("Read a document", **READ_ONLY)
    async def get_document(
        doc_id: Annotated[
            str,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ],
        corpus: Annotated[
            str | None,
            Field(description="Its corpus; needed only when the id exists in several."),
        ] = None,
        offset: Annotated[
            int,
            Field(ge=0, description="Character offset to start at (to read on: next_offset)."),
        ] = 0,
        max_chars: Annotated[
            int,
            Field(ge=1, le=1_000_000, description="Most characters of text to return."),
        ] = 20_000,
    ) -> DocumentOut:
        """Read a whole document (its converted Markdown text) with its metadata.

        Long documents come in parts: when truncated is true, call again with
        offset=next_offset. Character offsets match the start/end of search hits, so
        offset=hit.start reads on from a hit. Prefer get_chunk or search with
        section_filter when only a part is needed.
        """
        doc = await in_thread(functools.partial(idx.get_document, doc_id, corpus=corpus))
        end = min(len(doc.text), offset + max_chars)
        start = min(offset, end)
        truncated = end < len(doc.text)
        return DocumentOut(
            doc_id=doc.doc_id,
            corpus=doc.corpus,
            source_path=service.relative_path(doc.corpus, doc.source_path),
            metadata=doc.metadata,
            chunk_count=doc.chunk_count,
            chars=len(doc.text),
            offset=start,
            end=end,
            truncated=truncated,
            next_offset=end if truncated else None,
            text=doc.text[start:end],
        )


def register_list_documents(tool: Registrar, service: Service) -> None:
    """Registers the ``list_documents`` tool."""
    idx = service.index

    @tool("List documents", **READ_ONLY)
    async def list_documents(
        corpus: Annotated[str | None, Field(description="Only this corpus; default: all.")] = None,
        where: Annotated[dict[str, Any] | None, Field(description=WHERE_DOC)] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Page size.")] = 50,
        offset: Annotated[
            int, Field(ge=0, le=1_000_000, description="Documents to skip (paging).")
        ] = 0,
    ) -> DocumentListOut:
        """List indexed documents (id, corpus, source path, size, chunk count, metadata),
        ordered by corpus then id, optionally filtered like search's where.

        Use it to see what a corpus holds or to find a doc_id; page on with
        offset=next_offset.
        """
        rows = await in_thread(
            functools.partial(
                idx.list_documents, corpus=corpus, where=where, limit=limit + 1, offset=offset
            )
        )
        more = len(rows) > limit
        docs = [
            DocumentInfoOut(
                doc_id=r.doc_id,
                corpus=r.corpus,
                source_path=service.relative_path(r.corpus, r.source_path),
                chars=r.chars,
                chunk_count=r.chunk_count,
                metadata=r.metadata,
            )
            for r in rows[:limit]
        ]
        return DocumentListOut(
            documents=docs,
            count=len(docs),
            offset=offset,
            next_offset=offset + limit if more else None,
        )


def register_get_toc(tool: Registrar, service: Service) -> None:
    """Registers the ``get_toc`` tool."""
    idx = service.index

    @tool("Table of contents", **READ_ONLY)
    async def get_toc(
        doc_id: Annotated[
            str,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ],
        corpus: Annotated[
            str | None,
            Field(description="Its corpus; needed only when the id exists in several."),
        ] = None,
    ) -> TocOut:
        """A document's headings as a tree, each with its section_id, the chunk where it
        starts and its number of chunks.

        Use it to see how a long document is organised before reading it; pass a
        section_id (or 'Title > Section') to search's section_filter, or a chunk_id to
        get_chunk. structured is false for a document without headings.
        """
        toc = await in_thread(functools.partial(idx.toc, doc_id, corpus=corpus))
        return TocOut.model_validate(toc)
