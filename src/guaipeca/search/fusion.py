"""Rank fusion: pure functions over ranked id lists.

Hand-written: it is a few lines, and the exact tie-breaking is part of our contract
(identical rankings in memory and on disk).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["weighted_rrf"]


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
