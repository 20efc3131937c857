"""bench/context.py's pure parts: the long-document set builder's spans, the coverage and
hit scores, the peers' chunk spans and the docs section's replacement."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from context_data import Result, Span, coverage, group_documents, hit_at, load_long_set
from context_doc import SECTION, write_section
from context_peers import fixed_windows, paragraphs, rrf

ROWS = [
    {"_id": "p1", "title": "Água", "text": "Primeiro parágrafo."},
    {"_id": "x1", "title": "Outro", "text": "Só um."},
    {"_id": "p2", "title": "Água", "text": "  Segundo, com espaço à volta.  "},
    {"_id": "p3", "title": "Água", "text": "Terceiro\n\ncom linha em branco."},
]


def test_each_paragraph_span_holds_its_text_in_corpus_order() -> None:
    files, spans, dropped = group_documents(ROWS)
    assert dropped == 0
    for row in ROWS:
        span = spans[row["_id"]]
        assert files[span.doc][span.start : span.end] == row["text"].strip()
    agua = spans["p1"].doc
    assert files[agua].startswith("# Água\n\nPrimeiro parágrafo.\n\nSegundo")
    assert spans["p1"].end < spans["p2"].start < spans["p3"].start


def test_titles_with_too_few_paragraphs_are_left_out() -> None:
    files, spans, dropped = group_documents(ROWS, min_docs=2)
    assert dropped == 1 and len(files) == 1 and "x1" not in spans


def test_a_beir_folder_gives_queries_with_their_answer_spans(tmp_path: Path) -> None:
    import json

    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "segundo?"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "só?"})
        + "\n"
    )
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tp2\t1\nq2\tx1\t1\n"
    )
    data = load_long_set(tmp_path, min_docs=2)
    assert list(data.queries) == ["q1"]  # q2's answer is in a dropped title
    (answer,) = data.answers["q1"]
    assert data.files[answer.doc][answer.start : answer.end] == "Segundo, com espaço à volta."


ANSWER = [Span("a", 100, 200)]


def test_coverage_reads_in_rank_order_and_cuts_at_the_budget() -> None:
    results = [Result("b", 0, 300), Result("a", 50, 250)]
    assert coverage(results, ANSWER, 300) == 0.0  # the budget is spent on the first result
    assert coverage(results, ANSWER, 400) == pytest.approx(0.5)  # a[50:150): 50 of 100
    assert coverage(results, ANSWER, 10_000) == 1.0


def test_coverage_never_counts_a_character_twice() -> None:
    results = [Result("a", 100, 150), Result("a", 120, 170), Result("a", 100, 150)]
    assert coverage(results, ANSWER, 10_000) == pytest.approx(0.7)
    assert coverage([Result("b", 100, 200)], ANSWER, 10_000) == 0.0  # another document


def test_hit_needs_half_of_the_answer_paragraph() -> None:
    assert hit_at([Result("a", 150, 400)], ANSWER, 1)
    assert not hit_at([Result("a", 151, 400)], ANSWER, 1)
    assert hit_at([Result("b", 0, 9), Result("a", 0, 1000)], ANSWER, 5)
    assert not hit_at([Result("b", 0, 9), Result("a", 0, 1000)], ANSWER, 1)


def test_peer_chunks_are_exact_spans() -> None:
    files, _, _ = group_documents(ROWS)
    for name, text in files.items():
        for chunk in fixed_windows(name, text * 40) + paragraphs(name, text):
            source = text * 40 if chunk.end - chunk.start > 200 else text
            assert source[chunk.start : chunk.end] == chunk.text
    windows = fixed_windows("d", "x" * 2500)
    assert [(c.start, c.end) for c in windows] == [(0, 1000), (800, 1800), (1600, 2500)]
    assert rrf([[1, 2], [2, 3]])[0] == 2


def test_the_docs_section_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    doc = tmp_path / "b.md"
    doc.write_text("# T\n\n## Before\n\nkeep\n\n## After\n\nkeep too\n")
    result = {
        "set": {
            "name": "s",
            "files": 1,
            "mean_chars": 10.0,
            "max_chars": 10,
            "queries": 1,
            "language": "pt",
        },
        "machine": {"loadavg_at_start": [1.0, 1.0, 1.0], "nproc": 2, "cpu": "c", "ram": "1 GiB"},
        "started": "now",
        "guaipeca_commit": "abc",
        "seconds": 60.0,
        "command": "python x",
        "budgets": [1000],
        "table_budget": 1000,
        "rows": [
            {
                "row": "r",
                "system": "sys",
                "model": "any",
                "hit@1": 0.5,
                "hit@5": 1.0,
                "within": {"1000": 0.25},
                "mean_chars": 900.0,
                "latency_ms": {"p50": 2.0},
            },
            {"row": "b", "system": "sys budget", "model": "m", "not_available": "no"},
        ],
    }
    write_section(doc, result)
    once = doc.read_text()
    write_section(doc, result)
    assert doc.read_text() == once and once.count(SECTION) == 1
    assert "keep\n" in once and once.endswith(
        "| sys budget | m | not available" + " | –" * 4 + " |\n"
    )
    doc.write_text(once.replace("## Before", "## Before\n\n" + SECTION + "\n\nSTALE\n"))
    write_section(doc, result)
    assert "STALE" not in doc.read_text() and "## After\n\nkeep too" in doc.read_text()
