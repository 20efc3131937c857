"""Agentic retrieval (SPEC §6.3, §7.1, §8): the calls an agent makes in several rounds.

keyword / semantic / filtered search, reading many chunks at once, reading around hits
(neighbouring chunks merged into exact spans), and ``find_related``: chunks elsewhere that
share the hits' entities and key terms, for following a thread from one document to the next.

Every function takes the :class:`~guaipeca.Index` first and uses only its public API.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from guaipeca.config import MAX_TOP_K
from guaipeca.enrich import Enrichment, enrich_text
from guaipeca.errors import InvalidArgumentError, NotFoundError
from guaipeca.search.fusion import weighted_rrf
from guaipeca.text.normalize import normalize_term
from guaipeca.types import Chunk, Hit, Hits, ScoreParts, SearchMode

if TYPE_CHECKING:
    from guaipeca.index import Index

__all__ = [
    "CONTENT_TYPES",
    "NeighborSpan",
    "RelatedHit",
    "build_filter",
    "enrichment",
    "filtered_search",
    "find_related",
    "keyword_and_semantic_search",
    "keyword_search",
    "missing_chunks",
    "read_chunks",
    "read_neighbors",
    "search_depth",
    "semantic_search",
]

#: Kinds of chunk content that ``content_types`` filters on (other values are extensions).
CONTENT_TYPES = ("table", "code", "list", "heading", "text")
MAX_CHUNK_IDS = 1000
MAX_WINDOW = 50
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
# find_related: how many of a seed's terms are followed, and per-term candidate cap.
_SEED_ENTITIES = 12
_SEED_KEYWORDS = 8
_TERM_ROWS = 5000
_ENTITY_WEIGHT = 1.5


@runtime_checkable
class _EnrichedCatalog(Protocol):
    """Enrichment reads (the embedded SQLite catalog has them; other backends may not,
    and then enrichment is extracted on the fly and find_related uses search alone)."""

    def enrichments(self, chunk_pks: Sequence[int]) -> dict[int, str | None]: ...

    def term_frequencies(self, terms: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]: ...

    def chunks_with_terms(
        self, terms: Sequence[tuple[str, str]], *, limit: int
    ) -> list[tuple[int, str, str]]: ...

    def counts(self) -> tuple[int, int, int]: ...

    def filtered_slots(
        self, where: Mapping[str, Any] | None, *, corpus: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...


def _catalog(index: Index, corpus: str) -> _EnrichedCatalog | None:
    catalog = index.store(corpus).catalog
    return catalog if isinstance(catalog, _EnrichedCatalog) else None


@dataclass(frozen=True, slots=True)
class NeighborSpan:
    """Consecutive chunks of one document around requested chunks: one exact span.

    Not a chunk record (``types.ChunkLocation``): it covers several chunks, so it has a
    first and last position and their ids, but no single section, trail or table header.
    """

    corpus: str
    doc_id: str
    source_path: str | None
    start: int
    end: int
    text: str
    first_position: int
    last_position: int
    chunk_ids: tuple[str, ...]
    requested: tuple[str, ...]
    heading_path: tuple[str, ...]
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True, slots=True)
class RelatedHit:
    """A chunk related to the seeds, and what links it to them."""

    hit: Hit
    shared_entities: tuple[str, ...]
    shared_keywords: tuple[str, ...]


# -- searching ----------------------------------------------------------------------------
def search_depth(index: Index, top_k_before: int | None, top_k_after: int | None) -> dict[str, Any]:
    """``search`` arguments around reranking: ``top_k_before`` candidates handed to the
    reranker (the retrievers go at least that deep), ``top_k_after`` results kept."""
    out: dict[str, Any] = {}
    for name, value in (("top_k_before", top_k_before), ("top_k_after", top_k_after)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise InvalidArgumentError(f"{name} must be a positive integer")
    if top_k_after is not None:
        out["top_k"] = top_k_after
    if top_k_before is not None:
        if top_k_after is not None and top_k_before < top_k_after:
            raise InvalidArgumentError(
                f"top_k_before ({top_k_before}) must be at least top_k_after ({top_k_after})"
            )
        out["top_k_before"] = top_k_before
        out["candidates"] = max(top_k_before, index.settings.search.candidates)
    return out


def mode_search(
    index: Index,
    mode: SearchMode,
    query: str,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    *,
    where: Mapping[str, Any] | None = None,
    corpora: Sequence[str] | None = None,
    rerank: bool | None = None,
    cancel: threading.Event | None = None,
    budget: int | None = None,
) -> Hits:
    """One search mode with the agentic depth arguments (``top_k_before`` candidates,
    ``top_k_after`` results): what keyword_search, semantic_search and
    keyword_and_semantic_search each run with their mode. ``cancel``, once set, stops the
    search at its next checkpoint; ``budget`` packs the best evidence into that many
    characters, ``top_k_after`` then capping the spans (see :meth:`Index.search`)."""
    return index.search(
        query,
        mode=mode,
        where=where,
        corpora=corpora,
        rerank=rerank,
        cancel=cancel,
        budget=budget,
        **search_depth(index, top_k_before, top_k_after),
    )


def keyword_search(
    index: Index,
    query: str,
    *,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    where: Mapping[str, Any] | None = None,
    corpora: Sequence[str] | None = None,
    rerank: bool | None = None,
) -> list[Hit]:
    """BM25 only: exact words, names, codes (stemmed per corpus language).
    ``rerank`` (default: ``search.rerank``) reorders the best ``top_k_before`` candidates."""
    return mode_search(
        index,
        "keyword",
        query,
        top_k_before,
        top_k_after,
        where=where,
        corpora=corpora,
        rerank=rerank,
    )


def keyword_and_semantic_search(
    index: Index,
    query: str,
    *,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    where: Mapping[str, Any] | None = None,
    corpora: Sequence[str] | None = None,
    rerank: bool | None = None,
) -> list[Hit]:
    """Keywords and meaning fused (hybrid), as A-RAG-OG's default tool of this name.
    ``rerank`` (default: ``search.rerank``) reorders the best ``top_k_before`` candidates."""
    return mode_search(
        index,
        "hybrid",
        query,
        top_k_before,
        top_k_after,
        where=where,
        corpora=corpora,
        rerank=rerank,
    )


def semantic_search(
    index: Index,
    query: str,
    *,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    where: Mapping[str, Any] | None = None,
    corpora: Sequence[str] | None = None,
    rerank: bool | None = None,
) -> list[Hit]:
    """Embeddings only: meaning and paraphrases, whatever the words.
    ``rerank`` (default: ``search.rerank``) reorders the best ``top_k_before`` candidates."""
    return mode_search(
        index,
        "dense",
        query,
        top_k_before,
        top_k_after,
        where=where,
        corpora=corpora,
        rerank=rerank,
    )


def _strings(name: str, values: Sequence[str] | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str) or not all(isinstance(v, str) and v.strip() for v in values):
        raise InvalidArgumentError(f"{name} must be a list of non-empty strings")
    if len(values) > 100:
        raise InvalidArgumentError(f"{name}: at most 100 values")
    return [v.strip() for v in values]


def _check_date(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.match(value):
        raise InvalidArgumentError(f"{name} must be a date written YYYY, YYYY-MM or YYYY-MM-DD")
    return value


def build_filter(
    *,
    keywords: Sequence[str] | None = None,
    entities: Sequence[str] | None = None,
    content_types: Sequence[str] | None = None,
    date_from: str | None = None,
    date_to: str | None = None,
    where: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The ``where`` filter that :func:`filtered_search` runs (every part AND-ed).

    - ``keywords``: each must appear in one of the chunk's keyword phrases (lower-case
      substring: "cancer" matches "breast cancer");
    - ``entities``: each must appear in one of the chunk's entities, ignoring case and
      accents ("sao paulo" matches "São Paulo", "BRCA" matches "BRCA1");
    - ``content_types``: any of them — table, code, list, heading, text (what the chunk
      holds) or a file extension such as pdf or .docx;
    - ``date_from`` / ``date_to``: one date mentioned in the chunk lies in the range
      (inclusive; a partial date such as 2024-03 compares as its first day);
    - ``where``: any other filter, as in :meth:`Index.search`.
    """
    parts: list[dict[str, Any]] = []
    for kw in _strings("keywords", keywords):
        parts.append({"keywords": {"$contains": kw.casefold()}})
    for entity in _strings("entities", entities):
        parts.append({"entity_keys": {"$contains": normalize_term(entity)}})
    types = _strings("content_types", content_types)
    if types:
        kinds = [t.casefold() for t in types if t.casefold() in CONTENT_TYPES]
        exts = ["." + t.casefold().lstrip(".") for t in types if t.casefold() not in CONTENT_TYPES]
        options: list[dict[str, Any]] = []
        if kinds:
            options.append({"content_types": {"$in": kinds}})
        if exts:
            options.append({"extension": {"$in": exts}})
        parts.append(options[0] if len(options) == 1 else {"$or": options})
    low, high = _check_date("date_from", date_from), _check_date("date_to", date_to)
    if low is not None and high is not None and low > high:
        raise InvalidArgumentError(f"date_from ({low}) is after date_to ({high})")
    if low is not None or high is not None:
        bounds: dict[str, str] = {}
        if low is not None:
            bounds["$gte"] = low
        if high is not None:
            # Inclusive of everything inside a partial date: "2024-03" takes "2024-03-31".
            bounds["$lte"] = high + "\uffff"
        parts.append({"dates": bounds})
    if where:
        if not isinstance(where, Mapping):
            raise InvalidArgumentError("where must be a filter object")
        parts.append(dict(where))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def filtered_search(
    index: Index,
    query: str,
    *,
    keywords: Sequence[str] | None = None,
    entities: Sequence[str] | None = None,
    content_types: Sequence[str] | None = None,
    date_from: str | None = None,
    date_to: str | None = None,
    where: Mapping[str, Any] | None = None,
    mode: SearchMode | None = None,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    corpora: Sequence[str] | None = None,
    rerank: bool | None = None,
) -> list[Hit]:
    """Search inside the chunks that match enrichment and metadata conditions
    (see :func:`build_filter`); the filter applies before ranking, so results are exact."""
    combined = build_filter(
        keywords=keywords,
        entities=entities,
        content_types=content_types,
        date_from=date_from,
        date_to=date_to,
        where=where,
    )
    return index.search(
        query,
        mode=mode,
        where=combined,
        corpora=corpora,
        rerank=rerank,
        **search_depth(index, top_k_before, top_k_after),
    )


