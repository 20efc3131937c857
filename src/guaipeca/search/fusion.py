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

__all__ = ["dense_weight_for", "rrf_weights", "weighted_rrf", "zscore_fusion"]


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


def zscore_fusion(
    lists: Sequence[tuple[Sequence[tuple[int, float]], float]],
) -> list[tuple[int, float]]:
    """Convex combination of z-scored lists: ``z(d) = sum_i w_i z_i(d) / sum_i w_i``.

    Each list is ``[(id, score)]`` with its weight ``w_i``; ``z_i(d) = (s_i(d) - mean_i) /
    std_i`` over that list's own scores, so cosines and BM25 scores land on one scale. An id
    missing from a list gets that list's lowest z (it ranked below everything the list
    returned); a list whose scores are all equal gives every id 0. Lists of weight 0 and
    empty lists are ignored. The score returned is the logistic ``1 / (1 + e^-z(d))``: the
    same order, in (0, 1), so corpus weights can multiply it and rerankers divide by the best
    (the normal CDF would fit z-scores too, but it rounds to 1.0 from z = 8.3, which a
    keyword list's best hit can reach; the logistic holds every order up to z = 36).
    Returns ``(id, score)`` best first; equal scores by id.
    """
    used = [(items, w) for items, w in lists if w > 0 and items]
    if any(w < 0 or not math.isfinite(w) for _, w in lists):
        raise ValueError("fusion weights must be finite and >= 0")
    total = sum(w for _, w in used)
    normalised: list[tuple[dict[int, float], float, float]] = []
    for items, w in used:
        z = _zscores([score for _, score in items])
        normalised.append(({i: v for (i, _), v in zip(items, z, strict=True)}, min(z), w / total))
    ids = {i for by_id, _, _ in normalised for i in by_id}
    fused = {i: sum(w * by_id.get(i, low) for by_id, low, w in normalised) for i in ids}
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(i, 1.0 / (1.0 + math.exp(-z))) for i, z in ranked]


def _zscores(scores: Sequence[float]) -> list[float]:
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    return [(s - mean) / std if std > 0 else 0.0 for s in scores]


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
