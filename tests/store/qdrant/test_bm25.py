"""BM25 in Qdrant matches tantivy's: rounded lengths, term ids, and the average length."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.lexical.sparse import fieldnorm, term_index
from support.qdrant import open_index


def test_fieldnorm_matches_tantivys_one_byte_lengths() -> None:
    # The values documented in lexical/sparse.py (tantivy's fieldnorm table).
    assert [fieldnorm(n) for n in (0, 1, 23, 24, 40, 41, 57, 100, 1000)] == [
        0,
        1,
        23,
        24,
        40,
        40,
        56,
        96,
        984,
    ]


@given(st.integers(min_value=0, max_value=10**7))
def test_fieldnorm_rounds_down_and_is_monotone(n: int) -> None:
    assert fieldnorm(n) <= n and fieldnorm(n) <= fieldnorm(n + 1)
    assert fieldnorm(fieldnorm(n)) == fieldnorm(n)  # a rounded length is a table value


def test_term_ids_are_stable_32_bit_numbers() -> None:
    assert term_index("apple") == term_index("apple") != term_index("appl")
    assert 0 <= term_index("ação") < 2**32


@pytest.fixture(params=["qdrant", "postgres"])
def other(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_primary")
    return str(request.param)


@pytest.mark.slow
def test_many_small_writes_then_compact_agree_with_tantivy(tmp_path: Path, other: str) -> None:
    indexes = [open_index(b, tmp_path) for b in ("embedded", other)]
    for i in range(40):
        words = " ".join(["filler"] * (i % 13) + ["apple"] * (1 + i % 3) + [f"w{i}"])
        for index in indexes:
            index.add_documents({f"d{i}": f"Note {i}: {words}"})  # one write each
    for index in indexes:
        index.compact()
    embedded, qdrant = (
        [(h.chunk_id, round(h.score, 4)) for h in ix.search("apple filler", mode="keyword")]
        for ix in indexes
    )
    assert qdrant == embedded and embedded
    for index in indexes:
        index.close()


def test_document_frequencies_for_the_reranker_agree(tmp_path: Path, other: str) -> None:
    indexes = [open_index(b, tmp_path) for b in ("embedded", other)]
    docs = {f"d{i}": f"apple {'pear ' * (i % 3)}notes {i}" for i in range(12)}
    for index in indexes:
        index.add_documents(docs)
    tokens = ["appl", "pear", "note", "missing"]
    embedded, qdrant = (ix.store("default").lexical.doc_freqs(tokens) for ix in indexes)
    assert qdrant == embedded == (12, {"appl": 12, "pear": 8, "note": 12, "missing": 0})
    for index in indexes:
        index.close()
