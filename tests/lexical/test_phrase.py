"""search.phrase_weight: adjacent query words found side by side add their pair's BM25 score
(the ordered-window part of the sequential dependence model) to chunks that match anyway."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

from guaipeca.config import EngineSettings
from guaipeca.errors import InvalidArgumentError
from guaipeca.lexical import Analyzer, LexicalIndex
from guaipeca.lexical.bm25 import PHRASE_WEIGHT

ENGLISH = Analyzer("english")
K1, B = 1.2, 0.75


def _index(docs: dict[int, str]) -> LexicalIndex:
    index = LexicalIndex(None, ENGLISH)
    index.add(docs.items())
    index.commit()
    return index


def _idf(n_docs: int, n: int) -> float:
    return math.log(1 + (n_docs - n + 0.5) / (n + 0.5))


def reference_sdm(docs: dict[int, list[str]], query: list[str], weight: float) -> dict[int, float]:
    """BM25 of each query word, plus ``weight`` times BM25 of each distinct adjacent pair of
    query words counted where the document holds them side by side (tantivy's phrase score:
    the idf is the sum of the two words' idfs, the tf is the pair's count)."""
    n_docs = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n_docs
    df = Counter(term for tokens in docs.values() for term in set(tokens))

    def saturate(tf: int, dl: int) -> float:
        return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))

    scores: dict[int, float] = {}
    for key, tokens in docs.items():
        score = sum(
            count * _idf(n_docs, df[term]) * saturate(tokens.count(term), len(tokens))
            for term, count in Counter(query).items()
            if term in tokens
        )
        if score == 0:
            continue
        bigrams = list(itertools.pairwise(tokens))
        for pair in dict.fromkeys(itertools.pairwise(query)):
            pf = bigrams.count(pair)
            if pf and pair[0] != pair[1]:
                idf = _idf(n_docs, df[pair[0]]) + _idf(n_docs, df[pair[1]])
                score += weight * idf * saturate(pf, len(tokens))
        scores[key] = score
    return scores


@pytest.mark.parametrize("seed", range(4))
def test_phrase_scores_match_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    # Consonant-only words pass the analyzer unchanged; few of them, so pairs recur.
    vocabulary = sorted({"".join(rng.choices("bcdfghjklmnpqrtvwxz", k=3)) for _ in range(12)})
    # <= 40 tokens per document: tantivy stores lengths exactly up to 40.
    docs = {key: rng.choices(vocabulary, k=rng.randint(2, 40)) for key in range(1, 80)}
    index = _index({key: " ".join(tokens) for key, tokens in docs.items()})
    for _ in range(15):
        query = rng.choices(vocabulary, k=rng.randint(2, 4))
        want = reference_sdm(docs, query, 0.3)
        got = dict(index.search_tokens(query, 1000, phrase_weight=0.3))
        assert set(got) == set(want)
        for key, score in got.items():
            assert score == pytest.approx(want[key], rel=1e-4)


def test_words_side_by_side_rank_above_the_same_words_apart() -> None:
    docs = {
        1: "deficiency causes rickets; vitamin for children, d",
        2: "vitamin d deficiency causes rickets in children",
    }
    index = _index(docs)
    apart = dict(index.search("vitamin d deficiency", 10))
    assert apart[1] == apart[2]  # the same words in another order
    together = index.search("vitamin d deficiency", 10, phrase_weight=0.1)
    assert [key for key, _ in together] == [2, 1]
    assert dict(together)[1] == apart[1]  # no adjacent pair: the score is unchanged


def test_the_phrase_part_matches_no_new_chunk_and_zero_is_plain_bm25() -> None:
    docs = {1: "alpha beta gamma", 2: "gamma delta", 3: "epsilon"}
    index = _index(docs)
    plain = index.search("alpha beta gamma delta", 10)
    assert index.search("alpha beta gamma delta", 10, phrase_weight=0.0) == plain
    boosted = index.search("alpha beta gamma delta", 10, phrase_weight=5.0)
    assert {key for key, _ in boosted} == {key for key, _ in plain} == {1, 2}


def test_stopwords_between_words_do_not_break_a_pair() -> None:
    # Stopwords are not indexed, so "effect of vitamin" is the pair ("effect", "vitamin")
    # in the query and in the text alike.
    index = _index({1: "the effect of the vitamin", 2: "vitamin has an effect"})
    hits = index.search("effect of vitamin", 10, phrase_weight=0.5)
    assert [key for key, _ in hits] == [1, 2]


@pytest.mark.parametrize("bad", [-0.1, float("nan"), True, "0.1", None])
def test_a_bad_phrase_weight_raises(bad: object) -> None:
    index = _index({1: "alpha beta"})
    with pytest.raises(InvalidArgumentError, match="phrase_weight"):
        index.search("alpha beta", 10, phrase_weight=bad)  # type: ignore[arg-type]


def test_the_default_setting_is_the_measured_weight() -> None:
    assert EngineSettings().search.phrase_weight == PHRASE_WEIGHT == 0.125


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_the_setting_reaches_searches_through_the_index(mode: str) -> None:
    from guaipeca import Index, NewDocument
    from guaipeca.embed import HashingEmbedder

    docs = {
        "apart": "Deficiency causes rickets; vitamin for children, d.",
        "together": "Vitamin d deficiency causes rickets in children.",
    }

    def scores(weight: float) -> dict[str, float]:
        base = EngineSettings()
        settings = base.model_copy(
            update={"search": base.search.model_copy(update={"phrase_weight": weight})}
        )
        with Index(embedder=HashingEmbedder(), settings=settings) as index:
            index.add_documents([NewDocument(d, text) for d, text in docs.items()])
            hits = index.search("vitamin d deficiency", top_k=2, mode=mode)  # type: ignore[arg-type]
            return {h.doc_id: h.scores.lexical or 0.0 for h in hits}

    off, on = scores(0.0), scores(0.1)
    assert off["apart"] == off["together"]
    assert on["apart"] == off["apart"]
    assert on["together"] > off["together"]
