"""The phases of :meth:`~guaipeca.index.Index.search`, in the order it runs them.

1. :func:`plan`: the call's arguments with the ``search`` settings' defaults filled in,
   checked (one-line errors) before any corpus is touched;
2. :func:`retrieve`: each corpus's dense and keyword lists, fused per corpus
   (index/ranking.py), weighted by the corpus weight and merged best first;
3. :func:`rerank`: the ToC boost and the configured reranker over the merged list;
4. :func:`shape`: the candidates as hits, or grouped and widened to sections or documents.

The facade owns the corpora and the models; every phase is given what it reads and keeps no
state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from guaipeca.config import EngineSettings, SearchSettings
from guaipeca.errors import InvalidArgumentError
from guaipeca.index import ranking, results
from guaipeca.index.checks import check_query
from guaipeca.index.results import Scored
from guaipeca.search.rerank_http import HttpReranker
from guaipeca.store import normalise_where, validate_where
from guaipeca.store.contract import CorpusStore, DenseScan
from guaipeca.types import FUSIONS, RETURN_MODES, Explanation, Hit, ReturnMode, SearchMode

__all__ = ["Explained", "SearchPlan", "explained_hits", "plan", "rerank", "retrieve", "shape"]


@dataclass(frozen=True)
class SearchPlan:
    """One search's arguments, defaults filled in and checked."""

    query: str
    top_k: int
    mode: SearchMode
    depth: int  # candidates fetched per retriever and corpus
    dense_scan: DenseScan
    rrf_k: float
    weights: tuple[float, float]  # (dense, keyword)
    phrase_weight: float  # search.phrase_weight (lexical/bm25.py)
    fusion: str
    where: Mapping[str, Any] | None
    return_mode: ReturnMode
    section_mode: bool
    rerank: bool
    toc_rerank: bool
    # Checked only when a non-empty list is reranked (an unused value is not an error).
    top_k_before: int
    max_chars: int | None
    explain: bool = False


def plan(
    settings: EngineSettings,
    query: str,
    *,
    top_k: int | None,
    mode: SearchMode | None,
    where: Mapping[str, Any] | None,
    candidates: int | None,
    rrf_k: float | None,
    dense_weight: float | None,
    bm25_weight: float | None,
    fusion: str | None,
    return_mode: ReturnMode,
    section_mode: bool,
    section_filter: str | None,
    rerank: bool | None,
    top_k_before: int | None,
    toc_rerank: bool | None,
    max_chars: int | None,
    explain: bool = False,
) -> SearchPlan:
    """The search's arguments resolved against ``settings`` (None: the setting).

    Raises:
        InvalidArgumentError: empty or oversized query, bad ``top_k``, mode, fusion or
            return mode.
        InvalidFilterError: a malformed ``where``.
    """
    s = settings.search
    mode = mode or s.mode
    top_k = s.top_k if top_k is None else top_k
    depth = candidates or max(s.candidates, top_k)
    k = s.rrf_k if rrf_k is None else rrf_k
    w_dense = s.dense_weight if dense_weight is None else dense_weight
    w_bm25 = s.bm25_weight if bm25_weight is None else bm25_weight
    fusion = s.fusion if fusion is None else fusion
    check_query(query, top_k, mode, depth, k)
    if fusion not in FUSIONS:
        raise InvalidArgumentError(
            f"fusion must be one of {', '.join(FUSIONS)}, not {fusion!r:.30}"
        )
    if return_mode not in RETURN_MODES:
        raise InvalidArgumentError(
            f"return_mode must be one of {', '.join(RETURN_MODES)}, not {return_mode!r:.30}"
        )
    where = normalise_where(where)
    validate_where(where)
    where = results.section_filter_where(where, section_filter)
    # The configured default reranks fused (hybrid) lists; a single retriever's list keeps
    # its own scores (cosine, BM25) unless the caller asks for reranking explicitly.
    # search.rerank left unset: on when an HTTP reranker is configured.
    on = s.rerank if "rerank" in s.model_fields_set else settings.rerank.provider == "http"
    return SearchPlan(
        query=query,
        top_k=top_k,
        mode=mode,
        depth=depth,
        dense_scan=s.dense_scan,
        rrf_k=k,
        weights=(w_dense, w_bm25),
        phrase_weight=s.phrase_weight,
        fusion=fusion,
        where=where,
        return_mode=return_mode,
        section_mode=section_mode,
        rerank=(on and mode == "hybrid") if rerank is None else rerank,
        toc_rerank=s.toc_rerank if toc_rerank is None else toc_rerank,
        top_k_before=s.top_k_before if top_k_before is None else top_k_before,
        max_chars=max_chars,
        explain=explain,
    )


class CorpusModels(Protocol):
    """What retrieval asks of a corpus's model (index/models.py Models)."""

    def dense_languages(self, corpus: str) -> frozenset[str] | None: ...

    def fusion_weight(self, corpus: str) -> float: ...


#: Each candidate's explanation by (corpus, chunk key), when the plan asks for them.
Explained = dict[tuple[str, int], Explanation]


