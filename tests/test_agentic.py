"""Agentic retrieval through the library API: keyword / semantic / filtered search,
read_chunks, read_neighbors (exact spans) and find_related (a two-hop test on SciFact).

The deterministic hashing embedder stands in for the model: these calls sit above
embedding, and the BM25 side and the enrichment are the real ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca import Index, InvalidArgumentError, NotFoundError, agentic
from guaipeca.agentic import build_filter
from guaipeca.config import EngineSettings, EnrichSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import StoppedError
from support import beir_corpus

MEMO = (
    "# Board memo\n\n"
    "## Budget\n\nThe Banco do Brasil approved the budget on 3 March 2024.\n\n"
    "## Staff\n\nMaria Silva joined NASA in 2019 as an engineer.\n\n"
    "| team | size |\n|---|---|\n| ops | 4 |\n\n"
    "## Plans\n\nThe launch is planned for 2025-06-01 with ESA.\n"
)
NOTE = "# Nota\n\nA Universidade de São Paulo assinou o acordo em 5 de maio de 2021.\n"


@pytest.fixture
def small() -> Iterator[Index]:
    idx = Index(embedder=HashingEmbedder(64), settings=EngineSettings(chunking={"max_size": 80}))
    idx.add_documents({"memo": MEMO})
    idx.create_corpus("pt", language="portuguese")
    idx.add_documents({"nota": NOTE}, corpus="pt")
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def scifact() -> Iterator[Index]:
    docs = {k: f"# {t}\n\n{x}" for k, (t, x) in beir_corpus("scifact", 300).items()}
    idx = Index(embedder=HashingEmbedder(64))
    idx.add_documents(docs)
    yield idx
    idx.close()


# -- searches -------------------------------------------------------------------------------
def test_keyword_and_semantic_search_are_the_search_modes(scifact: Index) -> None:
    q = "low birth weight and perinatal mortality"
    assert agentic.keyword_search(scifact, q, top_k_after=5) == scifact.search(
        q, mode="keyword", top_k=5
    )
    assert agentic.semantic_search(scifact, q, top_k_after=5) == scifact.search(
        q, mode="dense", top_k=5
    )
    # top_k_before is the depth handed on before the cut: a shallow list is a prefix.
    deep = agentic.keyword_search(scifact, q, top_k_before=50, top_k_after=3)
    assert [h.chunk_id for h in deep] == [h.chunk_id for h in agentic.keyword_search(scifact, q)][
        :3
    ]


def test_top_k_before_is_what_the_reranker_sees(scifact: Index) -> None:
    q = "stem cells niche"
    plain = agentic.keyword_search(scifact, q, top_k_after=5)
    assert all(h.scores.rerank is None for h in plain)
    reranked = agentic.keyword_search(scifact, q, top_k_before=20, top_k_after=5, rerank=True)
    assert len(reranked) == 5 and all(h.scores.rerank is not None for h in reranked)
    assert reranked == scifact.search(q, mode="keyword", top_k=5, rerank=True, top_k_before=20)
    # the reranked five come from the first twenty fused candidates
    first20 = {h.chunk_id for h in agentic.keyword_search(scifact, q, top_k_after=20)}
    assert {h.chunk_id for h in reranked} <= first20
    filtered = agentic.filtered_search(scifact, q, top_k_before=10, top_k_after=3, rerank=True)
    assert len(filtered) == 3 and all(h.scores.rerank is not None for h in filtered)


def test_top_k_before_must_cover_top_k_after(scifact: Index) -> None:
    with pytest.raises(InvalidArgumentError, match="top_k_before"):
        agentic.keyword_search(scifact, "cells", top_k_before=2, top_k_after=5)
    with pytest.raises(InvalidArgumentError, match="positive"):
        agentic.semantic_search(scifact, "cells", top_k_after=0)


def test_filtered_search_narrows_by_entity_keyword_date_and_content(small: Index) -> None:
    by_entity = agentic.filtered_search(small, "engineer", entities=["nasa"], top_k_after=10)
    assert [h.heading_path[-1] for h in by_entity] == ["Staff"]
    accents = agentic.filtered_search(small, "acordo", entities=["sao paulo"], corpora=["pt"])
    assert [h.doc_id for h in accents] == ["nota"]
    assert (
        agentic.filtered_search(small, "budget", keywords=["budget"])[0].heading_path[-1]
        == "Budget"
    )
    dated = agentic.filtered_search(
        small, "budget engineer", date_from="2024-03", date_to="2024-03"
    )
    assert {h.heading_path[-1] for h in dated} == {"Budget"}
    later = agentic.filtered_search(small, "planned launch", date_from="2025")
    assert {h.heading_path[-1] for h in later} == {"Plans"}
    tables = agentic.filtered_search(small, "ops team size", content_types=["table"])
    assert tables and all("|" in h.text for h in tables)
    assert agentic.filtered_search(small, "ops", content_types=["pdf"]) == []
    none = agentic.filtered_search(small, "budget", entities=["Petrobras"])
    assert none == []


def test_filtered_search_refuses_bad_conditions(small: Index) -> None:
    with pytest.raises(InvalidArgumentError, match="date_from"):
        agentic.filtered_search(small, "x", date_from="March 2024")
    with pytest.raises(InvalidArgumentError, match="after date_to"):
        agentic.filtered_search(small, "x", date_from="2025", date_to="2024")
    with pytest.raises(InvalidArgumentError, match="entities"):
        agentic.filtered_search(small, "x", entities=[""])


@settings(max_examples=50, deadline=None)
@given(
    kw=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), max_size=3),
    ents=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), max_size=3),
)
def test_any_terms_give_a_valid_filter(kw: list[str], ents: list[str]) -> None:
    from guaipeca.store import validate_where

    validate_where(build_filter(keywords=kw, entities=ents))


# -- reading ---------------------------------------------------------------------------------
def test_read_chunks_reads_many_in_order_and_names_missing_ids(small: Index) -> None:
    ids = [c.chunk_id for c in small.neighbors("default:1", window=5)]
    got = agentic.read_chunks(small, [*reversed(ids), ids[0]])
    assert [c.chunk_id for c in got] == list(reversed(ids))
    with pytest.raises(NotFoundError, match="'default:999'"):
        agentic.read_chunks(small, [ids[0], "default:999"])


def test_read_neighbors_returns_the_exact_adjacent_spans(small: Index) -> None:
    doc = small.get_document("memo")
    chunks = small.neighbors("default:1", window=100)
    assert len(chunks) >= 5
    mid = chunks[2]
    (span,) = agentic.read_neighbors(small, [mid.chunk_id], window=1)
    assert span.chunk_ids == tuple(c.chunk_id for c in chunks[1:4])
    assert (span.start, span.end) == (chunks[1].start, chunks[3].end)
    assert span.text == doc.text[chunks[1].start : chunks[3].end]
    assert span.requested == (mid.chunk_id,)
    # Windows that overlap or touch merge; far ones stay apart.
    first, last = chunks[0], chunks[-1]
    spans = agentic.read_neighbors(small, [last.chunk_id, first.chunk_id], window=0)
    assert [s.chunk_ids for s in spans] == [(first.chunk_id,), (last.chunk_id,)]
    merged = agentic.read_neighbors(small, [chunks[0].chunk_id, chunks[2].chunk_id], window=1)
    assert len(merged) == 1 and merged[0].chunk_ids == tuple(c.chunk_id for c in chunks[:4])
    assert merged[0].text == doc.text[chunks[0].start : chunks[3].end]
    with pytest.raises(InvalidArgumentError, match="window"):
        agentic.read_neighbors(small, [mid.chunk_id], window=51)


def test_enrichment_is_stored_per_chunk(small: Index) -> None:
    staff = agentic.filtered_search(small, "engineer", entities=["NASA"])[0]
    e = agentic.enrichment(small, staff.chunk_id)[staff.chunk_id]
    assert e is not None
    assert "Maria Silva" in e.entities and "NASA" in e.entities
    assert "2019" in e.dates
    nota = agentic.read_chunks(small, "pt:1")[0]
    pt = agentic.enrichment(small, nota.chunk_id)[nota.chunk_id]
    assert pt is not None and pt.language == "portuguese"
    assert "Universidade de São Paulo" in pt.entities and "2021-05-05" in pt.dates


def test_enrichment_can_be_switched_off() -> None:
    off = EngineSettings(enrich=EnrichSettings(local=False))
    with Index(embedder=HashingEmbedder(64), settings=off) as idx:
        idx.add_documents({"memo": MEMO, "deal": "# Deal\n\nNASA and ESA signed in 2019.\n"})
        assert agentic.enrichment(idx, "default:1") == {"default:1": None}
        assert agentic.filtered_search(idx, "engineer", entities=["NASA"]) == []
        # find_related still works: it extracts the seed's terms on the fly.
        staff = agentic.keyword_search(idx, "Maria Silva engineer")[0]
        assert staff.doc_id == "memo"
        related = agentic.find_related(idx, staff.chunk_id)
        assert related and related[0].hit.doc_id == "deal"
        assert "NASA" in related[0].shared_entities
        assert all(r.hit.doc_id != "memo" for r in related)


# -- find_related ----------------------------------------------------------------------------
QUERY = "53% of perinatal mortality is due to low birth weight."


def test_find_related_reaches_a_document_sharing_an_entity_but_no_query_term(
    scifact: Index,
) -> None:
    analyzer = scifact.store("default").analyzer
    query_terms = set(analyzer.tokens(QUERY))
    hit = agentic.keyword_search(scifact, QUERY, top_k_after=1)[0]
    assert query_terms & set(analyzer.tokens(hit.text))  # hop 1: the query finds it
    related = agentic.find_related(scifact, [hit.chunk_id], QUERY, top_k_after=10)
    far = [r for r in related if not query_terms & set(analyzer.tokens(r.hit.text))]
    assert far, "no related chunk outside the query's words"
    target = far[0]
    # hop 2: it shares a named entity of the seed, found in its own text, and no query word
    assert target.shared_entities
    seed_entities = agentic.enrichment(scifact, hit.chunk_id)[hit.chunk_id]
    assert seed_entities is not None
    for name in target.shared_entities:
        assert name in seed_entities.entities
        assert name.casefold() in target.hit.text.casefold()
    assert target.hit.doc_id != hit.doc_id
    # the query alone never reaches it
    plain = scifact.search(QUERY, mode="keyword", top_k=1000)
    assert target.hit.chunk_id not in {h.chunk_id for h in plain}


def test_find_related_excludes_what_the_agent_has_and_follows_further(scifact: Index) -> None:
    hit = agentic.keyword_search(scifact, QUERY, top_k_after=1)[0]
    first = agentic.find_related(scifact, hit.chunk_id, top_k_after=5)
    ids = [r.hit.chunk_id for r in first]
    assert hit.chunk_id not in ids and all(r.hit.doc_id != hit.doc_id for r in first)
    again = agentic.find_related(scifact, hit.chunk_id, top_k_after=5, exclude=ids[:2])
    assert not set(ids[:2]) & {r.hit.chunk_id for r in again}
    # multi-hop: follow the first result's own entities, leaving out what we hold
    hop2 = agentic.find_related(scifact, ids[0], top_k_after=5, exclude=[hit.chunk_id])
    assert hop2 and hit.chunk_id not in {r.hit.chunk_id for r in hop2}
    with pytest.raises(NotFoundError):
        agentic.find_related(scifact, "default:999999")


def test_find_related_honours_a_filter(scifact: Index) -> None:
    hit = agentic.keyword_search(scifact, QUERY, top_k_after=1)[0]
    first = agentic.find_related(scifact, hit.chunk_id, top_k_after=5)
    banned = first[0].hit.doc_id
    kept = agentic.find_related(
        scifact, hit.chunk_id, top_k_after=5, where={"doc_id": {"$ne": banned}}
    )
    assert kept and banned not in {r.hit.doc_id for r in kept}
    only = agentic.find_related(scifact, hit.chunk_id, top_k_after=5, where={"doc_id": banned})
    assert {r.hit.doc_id for r in only} == {banned}


def test_find_related_scores_are_ranked(scifact: Index) -> None:
    hit = agentic.keyword_search(scifact, "HIV vaccine", top_k_after=1)[0]
    related = agentic.find_related(scifact, hit.chunk_id, "vaccine adoption", top_k_after=8)
    scores = [r.hit.score for r in related]
    assert scores == sorted(scores, reverse=True)
    assert any(r.shared_entities or r.shared_keywords for r in related)


def test_a_cancelled_agentic_search_stops_instead_of_running_on(scifact: Index) -> None:
    """The MCP tools pass the gate's cancel event; once set (the deadline passed), every
    agentic search stops at its next checkpoint and frees its slot (issue 20, item 4)."""
    stop = threading.Event()
    stop.set()
    hit = agentic.keyword_search(scifact, QUERY, top_k_after=1)[0]
    for mode in ("keyword", "dense", "hybrid"):
        with pytest.raises(StoppedError):
            agentic.mode_search(scifact, mode, QUERY, top_k_after=3, cancel=stop)
    with pytest.raises(StoppedError):
        agentic.find_related(scifact, hit.chunk_id, QUERY, top_k_after=3, cancel=stop)
    # not cancelled: the same calls answer
    assert agentic.mode_search(scifact, "keyword", QUERY, top_k_after=3, cancel=threading.Event())
