"""The write path of :class:`~guaipeca.index.facade.Index`: documents → chunks → enrichment →
vectors → one corpus write.

Unchanged documents are skipped and unchanged chunks reuse their stored vectors: a chunk's
vector is keyed by the hash of what is embedded for it (model name + embedding input), so
only new inputs reach the model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from guaipeca.chunk import canonicalize, chunk_text
from guaipeca.config import EngineSettings
from guaipeca.embed import Embedder, embedding_input
from guaipeca.enrich import Enrichment
from guaipeca.enrich.pipeline import LLMCache, llm_pass, local_pass, stored_form
from guaipeca.errors import InvalidArgumentError, TooLargeError
from guaipeca.store.contract import CorpusStore, PreparedDocument
from guaipeca.store.embedded import Catalog
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.types import MAX_DOC_ID_CHARS, AddReport, ChunkLocation, ChunkSpan, NewDocument

if TYPE_CHECKING:
    from guaipeca.enrich.llm import LLMEnricher

# Chunks gathered before one embedding batch and one corpus write: large enough to keep the
# model's batches full, small enough that a huge folder never sits in memory at once.
_WRITE_BATCH_CHUNKS = 2048
# Pending chunks taken per round of the embedding phase: one commit each, so a kill loses
# at most one round and progress moves every few seconds. Rounds are taken shortest input
# first, so each round's batches hold inputs of about one length (little padding).
EMBED_ROUND_CHUNKS = 256
# The first round of a phase is this small, and each next one twice the last, up to
# EMBED_ROUND_CHUNKS: a slow model shows its rate (and the time left) within seconds, not
# after a full round (issue 31: "0 chunks, 0.0 chunks/s" for 80 s).
_FIRST_ROUND_CHUNKS = 16
#: Called with (chunks given their vectors so far, chunks still pending): once before the
#: first round, then after each. Chunks, not distinct inputs: a chunk whose input was
#: embedded already counts too, so done + pending stays the same through a phase.
EmbedProgress = Callable[[int, int], None]
#: Largest metadata of one document, as JSON: it is parsed again with every chunk of the
#: document that a search or a read returns, so a large value costs once per chunk.
MAX_METADATA_BYTES = 64 * 1024


class DocumentWriter:
    """Adds documents to corpora with the index's settings and embedder."""

    def __init__(self, settings: EngineSettings, embedder: Embedder, model_name: str) -> None:
        self._settings = settings
        self._embedder = embedder
        # The base model's name salts every embedding hash: vectors of another model never match.
        self._salt = model_name + "\x00"
        self._lock = threading.Lock()
        self._llm: LLMEnricher | None = None  # built on first use when enrich.url is set

    def add(
        self, store: CorpusStore, items: Sequence[NewDocument], *, defer: bool = False
    ) -> AddReport:
        """Insert or replace ``items`` (already checked) in ``store``.

        ``defer``: the keyword phase only — chunks whose input has no stored vector are
        committed as pending (searchable by keyword) and :meth:`embed_pending` embeds them
        later. Stores without pending work (Qdrant) always embed before they write.
        """
        defer = defer and isinstance(store, Corpus)
        counts = {"added": 0, "replaced": 0, "unchanged": 0, "metadata_updated": 0}
        chunk_totals = {"chunks": 0, "embedded": 0, "reused": 0, "pending": 0}
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
            prepared = self._prepare(store, item, text, sha)
            pending.append(prepared)
            pending_chunks += len(prepared.chunks)
            if pending_chunks >= _WRITE_BATCH_CHUNKS:
                self._flush(store, pending, chunk_totals, defer)
                pending, pending_chunks = [], 0
        self._flush(store, pending, chunk_totals, defer)
        return AddReport(
            added=counts["added"],
            replaced=counts["replaced"],
            unchanged=counts["unchanged"],
            metadata_updated=counts["metadata_updated"],
            chunks=chunk_totals["chunks"],
            chunks_embedded=chunk_totals["embedded"],
            chunks_reused=chunk_totals["reused"],
            chunks_pending=chunk_totals["pending"],
        )

    def embed_pending(
        self,
        store: Corpus,
        *,
        stop: threading.Event | None = None,
        progress: EmbedProgress | None = None,
    ) -> int:
        """The embedding phase: embed the pending chunks of ``store`` in rounds, each
        written in one commit, until none are left or ``stop`` is set. Each distinct input is
        embedded once: inputs repeated in a round, or already stored, are reused. Returns
        how many inputs were embedded."""
        embedded = filled = 0
        size = _FIRST_ROUND_CHUNKS
        if progress is not None:
            progress(0, store.pending_count())
        while stop is None or not stop.is_set():
            work = store.pending_work(size)
            if not work:
                break
            size = min(2 * size, EMBED_ROUND_CHUNKS)
            started = time.perf_counter()
            known = store.known_vectors(h for _, h, _ in work)
            todo: dict[str, str] = {}
            for _, h, text in work:
                if h not in known:
                    todo.setdefault(h, text)
            # Sorted by length: the model pads each batch to its longest input.
            order = sorted(todo, key=lambda h: len(todo[h]))
            if order:
                vectors = self._embedder.embed_passages([todo[h] for h in order])
                known.update(zip(order, np.asarray(vectors, dtype=np.float32), strict=True))
            store.fill_pending({pk: known[h] for pk, h, _ in work})
            embedded += len(order)
            filled += len(work)
            seconds = time.perf_counter() - started
            if seconds > 0:
                store.catalog.set_meta({"embed_rate": f"{len(work) / seconds:.3f}"})
            if progress is not None:
                progress(filled, store.pending_count())
        return embedded

    def reembed(self, catalog: Catalog, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for stored chunks, embedded again from the catalog's text — only those
        whose embedding input rebuilds to the very hash stored (same model and settings)."""
        wanted = set(hashes)
        docs = sorted({d for places in catalog.hash_positions(wanted).values() for d, _ in places})
        inputs: dict[str, str] = {}
        for doc_id in docs:
            texts, found = self.embedding_inputs(catalog.document_chunks(doc_id))
            inputs.update((h, t) for h, t in zip(found, texts, strict=True) if h in wanted)
        out: dict[str, np.ndarray] = {}
        keys = list(inputs)
        for i in range(0, len(keys), 256):
            part = keys[i : i + 256]
            vectors = self._embedder.embed_passages([inputs[h] for h in part])
            out.update(zip(part, np.asarray(vectors, dtype=np.float32), strict=True))
        return out

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def _prepare(self, store: CorpusStore, item: NewDocument, text: str, sha: str) -> _Pending:
        doc_key = f"{store.name}/{item.doc_id}"
        plan = item.plan
        if not (
            isinstance(plan, ChunkPlan)
            and plan.key == _plan_key(doc_key, sha, store.language, self._settings)
        ):
            plan = plan_chunks(doc_key, item.text, item.page_starts, store.language, self._settings)
        inputs, hashes = self.embedding_inputs(plan.chunks)
        pending = _Pending(item, text, sha, plan.chunks, inputs, hashes)
        pending.enrichments = list(plan.enrichments)
        return pending

    def embedding_inputs(self, chunks: Sequence[ChunkLocation]) -> tuple[list[str], list[str]]:
        """What is embedded for each chunk of one document, in order, and its hash."""
        chunking, emb = self._settings.chunking, self._settings.embedding
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
                    table_header=c.table_header,
                )
            )
        return inputs, [self._hash(s) for s in inputs]

    def _hash(self, embedding_input: str) -> str:
        return hashlib.sha256((self._salt + embedding_input).encode("utf-8")).hexdigest()

    def _flush(
        self, store: CorpusStore, pending: list[_Pending], totals: dict[str, int], defer: bool
    ) -> None:
        if not pending:
            return
        self._llm_enrich(store, pending)
        known = store.known_vectors(h for p in pending for h in p.hashes)
        missing: dict[str, str] = {}
        for p in pending:
            for h, s in zip(p.hashes, p.inputs, strict=True):
                if h not in known:
                    missing.setdefault(h, s)
        if missing and not defer:
            vectors = self._embedder.embed_passages(list(missing.values()))
            known.update(zip(missing.keys(), vectors, strict=True))
        dim = self._embedder.dimension
        zero = np.zeros(dim, dtype=np.float32)
        docs = []
        for p in pending:
            vecs = (
                np.vstack([known.get(h, zero) for h in p.hashes]).astype(np.float32)
                if p.hashes
                else np.zeros((0, dim), dtype=np.float32)
            )
            waiting: list[str | None] = []
            if defer:
                waiting = [
                    None if h in known else s for h, s in zip(p.hashes, p.inputs, strict=True)
                ]
                totals["pending"] += sum(1 for w in waiting if w is not None)
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
                    pending=waiting if any(w is not None for w in waiting) else (),
                )
            )
            totals["chunks"] += len(p.chunks)
        if defer:
            totals["reused"] += sum(1 for p in pending for h in p.hashes if h in known)
        else:
            totals["embedded"] += len(missing)
            totals["reused"] += sum(len(p.hashes) for p in pending) - len(missing)
        store.write(docs)

    def _llm_enrich(self, store: CorpusStore, pending: list[_Pending]) -> None:
        """Optional LLM enrichment (§8.2) of a batch before it is embedded. It cannot fail
        indexing: chunks the endpoint could not enrich keep their local enrichment."""
        settings = self._settings.enrich
        if settings.url is None:
            return
        with self._lock:
            if self._llm is None:
                from guaipeca.enrich.llm import LLMEnricher  # its HTTP client, only when used

                self._llm = LLMEnricher.from_settings(settings)
        items = [
            (c.text, c.heading_path, p.enrichments[i] if p.enrichments else None)
            for p in pending
            for i, c in enumerate(p.chunks)
        ]
        cache = store.catalog if isinstance(store.catalog, LLMCache) else None
        results = iter(llm_pass(self._llm, cache, items))
        for p in pending:
            p.enrichments = [next(results) for _ in p.chunks]
            for i, e in enumerate(p.enrichments):
                extra = e.embedding_text() if settings.embed and e is not None else ""
                if extra:  # embedded with the text: the hash must say so
                    p.inputs[i] = f"{p.inputs[i]}\n\n{extra}"
                    p.hashes[i] = self._hash(p.inputs[i])


@dataclasses.dataclass(frozen=True, slots=True)
class ChunkPlan:
    """A document's chunks and their local enrichment, computed ahead (in a conversion
    worker process, where they cost most of the keyword phase's time), with the key of what
    they were made for: the writer recomputes them when anything differs."""

    key: tuple[str, ...]
    chunks: list[ChunkSpan]
    enrichments: list[Enrichment | None]


def _plan_key(doc_key: str, sha: str, language: str, settings: EngineSettings) -> tuple[str, ...]:
    return (doc_key, sha, language, settings.model_dump_json(include={"chunking", "enrich"}))


def plan_chunks(
    doc_key: str,
    raw_text: str,
    page_starts: Sequence[int] | None,
    language: str,
    settings: EngineSettings,
) -> ChunkPlan:
    """Chunk ``raw_text`` and enrich each chunk locally (§8.1: keywords, entities, dates, no
    LLM), as :meth:`DocumentWriter.add` does; safe to run in another process."""
    text = canonicalize(raw_text)
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    chunks = chunk_text(
        text,
        doc_key=doc_key,
        max_size=settings.chunking.max_size,
        page_starts=_canonical_page_starts(raw_text, page_starts),
    )
    check_chunk_count(len(chunks), settings)
    enrichments = local_pass([c.text for c in chunks], language, settings.enrich)
    key = _plan_key(doc_key, sha, language, settings)
    return ChunkPlan(key, list(chunks), enrichments)


def check_chunk_count(count: int, settings: EngineSettings) -> None:
    """Refuse a document that makes more than ``chunking.max_chunks`` chunks: each costs a
    vector, an embedding and index rows, so a small file of one-line sections could
    otherwise cost hours of embedding and gigabytes of index.

    Raises:
        TooLargeError: over the limit (a folder sync skips the file as "too big").
    """
    limit = settings.chunking.max_chunks
    if count > limit:
        raise TooLargeError(
            f"it makes {count:,} chunks; the limit is chunking.max_chunks ({limit:,})"
        )


def count_chunks(raw_text: str, settings: EngineSettings) -> int:
    """How many chunks ``raw_text`` makes (chunking only: no enrichment, no embedding)."""
    text = canonicalize(raw_text)
    return len(chunk_text(text, doc_key="count", max_size=settings.chunking.max_size))


class _Pending:
    """One document between chunking and its corpus write."""

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


def _metadata_json(metadata: Mapping[str, Any]) -> str:
    """``metadata`` as stored JSON, within :data:`MAX_METADATA_BYTES`.

    Raises:
        InvalidArgumentError: not a mapping of string keys to JSON values, or too large.
    """
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError("metadata must be a mapping of names to values")
    try:
        encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"metadata must be JSON-serialisable ({exc})") from None
    if not all(isinstance(key, str) for key in metadata):
        raise InvalidArgumentError("metadata keys must be strings")
    size = len(encoded.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidArgumentError(
            f"metadata of one document is {size:,} bytes as JSON; the limit is "
            f"{MAX_METADATA_BYTES:,} (store large data in the document's text instead)"
        )
    return encoded


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` as it will be stored (a JSON round trip).

    Raises:
        InvalidArgumentError: not a mapping of string keys to JSON values, or larger than
            :data:`MAX_METADATA_BYTES` as JSON.
    """
    # Round-trip through JSON: what is stored is exactly what comes back.
    return dict(json.loads(_metadata_json(metadata)))


def _refuse_metadata_keyed_by_ids(shared: Mapping[str, Any], ids: list[str]) -> None:
    """``metadata=`` is shared by every document of a call; a mapping keyed by the call's
    own ids is the easy mistake of meaning one entry per document (each document would get
    a copy of everyone's)."""
    if not isinstance(shared, Mapping):
        return
    keyed = [k for k in ids if k in shared and isinstance(shared[k], Mapping)]
    if keyed:
        shown = ", ".join(repr(k[:40]) for k in keyed[:3]) + (", ..." if len(keyed) > 3 else "")
        raise InvalidArgumentError(
            f"metadata is keyed by this call's document ids ({shown}): metadata= is shared "
            "by every document; give each document its own with "
            "NewDocument(doc_id, text, metadata={...})"
        )


def as_new_documents(
    docs: Mapping[str, str] | Iterable[NewDocument], shared: Mapping[str, Any]
) -> list[NewDocument]:
    """``docs`` checked, each with ``shared`` metadata under its own.

    Raises:
        InvalidArgumentError: a bad or repeated id, a text that is not a string, bad or
            oversized metadata, or shared metadata keyed by the documents' own ids.
    """
    if isinstance(docs, Mapping):
        raw = [NewDocument(doc_id, text) for doc_id, text in docs.items()]
    else:
        raw = list(docs)
    _refuse_metadata_keyed_by_ids(
        shared, [d.doc_id for d in raw if isinstance(d, NewDocument) and isinstance(d.doc_id, str)]
    )
    shared = check_metadata(shared)
    shared_bytes = len(_metadata_json(shared).encode("utf-8")) if shared else 0
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
        merged = {**shared, **check_metadata(d.metadata)} if d.metadata else dict(shared)
        if d.metadata and shared_bytes:
            _metadata_json(merged)  # the two together must fit too
        out.append(dataclasses.replace(d, metadata=merged))
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
