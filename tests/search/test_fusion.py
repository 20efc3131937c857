"""Fusion functions against hand-computed references."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.search.fusion import (
    SCORE_FUSIONS,
    combine,
    dense_weight_for,
    explain_scores,
    fuse_scores,
    rrf_weights,
    weighted_rrf,
    zscore_fusion,
)


def test_weighted_rrf_matches_the_formula() -> None:
    fused = dict(weighted_rrf([([1, 2, 3], 1.0), ([3, 1], 2.0)], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 2 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 2 / 61)


def test_ties_are_broken_by_id_and_zero_weight_lists_are_ignored() -> None:
    assert weighted_rrf([([5, 4], 1.0), ([4, 5], 1.0)], k=10) == [
        (4, pytest.approx(1 / 11 + 1 / 12)),
        (5, pytest.approx(1 / 11 + 1 / 12)),
    ]
    assert [i for i, _ in weighted_rrf([([1], 0.0), ([2], 1.0)])] == [2]
    with pytest.raises(ValueError):
        weighted_rrf([([1], 1.0)], k=0)


@given(
    st.lists(st.integers(0, 50), unique=True, max_size=30),
    st.lists(st.integers(0, 50), unique=True, max_size=30),
)
def test_fusion_of_one_list_with_itself_keeps_its_order(a: list[int], b: list[int]) -> None:
    assert [i for i, _ in weighted_rrf([(a, 1.0), (a, 3.0)])] == a
    fused = weighted_rrf([(a, 1.0), (b, 1.0)])
    assert {i for i, _ in fused} == set(a) | set(b)
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)


def test_zscore_fusion_matches_the_formula() -> None:
    dense = [(1, 0.9), (2, 0.5), (3, 0.1)]  # mean 0.5, std sqrt(0.32/3)
    keyword = [(3, 12.0), (4, 6.0)]  # mean 9, std 3
    sd = math.sqrt(0.32 / 3)
    z_dense = {1: 0.4 / sd, 2: 0.0, 3: -0.4 / sd}
    z_kw = {3: 1.0, 4: -1.0}
    fused = dict(zscore_fusion([(dense, 1.0), (keyword, 1.5)]))

    def logistic(z: float) -> float:
        return 1 / (1 + math.exp(-z))

    for i in (1, 2, 3, 4):
        z = (1.0 * z_dense.get(i, -0.4 / sd) + 1.5 * z_kw.get(i, -1.0)) / 2.5
        assert fused[i] == pytest.approx(logistic(z))
    assert all(0 < v < 1 for v in fused.values())


def test_zscore_fusion_ignores_zero_weight_and_empty_lists_and_orders_ties_by_id() -> None:
    keyword = [(7, 3.0), (5, 2.0), (9, 2.0)]
    assert [i for i, _ in zscore_fusion([([(1, 0.9)], 0.0), (keyword, 1.0)])] == [7, 5, 9]
    assert [i for i, _ in zscore_fusion([([], 1.0), (keyword, 1.0)])] == [7, 5, 9]
    assert zscore_fusion([([(2, 1.0), (1, 1.0)], 1.0)]) == [(1, 0.5), (2, 0.5)]  # std 0
    assert zscore_fusion([]) == []
    with pytest.raises(ValueError):
        zscore_fusion([(keyword, -1.0)])


# Scores on a 1/64 grid: two scores a few ulps apart may tie once normalised, as they may
# in any score normalisation; real scores (cosines, BM25) are never that close and distinct.
SCORE = st.integers(-320, 3200).map(lambda n: n / 64)


@given(
    st.lists(st.tuples(st.integers(0, 40), SCORE), unique_by=lambda t: t[0]),
    st.lists(st.tuples(st.integers(0, 40), SCORE), unique_by=lambda t: t[0]),
)
def test_zscore_fusion_of_one_list_keeps_its_order_and_covers_every_id(
    a: list[tuple[int, float]], b: list[tuple[int, float]]
) -> None:
    ranked = sorted(a, key=lambda t: (-t[1], t[0]))
    fused = zscore_fusion([(ranked, 2.0)])
    # equal scores tie and go by id; otherwise the list's own order
    assert [i for i, _ in fused] == [i for i, _ in ranked]
    both = zscore_fusion([(a, 1.0), (b, 1.5)])
    assert {i for i, _ in both} == {i for i, _ in a} | {i for i, _ in b}
    scores = [s for _, s in both]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_the_dense_weight_is_zero_only_for_a_language_the_model_does_not_know() -> None:
    english = frozenset({"en"})
    assert dense_weight_for(1.0, english, "pt") == 0.0
    assert dense_weight_for(1.0, english, "en") == 1.0
    assert dense_weight_for(1.0, None, "pt") == 1.0  # multilingual or unknown model
    assert dense_weight_for(0.7, english, None) == 0.7  # unknown corpus language


def test_the_models_fusion_weight_scales_the_dense_weight() -> None:
    english = frozenset({"en"})
    assert dense_weight_for(1.0, english, "en", 0.1) == pytest.approx(0.1)
    assert dense_weight_for(2.0, None, "pt", 0.25) == pytest.approx(0.5)
    assert dense_weight_for(1.0, english, "pt", 0.1) == 0.0  # the language rule still holds
    assert dense_weight_for(0.7, english, "en", 1.0) == 0.7  # full weight: unchanged
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="fusion weight"):
            dense_weight_for(1.0, None, None, bad)


def test_rrf_weights_keep_the_total_and_the_lowered_ratio() -> None:
    assert rrf_weights(1.0, 1.5, 1.0) == (1.0, 1.5)  # untouched: bundled rankings unchanged
    assert rrf_weights(1.0, 1.5, 0.0) == (0.0, 2.5)  # a dropped list hands its weight over
    dense, keyword = rrf_weights(1.0, 1.5, 0.1)
    assert dense + keyword == pytest.approx(2.5)
    assert dense / keyword == pytest.approx(0.1 / 1.5)


# Any keyword list of up to search.candidates (100) distinct ids, any dense list.
_KEYWORD = st.lists(st.integers(0, 400), min_size=1, max_size=100, unique=True)
_DENSE = st.lists(st.integers(0, 400), max_size=100, unique=True)


@given(_KEYWORD, _DENSE)
def test_a_useless_dense_list_at_the_static_weight_cannot_outrank_keyword_hits(
    keyword: list[int], dense: list[int]
) -> None:
    """The contract behind hybrid >= keyword for the static model: with the default weights
    (dense 1.0, BM25 1.5, k 10) and the static model's fusion weight 0.1, whatever its dense
    list holds, keyword search's first hit stays first and every keyword hit stays above
    every chunk keyword search did not find. A useless dense list can only reorder keyword
    hits among themselves, and only near-ties."""
    from guaipeca.embed.static import STATIC_FUSION_WEIGHT

    w_dense, w_bm25 = rrf_weights(1.0, 1.5, dense_weight_for(1.0, None, None, STATIC_FUSION_WEIGHT))
    fused = [i for i, _ in weighted_rrf([(dense, w_dense), (keyword, w_bm25)], k=10.0)]
    assert fused[0] == keyword[0]
    found = set(keyword)
    assert fused[: len(keyword)] == [i for i in fused if i in found]


@given(st.lists(st.integers(0, 40), min_size=3, max_size=30, unique=True))
def test_at_full_weight_a_dense_list_can_displace_the_keyword_top_hit(keyword: list[int]) -> None:
    # The counterpart that shows the property above is not free: at weight 1 a dense list
    # holding only the keyword list's second hit puts it first.
    w_dense, w_bm25 = rrf_weights(1.0, 1.5, dense_weight_for(1.0, None, None, 1.0))
    fused = weighted_rrf([([keyword[1]], w_dense), (keyword, w_bm25)], k=10.0)
    assert fused[0][0] == keyword[1]


# -- score fusions and their explanations ---------------------------------------------------
DENSE = [(1, 0.9), (2, 0.5), (3, 0.1)]
KEYWORD = [(3, 12.0), (4, 6.0)]


def test_minmax_combmnz_and_dbsf_match_their_formulas() -> None:
    d_mm = {1: 1.0, 2: 0.5, 3: 0.0}
    k_mm = {3: 1.0, 4: 0.0}
    share = {"d": 1.0 / 2.5, "k": 1.5 / 2.5}
    minmax = dict(fuse_scores("minmax", [(DENSE, 1.0), (KEYWORD, 1.5)]))
    combmnz = dict(fuse_scores("combmnz", [(DENSE, 1.0), (KEYWORD, 1.5)]))
    for i in (1, 2, 3, 4):
        mix = share["d"] * d_mm.get(i, 0.0) + share["k"] * k_mm.get(i, 0.0)
        assert minmax[i] == pytest.approx(mix)
        assert combmnz[i] == pytest.approx(((i in d_mm) + (i in k_mm)) * mix)
    # dbsf: mean +- 3 std mapped to [0, 1]
    sd = math.sqrt(0.32 / 3)
    dbsf = dict(fuse_scores("dbsf", [(DENSE, 1.0), (KEYWORD, 1.0)]))
    d_dbsf = {i: (s - (0.5 - 3 * sd)) / (6 * sd) for i, s in DENSE}
    k_dbsf = {3: (12 - 0) / 18, 4: (6 - 0) / 18}  # mean 9, std 3: [0, 18]
    for i in (1, 2, 3, 4):
        assert dbsf[i] == pytest.approx(0.5 * d_dbsf.get(i, 0.0) + 0.5 * k_dbsf.get(i, 0.0))


def test_rrf_over_scored_lists_is_weighted_rrf() -> None:
    ranks = weighted_rrf([([1, 2, 3], 1.0), ([3, 4], 1.5)], k=10)
    assert fuse_scores("rrf", [(DENSE, 1.0), (KEYWORD, 1.5)], k=10) == ranks


def test_unknown_fusions_and_bad_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse_scores("sum", [(DENSE, 1.0)])
    with pytest.raises(ValueError):
        fuse_scores("minmax", [(DENSE, -1.0)])


LISTS = st.lists(st.tuples(st.integers(0, 40), SCORE), unique_by=lambda t: t[0], max_size=25)


@given(LISTS, LISTS, st.sampled_from([0.0, 0.25, 1.0, 1.5]), st.sampled_from([1.0, 60.0]))
def test_explained_parts_recompute_every_fused_score(
    a: list[tuple[int, float]], b: list[tuple[int, float]], w: float, k: float
) -> None:
    a = sorted(a, key=lambda t: -t[1])
    b = sorted(b, key=lambda t: -t[1])
    for method in ("rrf", *SCORE_FUSIONS):
        fused = fuse_scores(method, [(a, w), (b, 1.0)], k=k)
        parts = explain_scores(method, [(a, w), (b, 1.0)], [i for i, _ in fused], k=k)
        for i, score in fused:
            dense, keyword = parts[i]
            used = [p for p in (dense, keyword) if p.weight > 0]
            present = sum(p.rank is not None for p in used)
            total = sum(p.contribution for p in used)
            assert combine(method, total, present) == pytest.approx(score, abs=1e-12)
            assert dense.rank == (next((r for r, (j, _) in enumerate(a, 1) if j == i), None))
