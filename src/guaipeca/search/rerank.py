"""Lexical reranking of the fused candidates: query-term coverage, proximity, headings.

Hand-written: no cross-encoder ships in a package we can install offline (DESIGN.md), and
these features are cheap (a few ms for 50 chunks) and complementary to fusion: RRF only sees
ranks, so a chunk ranked high by the dense list alone may hold none of the rarer query words;
coverage (the IDF share of query terms present) and proximity (how tightly they sit together)
put such chunks back in their place, and heading coverage (the ToC boost, SPEC §6.6) favours
chunks whose section title names the query's terms. Pure functions over analysed tokens, so
the order is deterministic and identical for every storage backend.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Candidate", "bm25_idf", "coverage", "lexical_rerank", "proximity"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Candidate(Generic[K]):
    """One fused candidate: its key, fused score, analysed text and heading, and the IDF of
    the query terms in its own corpus (candidates from several corpora each bring theirs)."""

    key: K
    score: float
    tokens: Sequence[str]
    idf: Mapping[str, float]
    heading_tokens: frozenset[str] = frozenset()


def bm25_idf(num_docs: int, doc_freq: int) -> float:
    """BM25's IDF, ``ln(1 + (N - df + 0.5) / (df + 0.5))``: positive for any ``df <= N``."""
    return math.log(1.0 + max(0.0, num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def coverage(
    terms: Sequence[str], tokens: set[str] | frozenset[str], idf: Mapping[str, float]
) -> float:
    """The IDF-weighted share of distinct query ``terms`` found in ``tokens``, in [0, 1]."""
    distinct = set(terms)
    total = sum(idf.get(t, 0.0) for t in distinct)
    if total <= 0:
        return 0.0
    return sum(idf.get(t, 0.0) for t in distinct if t in tokens) / total


def proximity(terms: Sequence[str], tokens: Sequence[str]) -> float:
    """``m / w`` for the smallest window of ``w`` tokens holding all ``m`` distinct query
    terms present (m >= 2); 0 when fewer than two occur. In (0, 1]."""
    present = set(terms).intersection(tokens)
    if len(present) < 2:
        return 0.0
    # Sliding window over the token stream: the shortest span containing every present term.
    counts: dict[str, int] = {}
    best = len(tokens) + 1
    left = 0
    for right, tok in enumerate(tokens):
        if tok not in present:
            continue
        counts[tok] = counts.get(tok, 0) + 1
        while len(counts) == len(present):
            best = min(best, right - left + 1)
            out = tokens[left]
            left += 1
            if out in counts:
                counts[out] -= 1
                if not counts[out]:
                    del counts[out]
    return len(present) / best


def lexical_rerank(
    terms: Sequence[str],
    candidates: Sequence[Candidate[K]],
    *,
    coverage_weight: float,
    proximity_weight: float,
    heading_weight: float = 0.0,
    best: float | None = None,
) -> list[tuple[K, float]]:
    """Re-order ``candidates`` (best fused first), returning ``(key, new score)`` best first.

    ``new = score / max(score) + coverage_weight * coverage + proximity_weight * proximity
    + heading_weight * heading coverage``, so a new score is never below the normalised fused
    score and candidates left out of the reranking (normalised the same way) stay below.
    ``terms`` are the analysed query terms (duplicates ignored). Equal new scores keep the
    input order. ``best`` replaces ``max(score)`` when the candidates are one part of a larger
    list (several corpora reranked apart but merged on one scale).
    """
    if not candidates:
        return []
    top = max(c.score for c in candidates) if best is None else best
    scale = 1.0 / top if top > 0 else 1.0
    rescored: list[tuple[float, int, K]] = []
    for i, c in enumerate(candidates):
        value = c.score * scale
        if coverage_weight:
            value += coverage_weight * coverage(terms, set(c.tokens), c.idf)
        if proximity_weight:
            value += proximity_weight * proximity(terms, c.tokens)
        if heading_weight and c.heading_tokens:
            value += heading_weight * coverage(terms, c.heading_tokens, c.idf)
        rescored.append((value, i, c.key))
    rescored.sort(key=lambda t: (-t[0], t[1]))
    return [(key, value) for value, _, key in rescored]
