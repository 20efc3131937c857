"""Tools that read: chunks by id, whole documents, document listings and tables of contents."""

# No `from __future__ import annotations` here: the SDK evaluates each tool's annotations when
# it is registered, and they name this function's live locals (settings, limits).
import functools
import os
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import Field

from guaipeca.errors import InvalidArgumentError, NotFoundError
from guaipeca.server.schema import (
    ChunksOut,
    DocumentInfoOut,
    DocumentListOut,
    DocumentOut,
    DocumentTocOut,
    TocOut,
)
from guaipeca.server.service import Service
from guaipeca.server.tools.common import (
    READ_ONLY,
    TOOL_MAX_CHUNK_IDS,
    TOOL_MAX_READ_CHARS,
    WHERE_DOC,
    Registrar,
    in_thread,
    one_of,
)
from guaipeca.types import Chunk, DocumentInfo

__all__ = [
    "document_named",
    "register_get_chunk",
    "register_get_document",
    "register_get_toc",
    "register_list_documents",
]


def register_get_chunk(tool: Registrar, service: Service) -> None:
    """Registers the ``get_chunk`` tool."""

    @tool("Read chunks", links=True, **READ_ONLY)
    async def get_chunk(
        chunk_ids: Annotated[
            str | Annotated[list[str], Field(min_length=1, max_length=TOOL_MAX_CHUNK_IDS)] | None,
            Field(
                description="One chunk id ('corpus:number', from search results or "
                f"get_toc) or a list of up to {TOOL_MAX_CHUNK_IDS}."
            ),
        ] = None,
        chunk_id: Annotated[
            str | None,
            Field(min_length=1, description="One chunk id (the seed Guaipeca's name)."),
        ] = None,
    ) -> ChunksOut:
        """Read whole chunks by id, in the order given (duplicates once).

        Use it to read the full text of search hits, or chunks named by get_toc. Every
        id must exist: an unknown id makes the whole call fail with its name. Give
        chunk_ids (or chunk_id).
        """
        given: str | Sequence[str] = one_of("chunk_ids", chunk_ids, "chunk_id", chunk_id)
        ids = [given] if isinstance(given, str) else list(dict.fromkeys(given))

        def read() -> list[Chunk]:
            found, missing = [], []
            for cid in ids:
                try:
                    found.append(service.guard.get_chunk(cid))
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
            str | None,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ] = None,
        source_path: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=4096,
                description="Or the document's path, as the seed Guaipeca named it: relative "
                "to its corpus folder, or absolute inside it.",
            ),
        ] = None,
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
            Field(ge=1, le=TOOL_MAX_READ_CHARS, description="Most characters of text to return."),
        ] = 20_000,
    ) -> DocumentOut:
        """Read a whole document (its converted Markdown text) with its metadata.

        Long documents come in parts: when truncated is true, call again with
        offset=next_offset. Character offsets match the start/end of search hits, so
        offset=hit.start reads on from a hit. Prefer get_chunk or search with
        section_filter when only a part is needed. Give doc_id or source_path.
        """
        doc_id, corpus = document_named(service, doc_id, "source_path", source_path, corpus)
        corpus = await in_thread(functools.partial(service.guard.document_corpus, doc_id, corpus))
        # Only the part asked for is read: a call costs memory by max_chars, not by the
        # document's size (up to limits.max_chars, 20 million characters).
        doc = await in_thread(
            functools.partial(
                idx.read_document, doc_id, corpus=corpus, offset=offset, max_chars=max_chars
            )
        )
        await in_thread(
            functools.partial(service.check_served, doc.corpus, doc.doc_id, doc.source_path)
        )
        return DocumentOut(
            doc_id=doc.doc_id,
            corpus=doc.corpus,
            source_path=service.relative_path(doc.corpus, doc.source_path),
            metadata=doc.metadata,
            chunk_count=doc.chunk_count,
            chars=doc.chars,
            offset=doc.offset,
            end=doc.end,
            truncated=doc.truncated,
            next_offset=doc.end if doc.truncated else None,
            text=doc.text,
        )


