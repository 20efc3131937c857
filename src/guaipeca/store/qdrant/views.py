"""Read views over a Qdrant corpus: the document-level catalog reads and the document
frequencies the reranker asks for. They read through the corpus's point access
(:class:`Points`), so they need nothing else from it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from guaipeca.lexical.sparse import term_index
from guaipeca.store import ChunkRow, DocRow
from guaipeca.store.qdrant.connection import qdrant_models as _models
from guaipeca.store.qdrant.payload import DOC_LIST_FIELDS, doc_point_id

if TYPE_CHECKING:
    from qdrant_client import models

__all__ = ["Points", "QdrantCatalog", "QdrantLexical"]


class Points(Protocol):
    """The point access of :class:`~guaipeca.store.qdrant.corpus.QdrantCorpus`."""

    def retrieve(
        self, ids: Sequence[int | str], payload: bool | Sequence[str] = True
    ) -> list[models.Record]: ...

    def scroll(
        self,
        flt: models.Filter | None,
        *,
        payload: bool | Sequence[str] = True,
        vectors: bool | Sequence[str] = False,
    ) -> Iterator[models.Record]: ...

    def count(self, cond: Any, kind: str = "chunk") -> int: ...

    def kind(self, kind: str) -> models.FieldCondition: ...

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]: ...

    def chunk_filter(self, where: Mapping[str, Any] | None) -> models.Filter | bool: ...


class QdrantLexical:
    """Document frequencies for the reranker, from the chunks' ``terms`` payload."""

    def __init__(self, corpus: Points) -> None:
        self._c = corpus

    def doc_freqs(self, tokens: Iterable[str]) -> tuple[int, dict[str, int]]:
        m = _models()
        count = self._c.count
        freqs = {
            t: count(m.FieldCondition(key="terms", match=m.MatchValue(value=term_index(t))))
            for t in set(tokens)
        }
        return count(None), freqs


class QdrantCatalog:
    """Document-level reads; satisfies :class:`~.backend.CatalogReader`."""

    def __init__(self, corpus: Points) -> None:
        self._c = corpus

    def document(self, doc_id: str) -> DocRow | None:
        found = self._c.retrieve([doc_point_id(doc_id)])
        if not found:
            return None
        p = found[0].payload or {}
        return DocRow(
            0,
            str(p["doc_id"]),
            p.get("source_path"),
            str(p["text"]),
            dict(p.get("metadata") or {}),
            int(p["chunk_count"]),
        )

    def document_part(self, doc_id: str, offset: int, limit: int) -> tuple[DocRow, int] | None:
        # Qdrant returns a payload field whole: the text is cut here, after the transfer.
        row = self.document(doc_id)
        if row is None:
            return None
        part = dataclasses.replace(row, text=row.text[offset : offset + limit])
        return part, len(row.text)

    def document_chunks(
        self, doc_id: str, first: int = 0, last: int | None = None
    ) -> list[ChunkRow]:
        found = self._c.retrieve([doc_point_id(doc_id)], payload=["chunk_pks"])
        if not found:
            return []
        pks = list((found[0].payload or {}).get("chunk_pks", []))
        # chunk_pks is in position order and positions count from 0.
        hi = len(pks) if last is None else last + 1
        rows = self._c.rows(pks[max(0, first) : max(0, hi)])
        hi_pos = last if last is not None else 2**62
        return sorted(
            (r for r in rows.values() if first <= r.position <= hi_pos), key=lambda r: r.position
        )

    def page_span(self, doc_id: str) -> tuple[int | None, int | None]:
        rows = self.document_chunks(doc_id)
        pages = [p for r in rows for p in (r.page_start, r.page_end) if p is not None]
        return (min(pages), max(pages)) if pages else (None, None)

    def list_documents(
        self, *, where: Mapping[str, Any] | None, corpus: str, limit: int, offset: int
    ) -> list[tuple[str, str | None, int, int, dict[str, Any]]]:
        m = _models()
        if where:
            flt = self._c.chunk_filter(where)
            if flt is False:
                return []
            assert not isinstance(flt, bool)
            doc_ids = sorted(
                {str((p.payload or {})["doc_id"]) for p in self._c.scroll(flt, payload=["doc_id"])}
            )[offset : offset + limit]
            records = self._c.retrieve([doc_point_id(d) for d in doc_ids], payload=DOC_LIST_FIELDS)
        else:
            records = list(
                self._c.scroll(m.Filter(must=[self._c.kind("doc")]), payload=DOC_LIST_FIELDS)
            )
        rows = sorted(
            (
                (
                    str(p["doc_id"]),
                    p.get("source_path"),
                    int(p["chars"]),
                    int(p["chunk_count"]),
                    dict(p.get("metadata") or {}),
                )
                for p in (r.payload or {} for r in records)
            ),
            key=lambda t: t[0],
        )
        return rows if where else rows[offset : offset + limit]

    def source_states(self) -> list[tuple[str, str | None, str | None, int | None, int | None]]:
        m = _models()
        fields = ["doc_id", "source_path", "source_sha256", "source_size", "source_mtime_ns"]
        records = self._c.scroll(m.Filter(must=[self._c.kind("doc")]), payload=fields)
        out = [
            (
                str(p["doc_id"]),
                p.get("source_path"),
                p.get("source_sha256"),
                p.get("source_size"),
                p.get("source_mtime_ns"),
            )
            for p in (r.payload or {} for r in records)
        ]
        return sorted(out, key=lambda t: t[0])