def retrieve(
    p: SearchPlan,
    stores: Sequence[CorpusStore],
    query_vectors: Mapping[str, Any],
    corpus_weights: Mapping[str, float],
    models: CorpusModels,
    check: Callable[[], None],
    explained: Explained | None = None,
) -> list[Scored]:
    """Every corpus's candidates (its fused list for a hybrid search), each score times the
    corpus weight, merged best first (ties by corpus name, then chunk key).

    ``query_vectors`` holds the query embedded for each corpus by name (empty for a keyword
    search); ``models.dense_languages`` names the languages a corpus's model knows, and
    ``models.fusion_weight`` the factor on the dense weight its model carries. ``explained``, when
    given, receives every candidate's explanation.
    """
    scored: list[Scored] = []
    for store in stores:
        check()
        qvec = query_vectors.get(store.name)
        dense = store.dense(qvec, p.depth, p.where, scan=p.dense_scan) if qvec is not None else []
        check()
        lexical = (
            store.keyword(p.query, p.depth, p.where, phrase_weight=p.phrase_weight)
            if p.mode != "dense"
            else []
        )
        parts = results.score_parts(dense, lexical)
        weight = corpus_weights.get(store.name, 1.0)
        if p.mode == "hybrid":
            how = ranking.hybrid_plan(
                dense, lexical, p.weights, p.fusion,
                models.dense_languages(store.name), store.language,
                models.fusion_weight(store.name),
            )  # fmt: skip
            fused = ranking.fuse_hybrid(how, p.rrf_k)
            if explained is not None:
                found = ranking.explain_hybrid(how, p.rrf_k, dict(fused), weight)
        else:
            fused = dense if p.mode == "dense" else lexical
            if explained is not None:
                found = ranking.explain_single(p.mode, fused, weight)
        if explained is not None:
            explained.update(((store.name, pk), e) for pk, e in found.items())
        scored.extend((score * weight, store.name, pk, parts[pk]) for pk, score in fused)
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    if p.mode != "hybrid":
        return scored
    muted = {name for name, w in corpus_weights.items() if w == 0}
    return lift_zeros(scored, muted, explained)


def lift_zeros(
    scored: list[Scored], muted: Collection[str] = (), explained: Explained | None = None
) -> list[Scored]:
    """``scored`` with its fused scores of 0 shown as half its lowest positive one.

    Min-max normalisation maps a list's last candidate to 0, so a chunk found by one list
    only, last in it, scored 0: read as "irrelevant" (issue 38), though it was retrieved.
    Every 0 becomes the same value below every positive score, so the order and its ties
    are what they were. Its explanation keeps ``fused`` 0 and says ``shown_floor``. A
    corpus of weight 0 (``muted``) keeps its 0s: the user asked for them (they now rank
    below a lifted 0 of another corpus instead of tying with it).
    """
    positive = [s for s, *_ in scored if s > 0]
    if not positive or positive[-1] == scored[-1][0]:
        return scored  # nothing at 0 (scores never go below it), or nothing above it
    floor = positive[-1] / 2
    out: list[Scored] = []
    for score, name, pk, parts in scored:
        if score == 0 and name not in muted:
            score = floor
            if explained is not None and (name, pk) in explained:
                e = explained[(name, pk)]
                explained[(name, pk)] = dataclasses.replace(e, score=floor, shown_floor=floor)
        out.append((score, name, pk, parts))
    return out


def explained_hits(hits: list[Hit], explained: Explained) -> list[Hit]:
    """``hits`` with their explanations (a hit re-scored by a reranker says so)."""
    out = []
    for h in hits:
        corpus, _, number = h.chunk_id.rpartition(":")
        e = explained.get((corpus, int(number)))
        if e is not None and e.score != h.score:
            e = dataclasses.replace(e, reranked=True)
        out.append(dataclasses.replace(h, explanation=e))
    return out


def rerank(
    p: SearchPlan,
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    corpus_weights: Mapping[str, float],
    settings: EngineSettings,
    http: Callable[[], HttpReranker],
) -> tuple[list[Scored], str | None]:
    """The merged list reranked as the plan asks (unchanged when it asks for nothing or
    there is nothing to rerank), and why an HTTP reranker failed (None: it did not).

    Raises:
        InvalidArgumentError: ``top_k_before`` is not a positive integer.
    """
    if not (p.rerank or p.toc_rerank) or not scored:
        return scored, None
    before = p.top_k_before
    if isinstance(before, bool) or not isinstance(before, int) or before < 1:
        raise InvalidArgumentError(f"top_k_before must be a positive integer, not {before!r:.30}")
    return ranking.reranked(
        scored, stores, corpus_weights, settings, http,
        p.query, before, p.top_k, lexical=p.rerank, toc=p.toc_rerank,
    )  # fmt: skip


def shape(
    p: SearchPlan,
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    settings: SearchSettings,
    check: Callable[[], None],
) -> list[Hit]:
    """The best ``top_k`` candidates as hits with snippets, or grouped and widened to
    sections or documents as the plan's section and return modes ask."""
    if p.section_mode or p.return_mode != "chunks":
        return results.grouped(
            scored,
            stores,
            settings,
            p.query,
            p.top_k,
            p.return_mode,
            p.section_mode,
            max_chars=p.max_chars,
            check=check,
        )
    return results.hits(scored[: p.top_k], stores, p.query, settings.snippet_chars, check=check)
