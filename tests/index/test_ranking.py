"""Hybrid fusion inside the index (index/ranking.py): ``fusion: auto`` and the explanations.

The contract: for every fusion and mode, each hit's explanation recomputes the score the
search returned, from the parts it shows.
"""

from __future__ import annotations

import pytest

from guaipeca import Explanation, Index
from guaipeca.config import EngineSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.index.ranking import hybrid_plan
from guaipeca.search.fusion import combine
from guaipeca.types import FUSIONS

DOCS = {
    "tax": "# Taxes\n\nIncome tax is due in April; the form lists every source of income.",
    "ducks": "# Ducks\n\nDucks feed on plants, insects and small fish in shallow water.",
    "geese": "# Geese\n\nGeese graze on grass and fly south before the winter.",
    "april": "# April\n\nApril showers bring May flowers; taxes are filed in spring.",
    "water": "# Water\n\nShallow ponds warm quickly, and insects hatch in spring water.",
}


def recomputed(e: Explanation) -> float:
    """The score from the explained parts, by the formula the explanation names."""
    parts = [p for p in (e.dense, e.keyword) if p is not None]
    if e.fusion in ("dense", "keyword"):
        return parts[0].raw * e.corpus_weight  # type: ignore[operator]
    used = [p for p in parts if p.weight > 0]
    if e.fusion == "rrf":
        total = sum(p.weight / (60.0 + p.rank) for p in used if p.rank is not None)
        assert total == pytest.approx(sum(p.contribution for p in used))
    present = sum(p.rank is not None for p in used)
    fused = combine(e.fusion, sum(p.contribution for p in used), present)
    assert fused == pytest.approx(e.fused, abs=1e-12)
    if e.shown_floor is not None:  # a fused 0, shown as the search's floor
        assert fused * e.corpus_weight == 0
        return e.shown_floor
    return fused * e.corpus_weight


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("weight", [1.0, 0.5])
def test_every_explanation_recomputes_the_score_returned(fusion: str, weight: float) -> None:
    settings = EngineSettings(search={"rrf_k": 60.0})
    with Index(embedder=HashingEmbedder(64), settings=settings) as index:
        index.add_documents(DOCS)
        index.set_corpus_weight("default", weight)
        for query in ("income tax april", "insects in shallow water", "geese winter"):
            hits = index.search(query, fusion=fusion, explain=True)
            assert hits
            for h in hits:
                e = h.explanation
                assert e is not None and not e.reranked
                assert e.corpus_weight == weight
                assert recomputed(e) == pytest.approx(h.score, abs=1e-12)
                assert e.score == h.score
                ranks = (e.dense.rank if e.dense else None, e.keyword.rank if e.keyword else None)
                assert ranks == (h.scores.dense_rank, h.scores.lexical_rank)


@pytest.mark.parametrize("mode", ["dense", "keyword"])
def test_a_single_retriever_explains_its_raw_score(mode: str) -> None:
    with Index(embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
        for h in index.search("income tax", mode=mode, explain=True):  # type: ignore[arg-type]
            assert h.explanation is not None and h.explanation.fusion == mode
            assert recomputed(h.explanation) == pytest.approx(h.score)


def test_a_reranked_hit_says_so_and_no_explanation_unless_asked() -> None:
    with Index(embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
        assert all(h.explanation is None for h in index.search("income tax"))
        hits = index.search("income tax april", rerank=True, explain=True)
        assert any(h.explanation and h.explanation.reranked for h in hits)
        assert "explanation" in hits[0].to_dict()
        assert "explanation" not in index.search("income tax")[0].to_dict()


def test_auto_is_combmnz_for_a_full_model_and_rank_fusion_for_a_weak_one() -> None:
    lists = ([(1, 0.9)], [(2, 3.0)])
    full = hybrid_plan(*lists, (1.0, 1.5), "auto", None, "english", 1.0)
    weak = hybrid_plan(*lists, (1.0, 1.5), "auto", None, "english", 0.1)
    foreign = hybrid_plan(*lists, (1.0, 1.5), "auto", frozenset({"en"}), "portuguese", 1.0)
    assert (full.method, weak.method) == ("combmnz", "rrf")
    assert [w for _, w in full.lists] == [1.0, 1.5]
    assert weak.lists[0][1] == pytest.approx(0.1 * 2.5 / 1.6)  # the total kept for RRF
    assert foreign.lists[0][1] == 0.0 and "language" in foreign.note


@pytest.mark.parametrize("fusion", ["combmnz", "minmax"])
def test_no_hybrid_hit_shows_a_score_of_zero(fusion: str) -> None:
    # Issue 38: min-max normalisation gives a list's last candidate 0, and a hit found by
    # that list alone showed "score 0.0", read as irrelevant. The ranking stays the same.
    with Index(embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
        hits = index.search("income tax april", fusion=fusion, top_k=10, explain=True)
        plain = index.search("income tax april", fusion=fusion, top_k=10)
    assert len(hits) == len(DOCS)  # every chunk: the dense list's last one among them
    assert all(h.score > 0 for h in hits), [(h.doc_id, h.score) for h in hits]
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in plain]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    last = hits[-1].explanation
    assert last is not None and last.fused == 0 and last.shown_floor == hits[-1].score
    assert hits[-1].score == min(s for s in scores if s != hits[-1].score) / 2