# -- reading ------------------------------------------------------------------------------
def _ids(chunk_ids: str | Sequence[str]) -> list[str]:
    ids = [chunk_ids] if isinstance(chunk_ids, str) else list(chunk_ids)
    if not ids:
        raise InvalidArgumentError("give at least one chunk id")
    if len(ids) > MAX_CHUNK_IDS:
        raise InvalidArgumentError(f"at most {MAX_CHUNK_IDS} chunk ids at once")
    return list(dict.fromkeys(ids))


def read_chunks(index: Index, chunk_ids: str | Sequence[str]) -> list[Chunk]:
    """Chunks by id, in the order given (duplicates once).

    Raises:
        NotFoundError: naming every id that does not exist.
    """
    found: list[Chunk] = []
    missing: list[str] = []
    for cid in _ids(chunk_ids):
        try:
            found.append(index.get_chunk(cid))
        except NotFoundError:
            missing.append(cid)
    if missing:
        raise missing_chunks(missing)
    return found


def missing_chunks(missing: Sequence[str]) -> NotFoundError:
    """The error of a read that named chunk ids that do not exist (up to five shown)."""
    shown = ", ".join(repr(m[:80]) for m in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return NotFoundError(f"no chunk with id {shown}{more} (ids look like 'corpus:number')")


def enrichment(index: Index, chunk_ids: str | Sequence[str]) -> dict[str, Enrichment | None]:
    """Stored enrichment of each chunk (None: stored without; unknown ids are left out)."""
    by_corpus: dict[str, list[tuple[str, int]]] = {}
    for cid in _ids(chunk_ids):
        name, _, number = cid.rpartition(":")
        if name in index.corpora and number.isdigit():
            by_corpus.setdefault(name, []).append((cid, int(number)))
    out: dict[str, Enrichment | None] = {}
    for name, pairs in by_corpus.items():
        catalog = _catalog(index, name)
        if catalog is None:
            continue
        stored = catalog.enrichments([pk for _, pk in pairs])
        for cid, pk in pairs:
            if pk in stored:
                data = stored[pk]
                out[cid] = Enrichment.from_json(data) if data else None
    return out


def read_neighbors(
    index: Index, chunk_ids: str | Sequence[str], window: int = 1
) -> list[NeighborSpan]:
    """The requested chunks with ``window`` chunks either side, in document order; spans
    of one document that overlap or touch are merged, so each span is one exact slice
    ``document.text[start:end]``. Spans come in the order their documents were first named.

    Raises:
        NotFoundError: an unknown chunk id.
        InvalidArgumentError: ``window`` out of 0..50.
    """
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= MAX_WINDOW:
        raise InvalidArgumentError(f"window must be an integer from 0 to {MAX_WINDOW}")
    centres = read_chunks(index, chunk_ids)
    by_doc: dict[tuple[str, str], list[Chunk]] = {}
    for c in centres:
        by_doc.setdefault((c.corpus, c.doc_id), []).append(c)
    spans: list[NeighborSpan] = []
    for (corpus, doc_id), chunks in by_doc.items():
        catalog = index.store(corpus).catalog
        ranges = sorted((max(0, c.position - window), c.position + window) for c in chunks)
        merged: list[list[int]] = []
        for lo, hi in ranges:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        doc = catalog.document(doc_id)
        if doc is None:  # deleted meanwhile
            continue
        for lo, hi in merged:
            rows = catalog.document_chunks(doc_id, lo, hi)
            if not rows:
                continue
            ids = tuple(f"{corpus}:{r.chunk_pk}" for r in rows)
            pages = [p for r in rows for p in (r.page_start, r.page_end) if p is not None]
            start, end = rows[0].start, rows[-1].end
            spans.append(
                NeighborSpan(
                    corpus=corpus,
                    doc_id=doc_id,
                    source_path=doc.source_path,
                    start=start,
                    end=end,
                    text=doc.text[start:end],
                    first_position=rows[0].position,
                    last_position=rows[-1].position,
                    chunk_ids=ids,
                    requested=tuple(c.chunk_id for c in chunks if c.chunk_id in ids),
                    heading_path=rows[0].heading_path,
                    page_start=min(pages) if pages else None,
                    page_end=max(pages) if pages else None,
                )
            )
    return spans


# -- following threads --------------------------------------------------------------------
def _seed_terms(
    index: Index, seeds: list[Chunk]
) -> tuple[dict[str, str], list[str], list[Enrichment]]:
    """Entity keys (-> a spelling) and keywords of the seeds, most telling first."""
    stored = enrichment(index, [s.chunk_id for s in seeds])
    entities: dict[str, str] = {}
    keywords: list[str] = []
    enrichments: list[Enrichment] = []
    for seed in seeds:
        e = stored.get(seed.chunk_id)
        if e is None:  # indexed without enrichment: extract it now
            e = enrich_text(seed.text, index.store(seed.corpus).language)
        enrichments.append(e)
        for name in e.entities[:_SEED_ENTITIES]:
            entities.setdefault(normalize_term(name), name)
        for kw in e.keywords[:_SEED_KEYWORDS]:
            if kw not in keywords:
                keywords.append(kw)
    return entities, keywords, enrichments


def find_related(
    index: Index,
    chunk_ids: str | Sequence[str],
    query: str | None = None,
    *,
    top_k_before: int | None = None,
    top_k_after: int | None = None,
    corpora: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    same_document: bool = False,
    where: Mapping[str, Any] | None = None,
    cancel: threading.Event | None = None,
) -> list[RelatedHit]:
    """Chunks elsewhere that share the seeds' entities and key terms, best first.

    Two rankings are fused (weighted RRF): chunks whose stored enrichment carries the
    seeds' entities and keywords (each weighted by its rarity, entities 1.5x), and a hybrid
    search for those terms together with ``query`` (when given, it steers the result toward
    the agent's question). The seeds, the ids in ``exclude`` and, unless ``same_document``,
    every chunk of the seeds' documents are left out. Call it again on its results to
    follow a thread further (multi-hop).

    Raises:
        NotFoundError: an unknown chunk id.
        InvalidArgumentError: bad depth, or a seed with nothing to follow.
    """
    depth = search_depth(index, top_k_before, top_k_after)
    top_k = depth.get("top_k", index.settings.search.top_k)
    # Here "before" is the length of each ranked list handed to the fusion.
    before = depth.get("top_k_before", max(50, 5 * top_k))
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise InvalidArgumentError("query must be a non-empty string when given")
    seeds = read_chunks(index, chunk_ids)
    excluded_ids = set(_strings("exclude", list(exclude))) | {s.chunk_id for s in seeds}
    seed_docs = {(s.corpus, s.doc_id) for s in seeds}
    entities, keywords, _ = _seed_terms(index, seeds)
    if not entities and not keywords and not query:
        raise InvalidArgumentError(
            "the chunks have no entities or keywords to follow; give a query as well"
        )
    names = list(corpora) if corpora else index.corpora

    def allowed(corpus: str, doc_id: str, chunk_id: str) -> bool:
        if chunk_id in excluded_ids:
            return False
        return same_document or (corpus, doc_id) not in seed_docs

    # 1. chunks carrying the same entities / keywords, by summed rarity (IDF)
    term_ranked = _term_ranked(index, names, entities, keywords, where, before, allowed)
    # 2. a hybrid search for the query and the seeds' terms
    expansion = " ".join([query or "", *entities.values(), *keywords]).strip()[:4000]
    search_ranked, search_hits = _search_ranked(
        index, expansion, names, where, before, allowed, cancel
    )
    # 3. fuse, then explain each result by the terms it shares
    keyed = {key: i for i, key in enumerate(dict.fromkeys([*term_ranked, *search_ranked]))}
    inverse = {i: key for key, i in keyed.items()}
    fused = weighted_rrf(
        [
            ([keyed[k] for k in term_ranked], 1.0),
            ([keyed[k] for k in search_ranked], 1.0),
        ],
        k=index.settings.search.rrf_k,
    )[:top_k]
    chosen = [(score, inverse[i]) for i, score in fused]
    if not chosen:
        return []
    scored = [
        (score, name, pk, search_hits[(name, pk)].scores if (name, pk) in search_hits else _NO)
        for score, (name, pk) in chosen
    ]
    return _explained(index, index.hits_from_scored(scored, expansion), entities, keywords)


_Allowed = Callable[[str, str, str], bool]


def _term_scores(
    index: Index, names: Sequence[str], entities: Mapping[str, str], keywords: Sequence[str]
) -> dict[tuple[str, int], float]:
    """(corpus, chunk pk) -> summed rarity of the seeds' terms its enrichment carries."""
    term_scores: dict[tuple[str, int], float] = {}
    wanted = [("e", k) for k in entities] + [("k", k) for k in keywords]
    for name in names:
        catalog = _catalog(index, name)
        if catalog is None:
            continue
        total = max(1, catalog.counts()[1])
        df = catalog.term_frequencies(wanted)
        for pk, kind, term in catalog.chunks_with_terms(
            [t for t in wanted if df.get(t)], limit=_TERM_ROWS
        ):
            weight = math.log(1 + total / df[(kind, term)])
            weight *= _ENTITY_WEIGHT if kind == "e" else 1.0
            term_scores[(name, pk)] = term_scores.get((name, pk), 0.0) + weight
    return term_scores


def _term_ranked(
    index: Index,
    names: Sequence[str],
    entities: Mapping[str, str],
    keywords: Sequence[str],
    where: Mapping[str, Any] | None,
    before: int,
    allowed: _Allowed,
) -> list[tuple[str, int]]:
    """The term leg: at most ``before`` allowed chunks, best summed rarity first."""
    term_scores = _term_scores(index, names, entities, keywords)
    rows_cache: dict[str, dict[int, Any]] = {}
    term_ranked: list[tuple[str, int]] = []
    ordered = sorted(term_scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if where:  # the term leg honours the filter too
        admitted = _admitted(index, where, [key for key, _ in ordered[: before * 4]])
        ordered = [(key, score) for key, score in ordered if key in admitted]
    by_corpus: dict[str, list[int]] = {}
    for (name, pk), _ in ordered[: before * 4]:
        by_corpus.setdefault(name, []).append(pk)
    for name, pks in by_corpus.items():
        rows_cache[name] = index.store(name).rows(pks)
    for (name, pk), _ in ordered:
        row = rows_cache.get(name, {}).get(pk)
        if row is not None and allowed(name, row.doc_id, f"{name}:{pk}"):
            term_ranked.append((name, pk))
            if len(term_ranked) >= before:
                break
    return term_ranked


def _search_ranked(
    index: Index,
    expansion: str,
    names: Sequence[str],
    where: Mapping[str, Any] | None,
    before: int,
    allowed: _Allowed,
    cancel: threading.Event | None = None,
) -> tuple[list[tuple[str, int]], dict[tuple[str, int], Hit]]:
    """The search leg: a hybrid search for the query and the seeds' terms."""
    search_ranked: list[tuple[str, int]] = []
    search_hits: dict[tuple[str, int], Hit] = {}
    for hit in index.search(
        expansion,
        top_k=min(before, MAX_TOP_K),
        candidates=max(before, 100),
        corpora=names,
        where=where,
        cancel=cancel,
    ):
        if allowed(hit.corpus, hit.doc_id, hit.chunk_id):
            key = (hit.corpus, int(hit.chunk_id.rpartition(":")[2]))
            search_ranked.append(key)
            search_hits[key] = hit
    return search_ranked, search_hits


def _explained(
    index: Index, hits: list[Hit], entities: Mapping[str, str], keywords: Sequence[str]
) -> list[RelatedHit]:
    """Each hit with the seeds' entities and key phrases it shares."""
    stored = enrichment(index, [h.chunk_id for h in hits])
    out: list[RelatedHit] = []
    for hit in hits:
        e = stored.get(hit.chunk_id) or enrich_text(hit.text, index.store(hit.corpus).language)
        keys = set(e.entity_keys)
        # Shared: among the chunk's own entities/key phrases, or written out in its text.
        plain = f" {' '.join(_WORDS.findall(normalize_term(hit.text)))} "
        shared_entities = tuple(
            v for k, v in entities.items() if k in keys or f" {_plain(k)} " in plain
        )
        shared_keywords = tuple(k for k in keywords if k in e.keywords or f" {_plain(k)} " in plain)
        out.append(RelatedHit(hit, shared_entities, shared_keywords))
    return out


_WORDS = re.compile(r"\w+")


def _plain(term: str) -> str:
    return " ".join(_WORDS.findall(normalize_term(term)))


_NO = ScoreParts()


def _admitted(
    index: Index, where: Mapping[str, Any], keys: list[tuple[str, int]]
) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for name in {n for n, _ in keys}:
        catalog = _catalog(index, name)
        if catalog is None:
            continue
        pks, _ = catalog.filtered_slots(where, corpus=name)
        members = set(pks.tolist())
        out.update((name, pk) for n, pk in keys if n == name and pk in members)
    return out
