"""The library facade: ``Index`` adds, searches, reads and maintains named corpora.

Layout on disk: ``<path>/corpora/<name>/`` holds one corpus (catalog, vectors, lexical
index). ``Index()`` with no path keeps everything in memory, with the same code paths and
identical rankings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from . import agentic
from ._memory import trim_c_heap
from .chunk import canonicalize, chunk_text
from .config import EngineSettings
from .embed import CachedEmbedder, Embedder, QueryCache, default_embedder, embedding_input
from .enrich import Enrichment
from .enrich.llm import LLMEnricher
from .enrich.pipeline import LLMCache, llm_pass, local_pass, stored_form
from .errors import (
    ConfigError,
    GuaipecaError,
    IndexCorruptError,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
)
from .search.backend import Backend, BackendUnavailableError, CorpusStore
from .search.corpus import Corpus, PreparedDocument, valid_corpus_name
from .search.fusion import weighted_rrf
from .search.rerank import Candidate, bm25_idf, lexical_rerank
from .search.snippet import make_snippet
from .store import Catalog, ChunkRow, validate_where
from .types import (
    RETURN_MODES,
    SEARCH_MODES,
    AddReport,
    Chunk,
    ChunkSpan,
    Document,
    DocumentInfo,
    Hit,
    IndexStats,
    NewDocument,
    ReturnMode,
    ScoreParts,
    SearchMode,
    SourceState,
)

if TYPE_CHECKING:
    from .verify import CheckReport

__all__ = ["Index"]

MAX_QUERY_CHARS = 8192
MAX_TOP_K = 1000
MAX_DOC_ID_CHARS = 1024
_WRITE_BATCH_CHUNKS = 2048
_REDISCOVER_SECONDS = 10.0


class Index:
    """Hybrid search over named corpora of documents.

    Args:
        path: a folder to keep the index in (created if missing), or None for memory only.
        embedder: any :class:`~guaipeca.embed.Embedder`; default: the bundled MiniLM int8.
        settings: chunking, embedding and search settings (:class:`EngineSettings`).
        language: language of new corpora (Snowball name, e.g. "english", "portuguese").
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | None = None,
        settings: EngineSettings | None = None,
        language: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.settings = settings or EngineSettings()
        self.language = language or self.settings.language
        self.path = Path(path).expanduser() if path is not None else None
        base = embedder if embedder is not None else self._default_embedder()
        emb = self.settings.embedding
        self.embedder: Embedder = (
            CachedEmbedder(base, QueryCache(emb.cache_max_entries, emb.cache_ttl_seconds))
            if emb.cache_max_entries > 0
            else base
        )
        self._base_name = base.name
        self._corpora: dict[str, CorpusStore] = {}
        # None: corpora are files under path (embedded); else e.g. a Qdrant server.
        self._backend = backend
        self._weights: dict[str, float] = {}
        # Corpora that exist on disk but cannot be used as they are (another model, a
        # damaged file): the error is raised when one is used, and drop_corpus clears it.
        self._broken: dict[str, GuaipecaError] = {}
        self._lock = threading.Lock()
        self._llm: LLMEnricher | None = None  # built on first use when enrich.url is set
        # While a backend server is down: why, and when discovery was last tried.
        self._backend_down: tuple[BackendUnavailableError, float] | None = None
        if backend is not None:
            self._discover()
        elif self.path is not None:
            (self.path / "corpora").mkdir(parents=True, exist_ok=True)
            for folder in sorted((self.path / "corpora").iterdir()):
                if folder.name.startswith("."):
                    continue
                # lexical.state too: a corpus whose catalog was lost must show as broken.
                if (folder / "catalog.sqlite").exists() or (folder / "lexical.state").exists():
                    try:
                        self._open_corpus(folder.name, None)
                    except (ModelError, IndexCorruptError, ConfigError) as exc:
                        self._broken[folder.name] = exc

    def _default_embedder(self) -> Embedder:
        emb = self.settings.embedding
        return default_embedder(threads=emb.threads, batch_size=emb.batch_size)

    # -- corpora -----------------------------------------------------------------------
    def _open_corpus(self, name: str, language: str | None) -> CorpusStore:
        if self._backend is not None:
            store = self._backend.open_corpus(
                name, language=language, model=self._base_name, dim=self.embedder.dimension
            )
            self._corpora[name] = store
            self._weights.setdefault(name, 1.0)
            return store
        folder = self.path / "corpora" / name if self.path is not None else None
        corpus = Corpus(
            name,
            folder,
            language=language,
            model=self._base_name,
            dim=self.embedder.dimension,
            reembed=self._reembed,
        )
        self._corpora[name] = corpus
        self._weights.setdefault(name, 1.0)
        return corpus

    def create_corpus(
        self, name: str, *, language: str | None = None, weight: float | None = None
    ) -> None:
        """Open or create a corpus; ``weight`` multiplies its scores when corpora merge."""
        valid_corpus_name(name)
        with self._lock:
            if name in self._broken:
                raise self._broken[name]
            if name not in self._corpora:
                self._open_corpus(name, language or self.language)
            elif language is not None and language != self._corpora[name].language:
                self._corpora[name].close()
                del self._corpora[name]
                self._open_corpus(name, language)  # raises ConfigError naming both
        if weight is not None:
            self.set_corpus_weight(name, weight)

    def set_corpus_weight(self, name: str, weight: float) -> None:
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise InvalidArgumentError(f"corpus weight must be a number >= 0, not {weight!r:.40}")
        self._corpus(name)
        self._weights[name] = float(weight)

    def _discover(self) -> None:
        """Open the backend's corpora; when it is down, remember why (retried later)."""
        assert self._backend is not None
        try:
            for name in self._backend.corpus_names():
                if name in self._corpora:
                    continue
                try:
                    self._open_corpus(name, None)
                except (ModelError, IndexCorruptError, ConfigError) as exc:
                    self._broken[name] = exc
        except BackendUnavailableError as exc:
            self._backend_down = (exc, time.monotonic())
        else:
            self._backend_down = None

    @property
    def backend_error(self) -> str | None:
        """Why the storage backend cannot be reached, or None (always None when embedded)."""
        if self._backend is None:
            return None
        try:
            self._backend.check()
        except BackendUnavailableError as exc:
            return str(exc)
        if self._backend_down is not None:
            self._discover()
        return None

    @property
    def corpora(self) -> list[str]:
        """Names of the usable corpora."""
        down = self._backend_down
        if down is not None and time.monotonic() - down[1] > _REDISCOVER_SECONDS:
            self._discover()  # the server was down when the index was opened
        return sorted(self._corpora)

    @property
    def broken_corpora(self) -> dict[str, str]:
        """Corpora on disk that cannot be opened, with the reason (re-index with force)."""
        return {name: str(exc) for name, exc in sorted(self._broken.items())}

    def _corpus(self, name: str) -> CorpusStore:
        try:
            return self._corpora[name]
        except KeyError:
            if name in self._broken:
                raise self._broken[name] from None
            if self._backend_down is not None:  # its corpora could not be listed
                raise self._backend_down[0] from None
            known = ", ".join(sorted(self._corpora)) or "none yet"
            raise NotFoundError(f"no corpus named {name!r:.70} (corpora: {known})") from None

    def _embedded(self, name: str) -> Corpus:
        """A corpus of the embedded backend (for checks that read its files)."""
        store = self._corpus(name)
        if not isinstance(store, Corpus):
            raise InvalidArgumentError(
                f"corpus {name!r} is stored in {self._backend.name if self._backend else '?'}; "
                "this check reads the embedded backend's files"
            )
        return store

    def _ensure_corpus(self, name: str) -> CorpusStore:
        if name not in self._corpora:
            self.create_corpus(name)
        return self._corpora[name]

    # -- writing -----------------------------------------------------------------------
    def add_documents(
        self,
        docs: Mapping[str, str] | Iterable[NewDocument],
        metadata: Mapping[str, Any] | None = None,
        *,
        corpus: str = "default",
    ) -> AddReport:
        """Insert or replace documents; unchanged ones are skipped, unchanged chunks reuse
        their vectors.

        ``docs`` is ``{doc_id: text}`` or :class:`NewDocument` items (with per-document
        metadata, which is merged over ``metadata``).

        Raises:
            InvalidArgumentError: an id, text or metadata value is unusable.
        """
        shared = _check_metadata(metadata or {})
        items = _as_new_documents(docs, shared)
        store = self._ensure_corpus(corpus)
        counts = {"added": 0, "replaced": 0, "unchanged": 0, "metadata_updated": 0}
        chunk_totals = {"chunks": 0, "embedded": 0, "reused": 0}
        pending: list[_Pending] = []
        pending_chunks = 0
        for item in items:
            text = canonicalize(item.text)
            sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
            stored = store.stored_signature(item.doc_id)
            if stored is not None and stored[0] == sha and stored[2] == item.source_path:
                if item.source_sha256 is not None:
                    store.set_source_state(item.doc_id, _source_state(item), item.modified)
                if stored[1] == item.metadata:
                    counts["unchanged"] += 1
                else:
                    store.update_metadata(item.doc_id, item.metadata)
                    counts["metadata_updated"] += 1
                continue
            counts["replaced" if stored is not None else "added"] += 1
            prepared = self._prepare(corpus, item, text, sha)
            pending.append(prepared)
            pending_chunks += len(prepared.chunks)
            if pending_chunks >= _WRITE_BATCH_CHUNKS:
                self._flush(store, pending, chunk_totals)
                pending, pending_chunks = [], 0
        self._flush(store, pending, chunk_totals)
        return AddReport(
            added=counts["added"],
            replaced=counts["replaced"],
            unchanged=counts["unchanged"],
            metadata_updated=counts["metadata_updated"],
            chunks=chunk_totals["chunks"],
            chunks_embedded=chunk_totals["embedded"],
            chunks_reused=chunk_totals["reused"],
        )

    def _prepare(self, corpus: str, item: NewDocument, text: str, sha: str) -> _Pending:
        chunking = self.settings.chunking
        page_starts = _canonical_page_starts(item.text, item.page_starts)
        chunks = chunk_text(
            text,
            doc_key=f"{corpus}/{item.doc_id}",
            max_size=chunking.max_size,
            page_starts=page_starts,
        )
        inputs, hashes = self._embedding_inputs(chunks)
        pending = _Pending(item, text, sha, chunks, inputs, hashes)
        # Local enrichment (§8.1): keywords, entities, dates per chunk, no LLM.
        language = self._corpora[corpus].language if corpus in self._corpora else self.language
        pending.enrichments = local_pass([c.text for c in chunks], language, self.settings.enrich)
        return pending

    def _embedding_inputs(
        self, chunks: Sequence[ChunkSpan | ChunkRow]
    ) -> tuple[list[str], list[str]]:
        """What is embedded for each chunk of one document, in order, and its hash."""
        chunking, emb = self.settings.chunking, self.settings.embedding
        inputs: list[str] = []
        for i, c in enumerate(chunks):
            context = ""
            if chunking.overlap and i and chunks[i - 1].section_id == c.section_id:
                context = chunks[i - 1].text[-chunking.overlap :]
            inputs.append(
                embedding_input(
                    c.text,
                    c.heading_path,
                    preprocess=emb.preprocess,
                    max_chars=emb.preprocess_chars,
                    context=context,
                )
            )
        salt = self._base_name + "\x00"
        hashes = [hashlib.sha256((salt + s).encode("utf-8")).hexdigest() for s in inputs]
        return inputs, hashes

    def _reembed(self, catalog: Catalog, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for stored chunks, embedded again from the catalog's text — only those
        whose embedding input rebuilds to the very hash stored (same model and settings)."""
        wanted = set(hashes)
        docs = sorted({d for places in catalog.hash_positions(wanted).values() for d, _ in places})
        inputs: dict[str, str] = {}
        for doc_id in docs:
            texts, found = self._embedding_inputs(catalog.document_chunks(doc_id))
            inputs.update((h, t) for h, t in zip(found, texts, strict=True) if h in wanted)
        out: dict[str, np.ndarray] = {}
        keys = list(inputs)
        for i in range(0, len(keys), 256):
            part = keys[i : i + 256]
            vectors = self.embedder.embed_passages([inputs[h] for h in part])
            out.update(zip(part, np.asarray(vectors, dtype=np.float32), strict=True))
        return out

    def _flush(self, store: CorpusStore, pending: list[_Pending], totals: dict[str, int]) -> None:
        if not pending:
            return
        self._llm_enrich(store, pending)
        known = store.known_vectors(h for p in pending for h in p.hashes)
        missing: dict[str, str] = {}
        for p in pending:
            for h, s in zip(p.hashes, p.inputs, strict=True):
                if h not in known:
                    missing.setdefault(h, s)
        if missing:
            vectors = self.embedder.embed_passages(list(missing.values()))
            known.update(zip(missing.keys(), vectors, strict=True))
        dim = self.embedder.dimension
        docs = []
        for p in pending:
            vecs = (
                np.vstack([known[h] for h in p.hashes]).astype(np.float32)
                if p.hashes
                else np.zeros((0, dim), dtype=np.float32)
            )
            docs.append(
                PreparedDocument(
                    doc_id=p.item.doc_id,
                    text=p.text,
                    text_sha256=p.sha,
                    metadata=p.item.metadata,
                    source_path=p.item.source_path,
                    modified=p.item.modified,
                    chunks=p.chunks,
                    embed_hashes=p.hashes,
                    vectors=vecs,
                    source_state=_source_state(p.item),
                    enrichments=stored_form(p.enrichments),
                )
            )
            totals["chunks"] += len(p.chunks)
        totals["embedded"] += len(missing)
        totals["reused"] += sum(len(p.hashes) for p in pending) - len(missing)
        store.write(docs)

    def _llm_enrich(self, store: CorpusStore, pending: list[_Pending]) -> None:
        """Optional LLM enrichment (§8.2) of a batch before it is embedded. It cannot fail
        indexing: chunks the endpoint could not enrich keep their local enrichment."""
        settings = self.settings.enrich
        if settings.url is None:
            return
        with self._lock:
            if self._llm is None:
                self._llm = LLMEnricher.from_settings(settings)
        items = [
            (c.text, c.heading_path, p.enrichments[i] if p.enrichments else None)
            for p in pending
            for i, c in enumerate(p.chunks)
        ]
        cache = store.catalog if isinstance(store.catalog, LLMCache) else None
        results = iter(llm_pass(self._llm, cache, items))
        salt = self._base_name + "\x00"
        for p in pending:
            p.enrichments = [next(results) for _ in p.chunks]
            for i, e in enumerate(p.enrichments):
                extra = e.embedding_text() if settings.embed and e is not None else ""
                if extra:  # embedded with the text: the hash must say so
                    p.inputs[i] = f"{p.inputs[i]}\n\n{extra}"
                    p.hashes[i] = hashlib.sha256((salt + p.inputs[i]).encode()).hexdigest()

    def update_metadata(
        self,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        corpus: str | None = None,
        merge: bool = True,
    ) -> None:
        """Change a document's metadata without re-embedding (``merge=False`` replaces it).

        Raises:
            NotFoundError: no such document.
        """
        new = _check_metadata(metadata)
        store = self._find_doc_corpus(doc_id, corpus)
        sig = store.stored_signature(doc_id)
        if sig is None:  # deleted meanwhile
            raise NotFoundError(f"no document {doc_id!r:.80}")
        store.update_metadata(doc_id, {**sig[1], **new} if merge else new)

    def delete_document(self, doc_id: str, *, corpus: str | None = None) -> bool:
        """Delete one document. Returns False when it did not exist."""
        try:
            store = self._find_doc_corpus(doc_id, corpus)
        except NotFoundError:
            return False
        return store.delete([doc_id]) > 0

    def source_states(self, corpus: str) -> list[SourceState]:
        """What the index knows of each document's source file (for incremental indexing)."""
        return [SourceState(*row) for row in self._corpus(corpus).catalog.source_states()]

    def drop_corpus(self, name: str) -> None:
        """Delete a corpus and everything in it (even one that cannot be opened)."""
        valid_corpus_name(name)
        with self._lock:
            corpus = self._corpora.pop(name, None)
            self._broken.pop(name, None)
            if corpus is not None:
                corpus.close()
            if self._backend is not None:
                self._backend.drop_corpus(name)
            elif self.path is not None:
                folder = self.path / "corpora" / name
                if folder.exists():
                    # Rename first: a crash mid-delete must not leave a half corpus behind.
                    doomed = folder.with_name(f".{name}.dropped")
                    shutil.rmtree(doomed, ignore_errors=True)
                    folder.rename(doomed)
                    shutil.rmtree(doomed, ignore_errors=True)

    def compact(self, corpus: str | None = None) -> None:
        """Reclaim space left by deletes and refresh BM25 statistics."""
        for name in [corpus] if corpus else self.corpora:
            self._corpus(name).compact()

    # -- searching ---------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        mode: SearchMode | None = None,
        where: Mapping[str, Any] | None = None,
        corpora: Sequence[str] | None = None,
        candidates: int | None = None,
        rrf_k: float | None = None,
        dense_weight: float | None = None,
        bm25_weight: float | None = None,
        return_mode: ReturnMode = "chunks",
        section_mode: bool = False,
        section_filter: str | None = None,
        rerank: bool | None = None,
        top_k_before: int | None = None,
        toc_rerank: bool | None = None,
    ) -> list[Hit]:
        """Search the corpora; returns up to ``top_k`` hits, best first.

        ``rerank`` (default ``search.rerank``, which applies to hybrid searches) re-orders the
        best ``top_k_before`` candidates (default ``search.top_k_before``) by query-term
        coverage and proximity;
        ``toc_rerank`` (default ``search.toc_rerank``) also favours chunks whose heading path
        holds the query's terms. ``top_k`` is the count after reranking.

        ``section_mode`` returns one hit per ``##`` section (its best chunk's score) whose
        text is the whole section. ``return_mode="documents"`` returns one hit per document
        (its best chunk's score) whose text is the whole document; ``"auto"`` does that when
        the matched documents together fit in ``search.max_chars`` characters, else returns
        chunks. ``section_filter`` restricts the search to one section id, or to a heading
        path prefix written ``"Title > Section"``.

        Raises:
            InvalidArgumentError: empty or oversized query, bad ``top_k`` or mode.
            InvalidFilterError: a malformed ``where``.
            NotFoundError: an unknown corpus name.
        """
        s = self.settings.search
        mode = mode or s.mode
        top_k = s.top_k if top_k is None else top_k
        depth = candidates or max(s.candidates, top_k)
        k = s.rrf_k if rrf_k is None else rrf_k
        w_dense = s.dense_weight if dense_weight is None else dense_weight
        w_bm25 = s.bm25_weight if bm25_weight is None else bm25_weight
        _check_query(query, top_k, mode, depth, k)
        if return_mode not in RETURN_MODES:
            raise InvalidArgumentError(
                f"return_mode must be one of {', '.join(RETURN_MODES)}, not {return_mode!r:.30}"
            )
        validate_where(where)
        where = _with_section_filter(where, section_filter)
        names = list(corpora) if corpora else self.corpora
        stores = [self._corpus(n) for n in names]
        qvec = self.embedder.embed_query(query) if mode != "keyword" else None
        scored: list[tuple[float, str, int, ScoreParts]] = []
        for store in stores:
            dense = store.dense(qvec, depth, where, scan=s.dense_scan) if qvec is not None else []
            lexical = store.keyword(query, depth, where) if mode != "dense" else []
            parts = _parts(dense, lexical)
            if mode == "hybrid":
                fused = weighted_rrf(
                    [([pk for pk, _ in dense], w_dense), ([pk for pk, _ in lexical], w_bm25)], k=k
                )
            else:
                fused = dense if mode == "dense" else lexical
            weight = self._weights.get(store.name, 1.0)
            scored.extend((score * weight, store.name, pk, parts[pk]) for pk, score in fused)
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        # The configured default reranks fused (hybrid) lists; a single retriever's list keeps
        # its own scores (cosine, BM25) unless the caller asks for reranking explicitly.
        do_rerank = (s.rerank and mode == "hybrid") if rerank is None else rerank
        do_toc = s.toc_rerank if toc_rerank is None else toc_rerank
        if (do_rerank or do_toc) and scored:
            before = s.top_k_before if top_k_before is None else top_k_before
            if isinstance(before, bool) or not isinstance(before, int) or before < 1:
                raise InvalidArgumentError(
                    f"top_k_before must be a positive integer, not {before!r:.30}"
                )
            scored = self._rerank(scored, query, before, lexical=do_rerank, toc=do_toc)
        if section_mode or return_mode != "chunks":
            return self._grouped(scored, query, top_k, return_mode, section_mode)
        return self._hits(scored[:top_k], query)

    def _rerank(
        self,
        scored: list[tuple[float, str, int, ScoreParts]],
        query: str,
        before: int,
        *,
        lexical: bool,
        toc: bool,
    ) -> list[tuple[float, str, int, ScoreParts]]:
        """The fused list with its first ``before`` entries re-ordered by the lexical
        reranker (search/rerank.py); every score is normalised by the best fused one."""
        s = self.settings.search
        head, tail = scored[:before], scored[before:]
        pks_by_corpus: dict[str, list[int]] = {}
        for _, name, pk, _ in head:
            pks_by_corpus.setdefault(name, []).append(pk)
        rows: dict[tuple[str, int], ChunkRow] = {}
        terms: dict[str, list[str]] = {}
        idf: dict[str, dict[str, float]] = {}
        for name, pks in pks_by_corpus.items():
            store = self._corpora[name]
            rows.update(((name, pk), row) for pk, row in store.rows(pks).items())
            terms[name] = store.analyzer.tokens(query)
            total, freqs = store.lexical.doc_freqs(terms[name])
            idf[name] = {t: bm25_idf(max(total, df), df) for t, df in freqs.items()}
        analyse = {name: self._corpora[name].analyzer.tokens for name in pks_by_corpus}
        # Rerank on the fused scores before corpus weights, then weigh the result: a corpus
        # of weight 0 stays at 0 however well its chunks cover the query.
        weight = {name: self._weights.get(name, 1.0) for name in pks_by_corpus}
        candidates = []
        for score, name, pk, parts in head:
            row = rows.get((name, pk))
            candidates.append(
                Candidate(
                    key=(name, pk, parts),
                    score=score / weight[name] if weight[name] > 0 else 0.0,
                    tokens=analyse[name](row.text) if row and lexical else (),
                    idf=idf[name],
                    heading_tokens=frozenset(analyse[name](" ".join(row.heading_path)))
                    if row and toc
                    else frozenset(),
                )
            )
        best = max(c.score for c in candidates)
        best = best if best > 0 else 1.0
        # One query may span corpora of different languages; the terms differ per corpus,
        # so rerank each candidate against its own corpus's analysed query.
        reranked: list[tuple[float, str, int, ScoreParts]] = []
        for name in pks_by_corpus:
            for (_, pk, parts), value in lexical_rerank(
                terms[name],
                [c for c in candidates if c.key[0] == name],
                coverage_weight=s.rerank_coverage if lexical else 0.0,
                proximity_weight=s.rerank_proximity if lexical else 0.0,
                heading_weight=s.toc_boost if toc else 0.0,
                best=best,
            ):
                # value * best >= the unweighted fused score, so after weighting every
                # reranked score stays at or above the tail's (weighted, fused) scores.
                final = value * best * weight[name]
                reranked.append((final, name, pk, dataclasses.replace(parts, rerank=value)))
        reranked.sort(key=lambda t: (-t[0], t[1], t[2]))
        return reranked + tail

    def _grouped(
        self,
        scored: list[tuple[float, str, int, ScoreParts]],
        query: str,
        top_k: int,
        return_mode: str,
        section_mode: bool,
    ) -> list[Hit]:
        """One hit per section or per document, ranked by its best chunk."""
        # Group on the rows first and make snippets only for the hits returned: a snippet
        # costs far more than a row, and the candidate list can be hundreds long.
        hits = self._hits(scored, query, snippets=False)
        if return_mode != "chunks":
            docs: dict[tuple[str, str], Hit] = {}
            for h in hits:
                docs.setdefault((h.corpus, h.doc_id), h)
            best = self._with_snippets(list(docs.values())[:top_k], query)
            total = sum(self._doc_chars(h) for h in best)
            if return_mode == "documents" or total <= self.settings.search.max_chars:
                return [self._widen_to_document(h) for h in best]
        if not section_mode:
            return self._with_snippets(hits[:top_k], query)
        sections: dict[tuple[str, str, str], Hit] = {}
        for h in hits:
            sections.setdefault((h.corpus, h.doc_id, h.section_id), h)
        chosen = self._with_snippets(list(sections.values())[:top_k], query)
        return [self._widen_to_section(h) for h in chosen]

    def _doc_chars(self, hit: Hit) -> int:
        row = self._corpora[hit.corpus].catalog.document(hit.doc_id)
        return len(row.text) if row else 0

    def _widen_to_document(self, hit: Hit) -> Hit:
        doc = self._corpora[hit.corpus].catalog.document(hit.doc_id)
        text = doc.text if doc else hit.text
        rows = self._corpora[hit.corpus].catalog.document_chunks(hit.doc_id)
        pages = [p for r in rows for p in (r.page_start, r.page_end) if p is not None]
        return dataclasses.replace(
            hit,
            start=0,
            end=len(text),
            text=text,
            heading_path=hit.heading_path[:1],
            page_start=min(pages) if pages else None,
            page_end=max(pages) if pages else None,
        )

    def _widen_to_section(self, hit: Hit) -> Hit:
        rows = [
            r
            for r in self._corpora[hit.corpus].catalog.document_chunks(hit.doc_id)
            if r.section_id == hit.section_id
        ]
        if not rows:
            return hit
        doc = self._corpora[hit.corpus].catalog.document(hit.doc_id)
        start, end = rows[0].start, rows[-1].end
        pages = [p for r in rows for p in (r.page_start, r.page_end) if p is not None]
        return dataclasses.replace(
            hit,
            start=start,
            end=end,
            text=doc.text[start:end] if doc else hit.text,
            heading_path=rows[0].heading_path,
            page_start=min(pages) if pages else None,
            page_end=max(pages) if pages else None,
        )

    def toc(self, doc_id: str, *, corpus: str | None = None) -> dict[str, Any]:
        """A document's table of contents: its headings as a tree, with chunk counts.

        ``structured`` is False for a document without headings (then ``headings`` is
        empty and ``chunks`` counts all of its chunks).

        Raises:
            NotFoundError: no such document.
        """
        store = self._find_doc_corpus(doc_id, corpus)
        rows = store.catalog.document_chunks(doc_id)
        doc = store.catalog.document(doc_id)
        text = doc.text if doc else ""
        root: dict[str, Any] = {"children": [], "level": 0}
        stack = [root]
        for row in rows:
            for line in _heading_lines(text[row.start : row.end]):
                level, title = line
                node = {
                    "title": title,
                    "level": level,
                    "section_id": row.section_id,
                    "chunk_id": f"{store.name}:{row.chunk_pk}",
                    "chunks": 0,
                    "children": [],
                }
                while stack[-1]["level"] >= level:
                    stack.pop()
                stack[-1]["children"].append(node)
                stack.append(node)
            if len(stack) > 1:
                stack[-1]["chunks"] += 1
        return {
            "doc_id": doc_id,
            "corpus": store.name,
            "structured": bool(root["children"]),
            "chunks": len(rows),
            "headings": root["children"],
        }

    def _hits(
        self,
        scored: list[tuple[float, str, int, ScoreParts]],
        query: str,
        *,
        snippets: bool = True,
    ) -> list[Hit]:
        by_corpus: dict[str, list[int]] = {}
        for _, name, pk, _ in scored:
            by_corpus.setdefault(name, []).append(pk)
        rows = {name: self._corpora[name].rows(pks) for name, pks in by_corpus.items()}
        hits: list[Hit] = []
        for score, name, pk, parts in scored:
            row = rows[name].get(pk)
            if row is None:  # deleted between retrieval and fetch
                continue
            hits.append(_hit(name, row, score, parts, ""))
        return self._with_snippets(hits, query) if snippets else hits

    def _with_snippets(self, hits: list[Hit], query: str) -> list[Hit]:
        """The hits with their snippets: the query terms of each hit's own corpus in context."""
        width = self.settings.search.snippet_chars
        terms: dict[str, set[str]] = {}
        out = []
        for h in hits:
            analyzer = self._corpora[h.corpus].analyzer
            if h.corpus not in terms:
                terms[h.corpus] = set(analyzer.tokens(query))
            snippet = make_snippet(h.text, terms[h.corpus], analyzer.term_spans, width=width)
            out.append(dataclasses.replace(h, snippet=snippet))
        return out

    # -- reading -----------------------------------------------------------------------
    def get_chunk(self, chunk_id: str) -> Chunk:
        """One chunk by id (``"corpus:number"``, as in :attr:`Hit.chunk_id`).

        Raises:
            NotFoundError: no such chunk.
        """
        name, pk = _parse_chunk_id(chunk_id)
        row = self._corpus(name).rows([pk]).get(pk)
        if row is None:
            raise NotFoundError(f"no chunk {chunk_id!r:.80}")
        return _chunk(name, row)

    def neighbors(self, chunk_id: str, window: int = 1) -> list[Chunk]:
        """The chunk and up to ``window`` chunks either side of it, in document order."""
        if not isinstance(window, int) or not 0 <= window <= 100:
            raise InvalidArgumentError("window must be an integer from 0 to 100")
        centre = self.get_chunk(chunk_id)
        rows = self._corpus(centre.corpus).catalog.document_chunks(
            centre.doc_id, max(0, centre.position - window), centre.position + window
        )
        return [_chunk(centre.corpus, r) for r in rows]

    def get_document(self, doc_id: str, *, corpus: str | None = None) -> Document:
        """A whole document: canonical text and metadata.

        Raises:
            NotFoundError: no such document.
        """
        store = self._find_doc_corpus(doc_id, corpus)
        row = store.catalog.document(doc_id)
        if row is None:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        return Document(
            row.doc_id, store.name, row.text, row.metadata, row.source_path, row.chunk_count
        )

    def list_documents(
        self,
        *,
        corpus: str | None = None,
        where: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[DocumentInfo]:
        """Documents ordered by corpus then id, optionally filtered like :meth:`search`."""
        if not (0 < limit <= 10_000 and offset >= 0):
            raise InvalidArgumentError("limit must be 1..10000 and offset >= 0")
        validate_where(where)
        out: list[DocumentInfo] = []
        for name in [corpus] if corpus else self.corpora:
            rows = self._corpus(name).catalog.list_documents(
                where=where, corpus=name, limit=limit + offset, offset=0
            )
            out.extend(DocumentInfo(r[0], name, r[1], r[2], r[3], r[4]) for r in rows)
        return out[offset : offset + limit]

    # -- agentic retrieval (§7.1): agentic.py's functions (Index first) as methods --------
    keyword_search = agentic.keyword_search
    semantic_search = agentic.semantic_search
    filtered_search = agentic.filtered_search
    read_chunks = agentic.read_chunks
    read_neighbors = agentic.read_neighbors
    find_related = agentic.find_related
    enrichment = agentic.enrichment

    def resolve(self, hit: Hit | Chunk) -> str:
        """The exact span of the stored document that ``hit`` points at."""
        doc = self.get_document(hit.doc_id, corpus=hit.corpus)
        return doc.text[hit.start : hit.end]

    def stats(self) -> IndexStats:
        return IndexStats(
            path=str(self.path) if self.path else None,
            model=self._base_name,
            dimension=self.embedder.dimension,
            corpora=tuple(self._corpora[n].stats() for n in self.corpora),
        )

    def verify(self, corpus: str | None = None) -> CheckReport:
        """Check that each corpus's catalog, vectors and lexical index agree and every chunk
        resolves (read-only; damage found when the index was opened was already repaired,
        with a logged warning). Corpora that cannot be opened are listed in ``broken``."""
        from .verify import CheckReport, verify_corpus

        names = [corpus] if corpus else self.corpora
        checks = tuple(verify_corpus(self._embedded(n), self._reembed) for n in names)
        broken = {} if corpus else self.broken_corpora
        return CheckReport(checks, broken)

    def _find_doc_corpus(self, doc_id: str, corpus: str | None) -> CorpusStore:
        if corpus is not None:
            store = self._corpus(corpus)
            if store.stored_signature(doc_id) is None:
                raise NotFoundError(f"no document {doc_id!r:.80} in corpus {corpus!r}")
            return store
        found = [c for c in self._corpora.values() if c.stored_signature(doc_id) is not None]
        if not found:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        if len(found) > 1:
            names = ", ".join(sorted(c.name for c in found))
            raise InvalidArgumentError(
                f"document {doc_id!r:.80} exists in several corpora ({names}); name the corpus"
            )
        return found[0]

    # -- lifecycle ---------------------------------------------------------------------
    def release_memory(self) -> None:
        """Shrink resident memory while idle: vector pages mapped by earlier searches are
        unmapped (the OS keeps them cached, so the next search re-maps them in a few ms)
        and the C heap returns its free pages to the OS. Safe while other threads search.
        """
        for corpus in list(self._corpora.values()):
            corpus.release_memory()
        trim_c_heap()

    def close(self) -> None:
        for corpus in self._corpora.values():
            corpus.close()
        self._corpora.clear()
        if self._llm is not None:
            self._llm.close()
            self._llm = None
        if self._backend is not None:
            self._backend.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Pending:
    __slots__ = ("chunks", "enrichments", "hashes", "inputs", "item", "sha", "text")

    def __init__(
        self,
        item: NewDocument,
        text: str,
        sha: str,
        chunks: Any,
        inputs: list[str],
        hashes: list[str],
    ) -> None:
        self.item, self.text, self.sha = item, text, sha
        self.chunks, self.inputs, self.hashes = chunks, inputs, hashes
        self.enrichments: list[Enrichment | None] = []


def _check_query(query: str, top_k: int, mode: str, depth: int, k: float) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgumentError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgumentError(
            f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}"
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgumentError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    if mode not in SEARCH_MODES:
        raise InvalidArgumentError(
            f"mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r:.30}"
        )
    if not 1 <= depth <= 10_000:
        raise InvalidArgumentError("candidates must be from 1 to 10000")
    if not k > 0:
        raise InvalidArgumentError("rrf_k must be positive")


def _check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError("metadata must be a mapping of names to values")
    try:
        # Round-trip through JSON: what is stored is exactly what comes back.
        clean = json.loads(json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"metadata must be JSON-serialisable ({exc})") from None
    if not all(isinstance(key, str) for key in metadata):
        raise InvalidArgumentError("metadata keys must be strings")
    return dict(clean)


def _as_new_documents(
    docs: Mapping[str, str] | Iterable[NewDocument], shared: dict[str, Any]
) -> list[NewDocument]:
    if isinstance(docs, Mapping):
        raw = [NewDocument(doc_id, text) for doc_id, text in docs.items()]
    else:
        raw = list(docs)
    out: list[NewDocument] = []
    seen: set[str] = set()
    for d in raw:
        if not isinstance(d, NewDocument):
            raise InvalidArgumentError("documents must be {id: text} or NewDocument items")
        if not isinstance(d.doc_id, str) or not d.doc_id or len(d.doc_id) > MAX_DOC_ID_CHARS:
            raise InvalidArgumentError(
                f"document ids must be non-empty strings of at most {MAX_DOC_ID_CHARS} characters"
            )
        if not isinstance(d.text, str):
            raise InvalidArgumentError(f"text of document {d.doc_id!r:.80} must be a string")
        if d.doc_id in seen:
            raise InvalidArgumentError(f"document id {d.doc_id!r:.80} appears twice in one call")
        seen.add(d.doc_id)
        merged = {**shared, **_check_metadata(d.metadata)} if d.metadata else dict(shared)
        out.append(dataclasses.replace(d, metadata=merged))
    return out


def _with_section_filter(
    where: Mapping[str, Any] | None, section_filter: str | None
) -> Mapping[str, Any] | None:
    if section_filter is None:
        return where
    if not isinstance(section_filter, str) or not section_filter.strip():
        raise InvalidArgumentError("section_filter must be a section id or 'Title > Section'")
    if section_filter.startswith(("s:", "unstructured:")):
        extra: dict[str, Any] = {"section_id": section_filter}
    else:
        parts = [p.strip() for p in section_filter.split(">") if p.strip()]
        # heading_path is stored as JSON text: a path prefix is a prefix of that text.
        prefix = json.dumps(parts, ensure_ascii=False)[:-1]
        extra = {
            "$or": [{"heading_path": prefix + "]"}, {"heading_path": {"$startswith": prefix + ","}}]
        }
    return {"$and": [dict(where), extra]} if where else extra


_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")


def _heading_lines(text: str) -> list[tuple[int, str]]:
    """ATX headings in a chunk (outside fenced code), as ``(level, title)``."""
    out: list[tuple[int, str]] = []
    fence = None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is None:
            m = _HEADING.match(line)
            if m:
                out.append((len(m.group(1)), m.group(2).strip()))
    return out


def _source_state(item: NewDocument) -> tuple[str | None, int | None, int | None]:
    return (item.source_sha256, item.source_size, item.source_mtime_ns)


def _canonical_page_starts(raw: str, page_starts: Sequence[int] | None) -> list[int] | None:
    """Page offsets given against the raw text, moved to the canonical (LF-only) text."""
    if page_starts is None:
        return None
    if "\r\n" not in raw:
        return list(page_starts)
    out = []
    for p in page_starts:
        out.append(p - raw.count("\r\n", 0, p))
    return out


def _parse_chunk_id(chunk_id: str) -> tuple[str, int]:
    if isinstance(chunk_id, str):
        name, sep, number = chunk_id.rpartition(":")
        if sep and number.isdigit() and name:
            return name, int(number)
    raise NotFoundError(f"{chunk_id!r:.80} is not a chunk id (expected 'corpus:number')")


def _parts(
    dense: list[tuple[int, float]], lexical: list[tuple[int, float]]
) -> dict[int, ScoreParts]:
    d = {pk: (score, rank) for rank, (pk, score) in enumerate(dense, start=1)}
    lx = {pk: (score, rank) for rank, (pk, score) in enumerate(lexical, start=1)}
    out: dict[int, ScoreParts] = {}
    for pk in d.keys() | lx.keys():
        ds, dr = d.get(pk, (None, None))
        ls, lr = lx.get(pk, (None, None))
        out[pk] = ScoreParts(dense=ds, lexical=ls, dense_rank=dr, lexical_rank=lr)
    return out


def _row_fields(corpus: str, row: ChunkRow) -> dict[str, Any]:
    """The fields a stored chunk and a hit share."""
    return {
        "chunk_id": f"{corpus}:{row.chunk_pk}",
        "corpus": corpus,
        "doc_id": row.doc_id,
        "source_path": row.source_path,
        "heading_path": row.heading_path,
        "section_id": row.section_id,
        "page_start": row.page_start,
        "page_end": row.page_end,
        "start": row.start,
        "end": row.end,
        "position": row.position,
        "text": row.text,
        "metadata": row.metadata,
    }


def _chunk(corpus: str, row: ChunkRow) -> Chunk:
    return Chunk(**_row_fields(corpus, row))


def _hit(corpus: str, row: ChunkRow, score: float, parts: ScoreParts, snippet: str) -> Hit:
    return Hit(**_row_fields(corpus, row), score=score, scores=parts, snippet=snippet)
