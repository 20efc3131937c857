"""Fusion of ranked lists: pure functions, deterministic ties (lowest id first).

* :func:`weighted_rrf`: weighted Reciprocal Rank Fusion, the hybrid default
  (``search.fusion: rrf``) and ``find_related``'s fusion of two rankings.
* :func:`dense_weight_for`: the dense list's weight for one corpus: ``search.dense_weight``
  times the model's fusion weight (its expected quality: 1 for transformer models, 0.1 for
  static ones unless their folder says otherwise), and zero when the model was not trained
  for the corpus's language. Measured (docs/benchmarks-quality.md): the English model's
  dense list lowered every fusion, rank or score, below keyword search alone on a Portuguese
  collection; the static model's (dense nDCG@10 0.45 against keyword 0.70 on SciFact)
  lowered RRF below keyword on both English sets at full weight.
* :func:`rrf_weights`: the (dense, keyword) RRF weights once the dense one is lowered, both
  scaled back to the configured total, so every corpus's scores stay on one scale.
* :func:`zscore_fusion` (``search.fusion: zscore``): each list's scores become z-scores and
  the lists are mixed by a convex combination — Montague & Aslam's score normalisation
  ("Relevance score normalization for metasearch", CIKM 2001) and the convex combination of
  Bruch, Gai & Ingber ("An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
  42(1), 2023). Measured here it beat RRF on SciFact (+0.004 nDCG@10) and lost on NFCorpus
  (-0.013), so it is an option, not the default.

Hand-written: each is a few lines, and the exact tie-breaking is part of our contract
(identical rankings in memory and on disk).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "SCORE_FUSIONS",
    "ListScore",
    "combine",
    "dense_weight_for",
    "explain_scores",
    "fuse_scores",
    "rrf_weights",
    "weighted_rrf",
    "zscore_fusion",
]


def weighted_rrf(
    rankings: Sequence[tuple[Sequence[int], float]], *, k: float = 60.0
) -> list[tuple[int, float]]:
    """Weighted Reciprocal Rank Fusion.

    ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks, summed over the lists
    that contain ``d`` (Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion outperforms
    Condorcet and individual Rank Learning Methods", SIGIR 2009; the per-list weight is the
    usual weighted variant). Returns ``(id, score)`` best first; equal scores are ordered
    by id so the result is deterministic.
    """
    if k <= 0:
        raise ValueError("rrf k must be positive")
    fused: dict[int, float] = {}
    for ids, weight in rankings:
        if weight == 0:
            continue
        for rank, item in enumerate(ids, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


#: Score fusions: each list's scores are normalised, then mixed by a convex combination
#: (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
#: 42(1), 2023), each with its own normalisation and rule for an id a list did not return:
#:
#: * ``zscore``: ``(s - mean) / std`` (Montague & Aslam, "Relevance score normalization for
#:   metasearch", CIKM 2001); a missing id gets the list's lowest z; the mix is squashed by the
#:   logistic ``1 / (1 + e^-z)`` (same order, in (0, 1));
#: * ``minmax``: ``(s - min) / (max - min)``; a missing id 0;
#: * ``dbsf``: distribution-based score fusion as Qdrant ships it: ``mean ± 3 std`` mapped to
#:   [0, 1], clipped; a missing id 0;
#: * ``combmnz``: min-max scores, the mix times the number of lists that returned the id (Fox &
#:   Shaw, "Combination of multiple searches", TREC-2, 1994).
SCORE_FUSIONS = ("zscore", "minmax", "dbsf", "combmnz")

Scores = Sequence[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class ListScore:
    """One list's part in a fused score: ``contribution = weight * normalised``.

    ``rank`` (1-based) and ``raw`` are None when the list did not return the id; ``normalised``
    is then the value the fusion gives a missing id. ``weight`` is the one in the formula: the
    list's share of the total for score fusions, the RRF weight itself for ``rrf``."""

    rank: int | None
    raw: float | None
    normalised: float
    weight: float
    contribution: float


def fuse_scores(
    method: str, lists: Sequence[tuple[Scores, float]], *, k: float = 60.0
) -> list[tuple[int, float]]:
    """Hybrid fusion of ``[(id, score)]`` lists (best first) with their weights, by ``method``:
    ``rrf`` (ranks, :func:`weighted_rrf`'s formula) or one of :data:`SCORE_FUSIONS`.

    Lists of weight 0 are ignored; an empty list adds no id but keeps its share. Returns
    ``(id, score)`` best first; equal scores by id. :func:`explain_scores` gives the parts.

    Raises:
        ValueError: an unknown method, a negative or non-finite weight, ``k <= 0``.
    """
    used, normalised = _normalise_all(method, lists, k)
    present: dict[int, int] = {}
    for by_id, _ in normalised:
        for i in by_id:
            present[i] = present.get(i, 0) + 1
    fused = {
        i: sum(
            w * by_id.get(i, missing)
            for (_, w), (by_id, missing) in zip(used, normalised, strict=True)
        )
        for i in present
    }
    scored = ((i, combine(method, total, present[i])) for i, total in fused.items())
    return sorted(scored, key=lambda kv: (-kv[1], kv[0]))


