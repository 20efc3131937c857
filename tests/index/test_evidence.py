"""Index.search(budget=N): the best evidence within N characters (SPEC 6.8), checked on long
documents (ten SciFact abstracts per document, each under its own heading) in every mode:
the texts fit the budget, resolve to the exact source span, never overlap or cross a
document, a larger budget keeps what a smaller one returned, and the agentic reads widen a
budgeted hit."""

from __future__ import annotations

import pytest

from guaipeca import Index, InvalidArgumentError
from guaipeca.embed import HashingEmbedder
from guaipeca.index.evidence import MAX_BUDGET
from support import beir_queries

MODES = ("hybrid", "dense", "keyword")
BUDGETS = (300, 1000, 2500, 6000)


@pytest.fixture(scope="module")
def long_index(scifact_sample_module: dict[str, str]) -> Index:
    index = Index(embedder=HashingEmbedder(64))
    items = list(scifact_sample_module.values())
    docs = {}
    for d in range(0, len(items), 10):
        parts = [f"# Long document {d // 10}"]
        parts += ["#" + text for text in items[d : d + 10]]  # each title becomes a "##" section
        docs[f"long-{d // 10}"] = "\n\n".join(parts) + "\n"
    index.add_documents(docs)
    return index


@pytest.fixture(scope="module")
def scifact_sample_module() -> dict[str, str]:
    from support import beir_corpus

    return {k: f"# {t}\n\n{x}" for k, (t, x) in beir_corpus("scifact", 150).items()}


def _queries(n: int = 12) -> list[str]:
    return [q for _, q in list(beir_queries("scifact"))[:n]]


@pytest.mark.parametrize("mode", MODES)
def test_budgeted_spans_fit_resolve_and_never_overlap(long_index: Index, mode: str) -> None:
    for query in _queries():
        for budget in BUDGETS:
            hits = long_index.search(query, mode=mode, budget=budget)
            assert hits, query
            assert sum(len(h.text) for h in hits) <= budget
            seen: dict[str, list[tuple[int, int]]] = {}
            for h in hits:
                assert long_index.resolve(h) == h.text  # exact, within one document
                assert h.end - h.start == len(h.text)
                for lo, hi in seen.get(h.doc_id, []):
                    assert h.end <= lo or h.start >= hi, "overlapping spans"
                seen.setdefault(h.doc_id, []).append((h.start, h.end))
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_larger_budget_never_drops_a_whole_span_a_smaller_one_returned(
    long_index: Index, mode: str
) -> None:
    for query in _queries(8):
        kept: set[tuple[str, int]] = set()
        for budget in BUDGETS:
            hits = long_index.search(query, mode=mode, budget=budget)
            chars = {(h.doc_id, k) for h in hits for k in range(h.start, h.end)}
            assert kept <= chars, (query, budget)
            kept = {(h.doc_id, k) for h in hits if not h.truncated for k in range(h.start, h.end)}


def test_a_budgeted_hit_is_cited_and_widened_by_the_agentic_reads(long_index: Index) -> None:
    (hit, *_) = long_index.search(_queries(1)[0], budget=800)
    assert hit.source_path is None or hit.source_path
    assert hit.heading_trail[0].startswith("Long document")
    chunk = long_index.get_chunk(hit.chunk_id)
    assert chunk.doc_id == hit.doc_id and chunk.start <= hit.start < chunk.end
    around = long_index.neighbors(hit.chunk_id, window=1)
    assert any(c.chunk_id == hit.chunk_id for c in around)
    after = long_index.read_document(hit.doc_id, offset=hit.end, max_chars=500)
    assert after.offset == hit.end
    assert hit.snippet


def test_top_k_caps_the_number_of_spans(long_index: Index) -> None:
    hits = long_index.search(_queries(1)[0], budget=6000, top_k=2)
    assert 1 <= len(hits) <= 2


@pytest.mark.parametrize("budget", [0, -5, MAX_BUDGET + 1, 2.5, "1000", True])
def test_a_bad_budget_is_a_one_line_error(long_index: Index, budget: object) -> None:
    with pytest.raises(InvalidArgumentError, match="budget must be"):
        long_index.search("tax", budget=budget)  # type: ignore[arg-type]


def test_budget_with_another_return_mode_is_refused(long_index: Index) -> None:
    with pytest.raises(InvalidArgumentError, match="return_mode 'chunks'"):
        long_index.search("tax", budget=1000, return_mode="documents")
    with pytest.raises(InvalidArgumentError, match="section_mode"):
        long_index.search("tax", budget=1000, section_mode=True)
