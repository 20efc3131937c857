"""The lexical reranker: its features, its ordering contract, and its place in Index.search."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca import Index, InvalidArgumentError
from guaipeca.config import EngineSettings
from guaipeca.search.rerank import Candidate, bm25_idf, coverage, lexical_rerank, proximity
from support import CountingEmbedder


def test_bm25_idf_is_positive_and_falls_with_frequency() -> None:
    assert bm25_idf(100, 1) > bm25_idf(100, 50) > bm25_idf(100, 100) > 0
    assert bm25_idf(10, 0) == pytest.approx(math.log(1 + 10.5 / 0.5))


def test_coverage_weighs_terms_by_idf() -> None:
    idf = {"rare": 3.0, "common": 1.0}
    assert coverage(["rare", "common"], {"rare"}, idf) == pytest.approx(0.75)
    assert coverage(["rare", "common", "rare"], {"common"}, idf) == pytest.approx(0.25)
    assert coverage(["rare"], set(), idf) == 0.0
    assert coverage([], {"rare"}, idf) == 0.0


def test_proximity_is_terms_over_smallest_window() -> None:
    toks = ["a", "x", "b", "y", "y", "a", "b"]
    assert proximity(["a", "b"], toks) == pytest.approx(2 / 2)  # "a b" at the end
    assert proximity(["a", "b"], ["a", "x", "x", "b"]) == pytest.approx(2 / 4)
    assert proximity(["a", "c"], toks) == 0.0  # only one term present
    assert proximity(["a", "b", "z"], ["b", "q", "a"]) == pytest.approx(2 / 3)


@given(
    st.lists(st.sampled_from("abcdef"), max_size=40),
    st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5),
)
def test_proximity_is_a_share(tokens: list[str], terms: list[str]) -> None:
    value = proximity(terms, tokens)
    assert 0.0 <= value <= 1.0
    assert (value > 0) == (len(set(terms) & set(tokens)) >= 2)


def test_rerank_lifts_the_chunk_holding_the_rare_terms() -> None:
    idf = {"gene": 4.0, "cancer": 1.0}
    cands = [
        Candidate("dense-only", 1.0, ["tumour", "growth"], idf),
        Candidate("both", 0.9, ["cancer", "gene", "link"], idf),
        Candidate("common", 0.8, ["cancer", "risk"], idf),
    ]
    out = lexical_rerank(["gene", "cancer"], cands, coverage_weight=0.3, proximity_weight=0.05)
    assert [k for k, _ in out] == ["both", "dense-only", "common"]
    assert out[0][1] == pytest.approx(0.9 + 0.3 * 1.0 + 0.05 * 1.0)
    # Weights of zero keep the fused order (scores normalised by the best one).
    same = lexical_rerank(["gene"], cands, coverage_weight=0, proximity_weight=0)
    assert [k for k, _ in same] == ["dense-only", "both", "common"]
    assert same[0][1] == pytest.approx(1.0)


def test_heading_weight_is_the_toc_boost() -> None:
    idf = {"install": 2.0}
    cands = [
        Candidate("body", 1.0, ["install"], idf, frozenset({"usage"})),
        Candidate("section", 0.95, ["install"], idf, frozenset({"install"})),
    ]
    out = lexical_rerank(
        ["install"], cands, coverage_weight=0, proximity_weight=0, heading_weight=0.1
    )
    assert [k for k, _ in out] == ["section", "body"]


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.01, max_value=1.0),
            st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=8),
        ),
        min_size=1,
        max_size=20,
    ),
    st.floats(min_value=0, max_value=2),
    st.floats(min_value=0, max_value=2),
)
def test_rerank_is_a_permutation_never_below_the_normalised_score(
    items: list[tuple[float, list[str]]], cov: float, prox: float
) -> None:
    idf = {"a": 2.0, "b": 1.0, "c": 0.5}
    cands = [Candidate(i, s, toks, idf) for i, (s, toks) in enumerate(items)]
    out = lexical_rerank(["a", "b", "c"], cands, coverage_weight=cov, proximity_weight=prox)
    assert sorted(k for k, _ in out) == list(range(len(items)))
    best = max(s for s, _ in items)
    for key, value in out:
        assert value >= items[key][0] / best - 1e-12
    assert [v for _, v in out] == sorted((v for _, v in out), reverse=True)


DOCS = {
    # BM25 ranks "vague" first (two of the three query words, repeated, in a short text);
    # only "exact" holds all three, and a strong coverage weight puts it first.
    "vague": "Protein kinase. Protein kinase protein kinase.",
    "exact": "Phosphorylation of a protein by a kinase: " + "cells divide and grow. " * 6,
    "p1": "Phosphorylation is common.",
    "p2": "phosphorylation again",
    "other": "Unrelated text about rivers and mountains.",
}


@pytest.fixture
def index() -> Index:
    base = EngineSettings()
    strong = base.search.model_copy(update={"rerank_coverage": 5.0, "rerank_proximity": 0.0})
    ix = Index(embedder=CountingEmbedder(), settings=base.model_copy(update={"search": strong}))
    ix.add_documents(DOCS)
    return ix


def test_search_rerank_reorders_and_reports_its_score(index: Index) -> None:
    query = "protein kinase phosphorylation"
    plain = index.search(query, mode="keyword", rerank=False)
    reranked = index.search(query, mode="keyword", rerank=True)
    assert plain[0].doc_id == "vague" and plain[0].scores.rerank is None
    assert reranked[0].doc_id == "exact"
    assert all(h.scores.rerank is not None for h in reranked)
    assert [h.score for h in reranked] == sorted((h.score for h in reranked), reverse=True)
    assert {h.chunk_id for h in plain} == {h.chunk_id for h in reranked}


def test_top_k_before_bounds_the_reranked_head(index: Index) -> None:
    query = "protein kinase phosphorylation"
    # With one candidate reranked, the fused order stands.
    head = index.search(query, mode="keyword", rerank=True, top_k_before=1)
    assert head[0].doc_id == "vague"
    assert head[0].scores.rerank is not None and head[1].scores.rerank is None
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidArgumentError, match="top_k_before"):
            index.search(query, rerank=True, top_k_before=bad)  # type: ignore[arg-type]


def test_toc_rerank_favours_matching_headings() -> None:
    base = EngineSettings()
    boost = base.search.model_copy(update={"toc_boost": 1.0})
    ix = Index(embedder=CountingEmbedder(), settings=base.model_copy(update={"search": boost}))
    ix.add_documents(
        {
            "a": "# Cooking\n\nBread, bread and more bread in the oven.",
            "b": "# Bread\n\n" + "Flour, water, yeast and salt; knead, rest, shape. " * 8,
        }
    )
    plain = ix.search("bread", mode="keyword")
    boosted = ix.search("bread", mode="keyword", toc_rerank=True)
    assert plain[0].doc_id == "a"
    assert boosted[0].doc_id == "b"