def explain_scores(
    method: str, lists: Sequence[tuple[Scores, float]], ids: Collection[int], *, k: float = 60.0
) -> dict[int, tuple[ListScore, ...]]:
    """Each of ``ids``' parts in :func:`fuse_scores`, one :class:`ListScore` per list in the
    order given (a list of weight 0 shows its rank and raw score with weight 0), so that
    ``combine(method, sum(contributions), lists that returned it)`` is the fused score."""
    used, normalised = _normalise_all(method, lists, k)
    by_list = {id(items): pair for (items, _), pair in zip(used, normalised, strict=True)}
    weights = {id(items): w for items, w in used}
    out: dict[int, list[ListScore]] = {i: [] for i in ids}
    for items, _ in lists:
        ranks = {i: (r, s) for r, (i, s) in enumerate(items, start=1)}
        by_id, missing = by_list.get(id(items), ({}, 0.0))
        w = weights.get(id(items), 0.0)
        for i in ids:
            rank, raw = ranks.get(i, (None, None))
            n = by_id.get(i, missing) if w else _shown(method, items, rank, k)
            out[i].append(ListScore(rank, raw, n, w, w * n))
    return {i: tuple(parts) for i, parts in out.items()}


def combine(method: str, total: float, present: int) -> float:
    """The fused score from the sum of a candidate's contributions and the number of lists
    that returned it: the sum itself, its logistic (``zscore``), or times ``present``
    (``combmnz``)."""
    if method == "zscore":
        return 1.0 / (1.0 + math.exp(-total))
    if method == "combmnz":
        return present * total
    return total


def zscore_fusion(lists: Sequence[tuple[Scores, float]]) -> list[tuple[int, float]]:
    """:func:`fuse_scores` by z-scores (kept under its own name for callers and tests)."""
    return fuse_scores("zscore", lists)


def _normalise_all(
    method: str, lists: Sequence[tuple[Scores, float]], k: float
) -> tuple[list[tuple[Scores, float]], list[tuple[dict[int, float], float]]]:
    if method != "rrf" and method not in SCORE_FUSIONS:
        raise ValueError(f"unknown fusion {method!r}")
    if k <= 0:
        raise ValueError("rrf k must be positive")
    if any(w < 0 or not math.isfinite(w) for _, w in lists):
        raise ValueError("fusion weights must be finite and >= 0")
    used = [(items, w) for items, w in lists if w > 0 and items]
    # Shares of every list given a weight, empty ones too: a corpus whose keyword search
    # found nothing keeps its dense list at its share, so in a merge across corpora its
    # meaning-only hits do not outrank another corpus's exact matches.
    total = sum(w for _, w in lists if w > 0)
    # RRF keeps its weights as given (a corpus's scale); score fusions mix by shares.
    shares = [(items, w if method == "rrf" else w / total) for items, w in used]
    return shares, [_normalise(method, items, k) for items, _ in used]


def _normalise(method: str, items: Scores, k: float) -> tuple[dict[int, float], float]:
    """``({id: normalised}, value of a missing id)`` for one list."""
    if method == "rrf":
        return {i: 1.0 / (k + r) for r, (i, _) in enumerate(items, start=1)}, 0.0
    scores = [s for _, s in items]
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if method == "zscore":
        z = {i: (s - mean) / std if std > 0 else 0.0 for i, s in items}
        return z, min(z.values())
    if method == "dbsf":
        low, span = mean - 3 * std, 6 * std
    else:  # minmax, combmnz
        low, span = min(scores), max(scores) - min(scores)
    # A list whose scores are all equal ranks nothing: each id it returned gets full credit.
    return {i: min(1.0, max(0.0, (s - low) / span)) if span > 0 else 1.0 for i, s in items}, 0.0


def _shown(method: str, items: Scores, rank: int | None, k: float) -> float:
    """A weight-0 list's normalised score, for explanations only."""
    if not items or rank is None:
        return 0.0
    by_id, _ = _normalise(method, items, k)
    return by_id[items[rank - 1][0]]


def dense_weight_for(
    weight: float,
    model_languages: Collection[str] | None,
    corpus_language: str | None,
    quality: float = 1.0,
) -> float:
    """``weight`` times the model's ``quality`` (its fusion weight, in [0, 1]), or 0 when the
    embedding model declares the languages it was trained for (ISO 639-1 codes) and the
    corpus's language (its code) is not one of them. Unknown languages on either side keep
    the weight: multilingual and user-supplied models are trusted.

    Why a weight the model carries, not one measured per query: on the shared sets the
    query-performance predictors tried (score spread and top-score z of each list, top-10
    agreement between them) correlated with the dense list's gain by |r| <= 0.3, with
    opposite signs for strong and weak models, and gating RRF on them did no better than
    the fixed weight (docs/benchmarks-quality.md, "The static model")."""
    if not 0.0 <= quality <= 1.0:
        raise ValueError("a model's fusion weight must be in [0, 1]")
    foreign = (
        model_languages is not None
        and corpus_language is not None
        and corpus_language not in model_languages
    )
    if foreign:
        return 0.0
    return weight if quality == 1.0 else weight * quality


def rrf_weights(dense: float, keyword: float, dense_applied: float) -> tuple[float, float]:
    """The RRF weights of one corpus once its dense weight ``dense`` became ``dense_applied``
    (by :func:`dense_weight_for`): unchanged when equal; a dropped dense list hands its weight
    to the keyword list; a lowered one keeps the ratio ``dense_applied : keyword`` with both
    scaled to ``dense + keyword``. Either way this corpus's RRF scores stay on the scale of
    corpora that fuse both lists at full weight, so a cross-corpus merge does not rank its
    exact matches below another corpus's meaning-only hits."""
    if dense_applied == dense:
        return dense, keyword
    if dense_applied == 0.0 or keyword == 0.0:
        return dense_applied, keyword + (dense - dense_applied)
    scale = (dense + keyword) / (dense_applied + keyword)
    return dense_applied * scale, keyword * scale
