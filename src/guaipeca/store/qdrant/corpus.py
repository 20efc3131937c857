"""The Qdrant backend: one corpus per collection, everything (text too) in Qdrant.

Layout of collection ``<collection_prefix><corpus>``:

- one point per chunk, id = ``chunk_pk`` (an integer never reused, as in the embedded
  catalog), with a named dense vector ``dense`` (dot product: the vectors are unit length,
  so it is the cosine the embedded backend computes) and a sparse vector ``bm25`` (IDF
  modifier), and a payload holding the chunk's text, span, heading path, pages and its
  document's fields and metadata (Qdrant has no joins, so filters need them on the chunk);
- one point per document (a UUID derived from its id, no vectors): text, metadata, source
  state and the ids of its chunks in order;
- one meta point (no vectors): model, dimension, language, the next chunk id and the BM25
  length statistics.

BM25 is computed as tantivy does it for the embedded backend (k1=1.2, b=0.75, document
lengths rounded to tantivy's one-byte norms): the sparse value of a term is the BM25
term-frequency part, Qdrant's IDF modifier supplies ``ln(1 + (N - n + 0.5) / (n + 0.5))``,
and the query's values are the term counts. The average length is recorded when a corpus is
first written and refreshed (all sparse vectors rewritten) when it drifts by more than
:data:`AVGDL_DRIFT`, and exactly by ``compact``. Hybrid fusion stays in :class:`Index`, so
it is the same weighted RRF for both backends.

Writes are ordered so a crash leaves no visible damage that a retry does not repair: the
next chunk id is reserved first, then the new chunk points and the document point are
upserted (``wait=True``), then the replaced chunks are deleted; ``compact`` deletes chunk
points that no document lists. One writer per corpus at a time (a lock in this process; with
a shared server, run one indexer).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from guaipeca.errors import ConfigError, ModelError
from guaipeca.lexical import Analyzer
from guaipeca.lexical.sparse import BM25_B, BM25_K1, fieldnorm, term_index
from guaipeca.store import ChunkRow
from guaipeca.store.contract import DenseScan, PreparedDocument, valid_corpus_name
from guaipeca.store.qdrant.connection import Connection
from guaipeca.store.qdrant.connection import qdrant_models as _models
from guaipeca.store.qdrant.filters import PAYLOAD_FIELDS, matches, translate
from guaipeca.store.qdrant.payload import (
    META_ID,
    chunk_payload,
    chunk_row,
    chunk_span,
    doc_fields,
    doc_payload,
    doc_point_id,
)
from guaipeca.store.qdrant.views import QdrantCatalog, QdrantLexical
from guaipeca.types import CorpusStats

if TYPE_CHECKING:
    from qdrant_client import models


__all__ = ["AVGDL_DRIFT", "QdrantCorpus"]

log = logging.getLogger("guaipeca")

F32 = npt.NDArray[np.float32]
T = TypeVar("T")

AVGDL_DRIFT: Final = 0.02  # relative change of the average chunk length that refreshes BM25
FORMAT: Final = 1
_BATCH = 256
_SCROLL = 1000
_FILTER_FIELDS = [
    *PAYLOAD_FIELDS.values(),
    "page_start",
    "page_hi",
    "metadata",
    "corpus",
    "enrichment",
]


class QdrantCorpus:
    """One corpus in a Qdrant collection; satisfies :class:`~.backend.CorpusStore`."""

    def __init__(
        self, backend: Connection, name: str, *, language: str | None, model: str, dim: int
    ) -> None:
        self.name = valid_corpus_name(name)
        self.backend = backend
        self.collection = backend.collection(name)
        self.model = model
        self.dim = dim
        self._lock = threading.Lock()
        self.language = self._check_meta(language, model, dim)
        self.analyzer = Analyzer(self.language)
        self._catalog = QdrantCatalog(self)

    @property
    def catalog(self) -> QdrantCatalog:
        return self._catalog

    @property
    def lexical(self) -> QdrantLexical:
        return QdrantLexical(self)

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.backend.call(getattr(self.backend.client, method), *args, **kwargs)

    def kind(self, kind: str) -> models.FieldCondition:
        m = _models()
        return m.FieldCondition(key="kind", match=m.MatchValue(value=kind))  # type: ignore[no-any-return]

    def scroll(
        self,
        flt: models.Filter | None,
        *,
        payload: bool | Sequence[str] = True,
        vectors: bool | Sequence[str] = False,
    ) -> Iterator[models.Record]:
        """Every point matching ``flt``, in pages."""
        offset: Any = None
        while True:
            points, offset = self._call(
                "scroll",
                self.collection,
                scroll_filter=flt,
                limit=_SCROLL,
                offset=offset,
                with_payload=list(payload) if not isinstance(payload, bool) else payload,
                with_vectors=list(vectors) if not isinstance(vectors, bool) else vectors,
            )
            yield from points
            if offset is None:
                return

    def retrieve(
        self, ids: Sequence[int | str], payload: bool | Sequence[str] = True
    ) -> list[models.Record]:
        out: list[models.Record] = []
        for i in range(0, len(ids), _SCROLL):
            out.extend(
                self._call(
                    "retrieve",
                    self.collection,
                    ids=list(ids[i : i + _SCROLL]),
                    with_payload=list(payload) if not isinstance(payload, bool) else payload,
                )
            )
        return out

    def _upsert(self, points: Sequence[models.PointStruct]) -> None:
        for i in range(0, len(points), _BATCH):
            self._call("upsert", self.collection, points=list(points[i : i + _BATCH]), wait=True)

    def _meta(self) -> dict[str, Any]:
        found = self.retrieve([META_ID])
        return dict(found[0].payload or {}) if found else {}

    def _set_meta(self, values: Mapping[str, Any]) -> None:
        self._call(
            "set_payload", self.collection, payload=dict(values), points=[META_ID], wait=True
        )

    def _create(self, dim: int) -> None:
        m = _models()
        b = self.backend
        self._call(
            "create_collection",
            self.collection,
            vectors_config={"dense": m.VectorParams(size=dim, distance=m.Distance.DOT)},
            sparse_vectors_config={"bm25": m.SparseVectorParams(modifier=m.Modifier.IDF)},
            replication_factor=b.replication_factor,
            shard_number=b.shard_number,
        )
        if b.local:
            return  # local mode has no payload indexes (and warns about them)
        schema = m.PayloadSchemaType
        fields = {
            "kind": schema.KEYWORD,
            "doc_id": schema.KEYWORD,
            "embed_sha256": schema.KEYWORD,
            "terms": schema.INTEGER,
            "source_path": schema.KEYWORD,
            "filename": schema.KEYWORD,
            "extension": schema.KEYWORD,
            "section_id": schema.KEYWORD,
            "heading_path_json": schema.KEYWORD,
            "heading_trail_json": schema.KEYWORD,
            "position": schema.INTEGER,
            "page_start": schema.INTEGER,
            "page_hi": schema.INTEGER,
            "modified": schema.FLOAT,
        }
        for key, kind in fields.items():
            self._call(
                "create_payload_index",
                self.collection,
                field_name=key,
                field_schema=kind,
                wait=True,
            )

    def _check_meta(self, language: str | None, model: str, dim: int) -> str:
        if not self._call("collection_exists", self.collection):
            self._create(dim)
        meta = self._meta()
        if not meta:
            lang = language or "english"
            self._upsert(
                [
                    _models().PointStruct(
                        id=META_ID,
                        vector={},
                        payload={
                            "kind": "meta",
                            "format": FORMAT,
                            "corpus": self.name,
                            "language": lang,
                            "model": model,
                            "dimension": dim,
                            "next_pk": 1,
                            "total_tokens": 0,
                            "total_chunks": 0,
                            "avgdl": None,
                        },
                    )
                ]
            )
            return lang
        if meta.get("model") != model or meta.get("dimension") != dim:
            raise ModelError(
                f"corpus {self.name!r} was indexed with model {meta.get('model')} "
                f"(dimension {meta.get('dimension')}), not {model} (dimension {dim}); "
                "re-index it with 'guaipeca index --force'"
            )
        lang = str(meta.get("language") or "english")
        if language is not None and language != lang:
            raise ConfigError(
                f"corpus {self.name!r} was indexed in language {lang!r}, not {language!r}; "
                "re-index it with 'guaipeca index --force' to change its language"
            )
        return lang

    # -- BM25 -----------------------------------------------------------------------------
    def _sparse(self, tokens: Sequence[str], avgdl: float) -> models.SparseVector:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * fieldnorm(len(tokens)) / avgdl)
        weights: dict[int, float] = {}
        for term, tf in Counter(tokens).items():
            idx = term_index(term)
            weights[idx] = weights.get(idx, 0.0) + tf * (BM25_K1 + 1) / (tf + norm)
        ordered = sorted(weights)
        return _models().SparseVector(  # type: ignore[no-any-return]
            indices=ordered, values=[weights[i] for i in ordered]
        )

    def _refresh_bm25(self, avgdl: float) -> None:
        """Rewrite every chunk's sparse vector with a new average length."""
        m = _models()
        batch: list[Any] = []
        for point in self.scroll(m.Filter(must=[self.kind("chunk")]), payload=["text"]):
            tokens = self.analyzer.tokens(str((point.payload or {}).get("text", "")))
            batch.append(m.PointVectors(id=point.id, vector={"bm25": self._sparse(tokens, avgdl)}))
            if len(batch) >= _BATCH:
                self._call("update_vectors", self.collection, points=batch, wait=True)
                batch = []
        if batch:
            self._call("update_vectors", self.collection, points=batch, wait=True)

    # -- writes ---------------------------------------------------------------------------
    def known_vectors(self, hashes: Iterable[str]) -> dict[str, F32]:
        wanted = sorted(set(hashes))
        m = _models()
        out: dict[str, F32] = {}
        for i in range(0, len(wanted), _SCROLL):
            flt = m.Filter(
                must=[
                    self.kind("chunk"),
                    m.FieldCondition(
                        key="embed_sha256", match=m.MatchAny(any=wanted[i : i + _SCROLL])
                    ),
                ]
            )
            for p in self.scroll(flt, payload=["embed_sha256"], vectors=["dense"]):
                h = str((p.payload or {})["embed_sha256"])
                vec = p.vector["dense"] if isinstance(p.vector, dict) else None
                if h not in out and vec is not None:
                    out[h] = np.asarray(vec, dtype=np.float32)
        return out

    def stored_signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        found = self.retrieve(
            [doc_point_id(doc_id)], payload=["text_sha256", "metadata", "source_path"]
        )
        if not found:
            return None
        p = found[0].payload or {}
        return str(p["text_sha256"]), dict(p.get("metadata") or {}), p.get("source_path")

    def write(
        self, docs: Sequence[PreparedDocument], *, keys: Sequence[Sequence[int]] | None = None
    ) -> None:
        """Insert or replace documents (see the module docstring for the order).

        ``keys`` gives each document's chunk ids (a migration keeps them); by default new
        ids are allocated.
        """
        if not docs:
            return
        m = _models()
        with self._lock:
            meta = self._meta()
            olds = {
                str((r.payload or {})["doc_id"]): r.payload or {}
                for r in self.retrieve(
                    [doc_point_id(d.doc_id) for d in docs],
                    payload=["doc_id", "chunk_pks", "tokens"],
                )
            }
            next_pk = int(meta["next_pk"])
            tokens = [[self.analyzer.tokens(c.text) for c in d.chunks] for d in docs]
            added = sum(len(t) for ts in tokens for t in ts)
            total_tokens = int(meta["total_tokens"]) + added
            total_chunks = int(meta["total_chunks"]) + sum(len(d.chunks) for d in docs)
            for old in olds.values():
                total_tokens -= int(old.get("tokens", 0))
                total_chunks -= len(old.get("chunk_pks", []))
            current = total_tokens / total_chunks if total_chunks else 0.0
            used = meta.get("avgdl")
            # A migration (keys given) presets the exact average of the whole corpus.
            refresh = used is None or (
                keys is None
                and current > 0
                and abs(current - float(used)) > AVGDL_DRIFT * float(used)
            )
            avgdl = (current if refresh else float(used or 0.0)) or 1.0
            count = sum(len(d.chunks) for d in docs)
            if keys is not None:
                given = [pk for ks in keys for pk in ks]
                start = max([next_pk - 1, *given]) + 1
            else:
                start = next_pk + count
            # Reserve the ids first: a crash after this wastes ids, never reuses them.
            self._set_meta({"next_pk": start})
            points, doc_points = self._points(docs, tokens, keys, next_pk, avgdl)
            self._upsert(points)
            self._upsert(doc_points)
            fresh = {int(p.id) for p in points}
            stale = [
                pk for old in olds.values() for pk in old.get("chunk_pks", []) if pk not in fresh
            ]
            for i in range(0, len(stale), _SCROLL):
                self._call(
                    "delete",
                    self.collection,
                    points_selector=m.PointIdsList(points=stale[i : i + _SCROLL]),
                    wait=True,
                )
            self._set_meta(
                {
                    "total_tokens": total_tokens,
                    "total_chunks": total_chunks,
                    "avgdl": avgdl if refresh else used,
                }
            )
            if refresh and used is not None:
                log.info("corpus %s: average chunk length moved; refreshing BM25", self.name)
                self._refresh_bm25(avgdl)

    def _points(
        self,
        docs: Sequence[PreparedDocument],
        tokens: list[list[list[str]]],
        keys: Sequence[Sequence[int]] | None,
        next_pk: int,
        avgdl: float,
    ) -> tuple[list[Any], list[Any]]:
        """The chunk points and document points of a write (ids from ``keys`` or from
        ``next_pk`` on)."""
        m = _models()
        points: list[Any] = []
        doc_points: list[Any] = []
        for n, (doc, toks) in enumerate(zip(docs, tokens, strict=True)):
            if keys is not None:
                pks = [int(k) for k in keys[n]]
            else:
                pks = list(range(next_pk, next_pk + len(doc.chunks)))
                next_pk += len(doc.chunks)
            base = doc_fields(doc)
            base["corpus"] = self.name
            enrichments = getattr(doc, "enrichments", ()) or ()
            for i, (chunk, pk) in enumerate(zip(doc.chunks, pks, strict=True)):
                payload = chunk_payload(base, chunk, doc.embed_hashes[i])
                payload["terms"] = sorted({term_index(t) for t in toks[i]})
                if i < len(enrichments) and enrichments[i][0]:
                    payload["enrichment"] = json.loads(enrichments[i][0])
                vector = {
                    "dense": doc.vectors[i].astype(np.float32).tolist(),
                    "bm25": self._sparse(toks[i], avgdl),
                }
                points.append(m.PointStruct(id=pk, vector=vector, payload=payload))
            payload = doc_payload(base, doc, pks, sum(len(t) for t in toks))
            doc_points.append(
                m.PointStruct(id=doc_point_id(doc.doc_id), vector={}, payload=payload)
            )
        return points, doc_points

    def preset_avgdl(self, avgdl: float) -> None:
        """Fix the BM25 average chunk length before a migration writes (its exact value)."""
        with self._lock:
            self._set_meta({"avgdl": avgdl if avgdl > 0 else None})

    def first_chunk_ids(self) -> dict[str, int]:
        """Each document's first chunk id (0 for a document without chunks)."""
        m = _models()
        out: dict[str, int] = {}
        for r in self.scroll(m.Filter(must=[self.kind("doc")]), payload=["doc_id", "chunk_pks"]):
            p = r.payload or {}
            pks = p.get("chunk_pks") or [0]
            out[str(p["doc_id"])] = int(pks[0])
        return out

    def export_documents(self, doc_ids: Sequence[str]) -> list[tuple[PreparedDocument, list[int]]]:
        """Documents as stored, with their chunks' vectors and ids (for migration)."""
        out = []
        for doc in self.retrieve([doc_point_id(d) for d in doc_ids]):
            p = doc.payload or {}
            pks = [int(k) for k in p.get("chunk_pks", [])]
            points = {
                int(r.id): r
                for i in range(0, len(pks), _SCROLL)
                for r in self._call(
                    "retrieve",
                    self.collection,
                    ids=pks[i : i + _SCROLL],
                    with_payload=True,
                    with_vectors=["dense"],
                )
            }
            chunks = [points[k] for k in pks]
            rows = [chunk_row(k, c.payload or {}) for k, c in zip(pks, chunks, strict=True)]
            vectors = [c.vector["dense"] if isinstance(c.vector, dict) else [] for c in chunks]
            prepared = PreparedDocument(
                doc_id=str(p["doc_id"]),
                text=str(p["text"]),
                text_sha256=str(p["text_sha256"]),
                metadata=dict(p.get("metadata") or {}),
                source_path=p.get("source_path"),
                modified=p.get("modified"),
                chunks=[chunk_span(r) for r in rows],
                embed_hashes=[str((c.payload or {})["embed_sha256"]) for c in chunks],
                vectors=np.asarray(vectors, dtype=np.float32).reshape(len(pks), self.dim),
                source_state=(
                    p.get("source_sha256"),
                    p.get("source_size"),
                    p.get("source_mtime_ns"),
                ),
            )
            out.append((prepared, pks))
        return out

    def delete(self, doc_ids: Sequence[str]) -> int:
        m = _models()
        with self._lock:
            found = self.retrieve(
                [doc_point_id(d) for d in doc_ids], payload=["chunk_pks", "tokens"]
            )
            if not found:
                return 0
            meta = self._meta()
            pks = [pk for r in found for pk in (r.payload or {}).get("chunk_pks", [])]
            tokens = sum(int((r.payload or {}).get("tokens", 0)) for r in found)
            ids: list[Any] = [*pks, *(r.id for r in found)]
            for i in range(0, len(ids), _SCROLL):
                self._call(
                    "delete",
                    self.collection,
                    points_selector=m.PointIdsList(points=ids[i : i + _SCROLL]),
                    wait=True,
                )
            self._set_meta(
                {
                    "total_tokens": int(meta["total_tokens"]) - tokens,
                    "total_chunks": int(meta["total_chunks"]) - len(pks),
                }
            )
            return len(found)

    def _setdoc_fields(self, doc_id: str, doc: dict[str, Any], chunks: dict[str, Any]) -> bool:
        m = _models()
        with self._lock:
            if not self.retrieve([doc_point_id(doc_id)], payload=["doc_id"]):
                return False
            flt = m.Filter(
                must=[
                    self.kind("chunk"),
                    m.FieldCondition(key="doc_id", match=m.MatchValue(value=doc_id)),
                ]
            )
            if chunks:
                self._call("set_payload", self.collection, payload=chunks, points=flt, wait=True)
            self._call(
                "set_payload",
                self.collection,
                payload=doc,
                points=[doc_point_id(doc_id)],
                wait=True,
            )
            return True

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool:
        doc = {
            "source_sha256": state[0],
            "source_size": state[1],
            "source_mtime_ns": state[2],
            "modified": modified,
        }
        return self._setdoc_fields(doc_id, doc, {"modified": modified})

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        value = {"metadata": dict(metadata)}
        return self._setdoc_fields(doc_id, value, value)

    def compact(self) -> None:
        """Drop chunk points no document lists; recount lengths and rewrite BM25 exactly."""
        m = _models()
        with self._lock:
            live: set[int] = set()
            tokens = 0
            for r in self.scroll(
                m.Filter(must=[self.kind("doc")]), payload=["chunk_pks", "tokens"]
            ):
                live.update((r.payload or {}).get("chunk_pks", []))
                tokens += int((r.payload or {}).get("tokens", 0))
            orphans = [
                p.id
                for p in self.scroll(m.Filter(must=[self.kind("chunk")]), payload=False)
                if p.id not in live
            ]
            for i in range(0, len(orphans), _SCROLL):
                self._call(
                    "delete",
                    self.collection,
                    points_selector=m.PointIdsList(points=orphans[i : i + _SCROLL]),
                    wait=True,
                )
            avgdl = tokens / len(live) if live else None
            self._set_meta({"total_tokens": tokens, "total_chunks": len(live), "avgdl": avgdl})
            if avgdl:
                self._refresh_bm25(avgdl)

    # -- reads ----------------------------------------------------------------------------
    def chunk_filter(self, where: Mapping[str, Any] | None) -> models.Filter | bool:
        """The Qdrant filter for ``where`` on chunks; False when nothing can match.

        Filters Qdrant cannot express exactly are completed here: the superset it can
        express is scrolled and each candidate checked with :func:`matches`.
        """
        m = _models()
        t = translate(where, self.name)
        if t.cond is False:
            return False
        if t.exact:
            inner = t.as_filter()
            exact: models.Filter = m.Filter(must=[self.kind("chunk"), *([inner] if inner else [])])
            return exact
        pre = t.as_filter()
        flt = m.Filter(must=[self.kind("chunk"), *([pre] if pre else [])])
        ids = [
            p.id
            for p in self.scroll(flt, payload=_FILTER_FIELDS)
            if matches(where, p.payload or {})
        ]
        if not ids:
            return False
        allowed: models.Filter = m.Filter(must=[m.HasIdCondition(has_id=ids)])
        return allowed

    def _top(
        self, using: str, query: Any, n: int, where: Mapping[str, Any] | None
    ) -> list[tuple[int, float]]:
        flt = self.chunk_filter(where)
        if isinstance(flt, bool):
            return []
        m = _models()
        params = None if self.backend.local else m.SearchParams(exact=self.backend.exact)
        limit = n + 8
        while True:
            points = self._call(
                "query_points",
                self.collection,
                query=query,
                using=using,
                query_filter=flt,
                limit=limit,
                with_payload=False,
                search_params=params,
            ).points
            # Ties at the cut-off are broken by the smaller id, as the embedded backend
            # does: fetch until the last point scores below the n-th.
            if len(points) < limit or points[-1].score < points[n - 1].score:
                break
            limit *= 2
        ranked = sorted(((int(p.id), float(p.score)) for p in points), key=lambda t: (-t[1], t[0]))
        return ranked[:n]

    def dense(
        self,
        query: F32,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        scan: DenseScan = "exact",  # Qdrant's own HNSW/exact choice applies; the hint is unused
    ) -> list[tuple[int, float]]:
        if n <= 0:
            return []
        return self._top("dense", np.asarray(query, dtype=np.float32).tolist(), n, where)

    def keyword(
        self,
        query: str,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        phrase_weight: float = 0.0,  # a sparse vector keeps no word positions: unused
    ) -> list[tuple[int, float]]:
        if n <= 0:
            return []
        counts: dict[int, float] = {}
        for term, count in Counter(self.analyzer.tokens(query)).items():
            idx = term_index(term)
            counts[idx] = counts.get(idx, 0.0) + count
        if not counts:
            return []
        ordered = sorted(counts)
        vector = _models().SparseVector(indices=ordered, values=[counts[i] for i in ordered])
        hits = self._top("bm25", vector, n, where)
        return [(pk, score) for pk, score in hits if score > 0]

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        wanted = [int(pk) for pk in chunk_pks if int(pk) > 0]
        out: dict[int, ChunkRow] = {}
        for r in self.retrieve(wanted):
            p = r.payload or {}
            if p.get("kind") == "chunk":
                out[int(r.id)] = chunk_row(int(r.id), p)
        return out

    def count(self, cond: Any, kind: str = "chunk") -> int:
        m = _models()
        must = [self.kind(kind), *([cond] if cond is not None else [])]
        return int(
            self._call("count", self.collection, count_filter=m.Filter(must=must), exact=True).count
        )

    def stats(self) -> CorpusStats:
        chunks = self.count(None)
        docs = self.count(None, "doc")
        return CorpusStats(
            name=self.name,
            language=self.language,
            documents=int(docs),
            chunks=int(chunks),
            deleted_slots=0,
            vector_bytes=int(chunks) * self.dim * 4,
            catalog_bytes=0,
            lexical_bytes=0,
        )

    def release_memory(self) -> None:
        """Nothing mapped here: the vectors live in Qdrant."""

    def close(self) -> None:
        """Nothing to release per corpus: the backend owns the client."""
