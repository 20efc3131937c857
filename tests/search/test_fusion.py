"""Weighted RRF against a hand-computed reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.search.fusion import weighted_rrf


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
