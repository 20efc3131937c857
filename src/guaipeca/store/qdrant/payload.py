"""What the Qdrant backend stores in a point's payload, and how it reads it back.

Point ids: a chunk point's id is its ``chunk_pk``; a document point's id is a UUID derived
from its doc id (:func:`doc_point_id`); the meta point has a fixed UUID (:data:`META_ID`).
The layout of each kind of payload is described in :mod:`guaipeca.store.qdrant.corpus`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from guaipeca.store import ChunkRow
from guaipeca.store.contract import PreparedDocument
from guaipeca.types import ChunkLocation, ChunkSpan, location_of

__all__ = [
    "DOC_LIST_FIELDS",
    "META_ID",
    "chunk_payload",
    "chunk_row",
    "chunk_span",
    "doc_fields",
    "doc_payload",
    "doc_point_id",
]

_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://guaipeca.invalid/qdrant")
META_ID = str(uuid.uuid5(_NS, "meta"))
#: The document payload fields a listing reads.
DOC_LIST_FIELDS = ["doc_id", "source_path", "chars", "chunk_count", "metadata"]


def doc_point_id(doc_id: str) -> str:
    return str(uuid.uuid5(_NS, "doc:" + doc_id))


def doc_fields(doc: PreparedDocument) -> dict[str, Any]:
    filename = extension = None
    if doc.source_path:
        filename = Path(doc.source_path).name
        extension = Path(filename).suffix.lower() or None
    return {
        "doc_id": doc.doc_id,
        "source_path": doc.source_path,
        "filename": filename,
        "extension": extension,
        "modified": doc.modified,
        "metadata": dict(doc.metadata),
    }


def chunk_payload(
    base: Mapping[str, Any], chunk: ChunkLocation, embed_sha256: str
) -> dict[str, Any]:
    heading = list(chunk.heading_path)
    return {
        **base,
        "kind": "chunk",
        "position": chunk.position,
        "start": chunk.start,
        "end": chunk.end,
        "text": chunk.text,
        "heading_path": heading,
        "heading_path_json": json.dumps(heading, ensure_ascii=False),
        "heading_trail": list(chunk.heading_trail or heading),
        "heading_trail_json": json.dumps(list(chunk.heading_trail or heading), ensure_ascii=False),
        "table_header": chunk.table_header,
        "section_id": chunk.section_id,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "page_hi": chunk.page_end if chunk.page_end is not None else chunk.page_start,
        "embed_sha256": embed_sha256,
    }


def chunk_span(row: ChunkRow) -> ChunkSpan:
    return ChunkSpan(**location_of(row))


def chunk_row(pk: int, p: Mapping[str, Any]) -> ChunkRow:
    return ChunkRow(
        chunk_pk=pk,
        doc_id=str(p["doc_id"]),
        position=int(p["position"]),
        start=int(p["start"]),
        end=int(p["end"]),
        heading_path=tuple(p.get("heading_path") or ()),
        section_id=str(p["section_id"]),
        page_start=p.get("page_start"),
        page_end=p.get("page_end"),
        slot=pk,
        text=str(p["text"]),
        source_path=p.get("source_path"),
        metadata=dict(p.get("metadata") or {}),
        # Points written before heading trails existed: the two-level path.
        heading_trail=tuple(p.get("heading_trail") or p.get("heading_path") or ()),
        table_header=p.get("table_header"),
    )


def doc_payload(
    base: Mapping[str, Any], doc: PreparedDocument, chunk_pks: Sequence[int], tokens: int
) -> dict[str, Any]:
    """A document point's payload: its text, source state and its chunks' ids in order."""
    return {
        **base,
        "kind": "doc",
        "text": doc.text,
        "text_sha256": doc.text_sha256,
        "chars": len(doc.text),
        "chunk_count": len(doc.chunks),
        "chunk_pks": list(chunk_pks),
        "tokens": tokens,
        "source_sha256": doc.source_state[0],
        "source_size": doc.source_state[1],
        "source_mtime_ns": doc.source_state[2],
    }