def register_list_documents(tool: Registrar, service: Service) -> None:
    """Registers the ``list_documents`` tool."""
    idx = service.index

    @tool("List documents", links=True, **READ_ONLY)
    async def list_documents(
        corpus: Annotated[
            str | None, Field(description="Only this corpus; default: every configured one.")
        ] = None,
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
        if corpus is not None:
            await in_thread(functools.partial(service.guard.check_read, corpus))
        scope = await in_thread(functools.partial(service.scope, None)) if corpus is None else None
        if scope is not None:  # configured (and, under grants, readable) corpora only
            only = {"corpus": {"$in": scope}}
            where = {"$and": [where, only]} if where else only
        rows: list[DocumentInfo] = []
        # None indexed yet (or the one named): the configured corpora are there, empty.
        if scope != [] and not (corpus is not None and service.unindexed(corpus)):
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
                filename=PurePosixPath(r.doc_id).name,
                file_size=_file_size(r.source_path),
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

    @tool("Table of contents", links=True, **READ_ONLY)
    async def get_toc(
        doc_id: Annotated[
            str | None,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ] = None,
        corpus: Annotated[
            str | None,
            Field(
                description="Its corpus; needed only when the id exists in several. "
                "Alone (no document): the corpus's documents with their top headings."
            ),
        ] = None,
        document: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=4096,
                description="Or the document's path, as the seed Guaipeca named it: relative "
                "to its corpus folder, or absolute inside it.",
            ),
        ] = None,
    ) -> TocOut:
        """A document's headings as a tree, each with its section_id, the chunk where it
        starts and its number of chunks; or, given only a corpus, every document of it
        with the top two levels of its headings (documents, up to 200).

        Use it to see how a long document is organised before reading it; pass a
        section_id (or 'Title > Section') to search's section_filter, or a chunk_id to
        get_chunk. structured is false for a document without headings.
        """
        if doc_id is None and document is None:
            if corpus is None:
                raise InvalidArgumentError("give doc_id (or document), or a corpus")
            return await in_thread(functools.partial(_corpus_toc, service, corpus))
        doc_id, corpus = document_named(service, doc_id, "document", document, corpus)
        corpus = await in_thread(functools.partial(service.guard.document_corpus, doc_id, corpus))
        toc = await in_thread(functools.partial(idx.toc, doc_id, corpus=corpus))
        return TocOut.model_validate(toc)


_CORPUS_TOC_DOCUMENTS = 200


def _corpus_toc(service: Service, corpus: str) -> TocOut:
    """Every document of ``corpus`` (up to 200) with the top two levels of its headings."""
    idx = service.index
    service.guard.check_read(corpus)
    rows = (
        []
        if service.unindexed(corpus)  # configured, not indexed yet: there, empty
        else idx.list_documents(corpus=corpus, limit=_CORPUS_TOC_DOCUMENTS + 1)
    )
    docs = []
    for row in rows[:_CORPUS_TOC_DOCUMENTS]:
        toc = TocOut.model_validate(idx.toc(row.doc_id, corpus=corpus))
        for node in toc.headings:
            for child in node.children:
                child.children = []
        docs.append(
            DocumentTocOut(
                doc_id=row.doc_id,
                source_path=service.relative_path(corpus, row.source_path),
                structured=toc.structured,
                chunks=toc.chunks,
                headings=toc.headings,
            )
        )
    return TocOut(
        doc_id=None,
        corpus=corpus,
        structured=any(d.structured for d in docs),
        chunks=sum(d.chunks for d in docs),
        headings=[],
        documents=docs,
        more_documents=len(rows) > _CORPUS_TOC_DOCUMENTS,
    )


def _file_size(source_path: str | None) -> int | None:
    if source_path is None:
        return None
    try:
        return os.stat(source_path).st_size
    except OSError:
        return None


def document_named(
    service: Service, doc_id: str | None, alias: str, path: str | None, corpus: str | None
) -> tuple[str, str | None]:
    """``(doc_id, corpus)`` from a doc id or a seed-style path (see Service.document_id)."""
    if path is not None and doc_id is None:
        return service.document_id(path, corpus)
    return one_of("doc_id", doc_id, alias, path), corpus
