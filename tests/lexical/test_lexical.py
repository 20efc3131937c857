"""Tests for guaipeca.lexical: the Snowball analyzer and the tantivy BM25 index."""

from __future__ import annotations

import json
import math
import random
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.errors import (
    ConfigError,
    GuaipecaError,
    IndexLockedError,
    InvalidArgumentError,
)
from guaipeca.lexical import MAX_TOKEN_CHARS, Analyzer, LexicalIndex, bm25
from guaipeca.lexical import analyzer as analyzer_module

ENGLISH = Analyzer("english")
PORTUGUESE = Analyzer("portuguese")


def _unaccented(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


# -- Analyzer ---------------------------------------------------------------------------------


def test_english_inflections_stem_to_one_token() -> None:
    assert ENGLISH.tokens("running") == ENGLISH.tokens("runs") == ENGLISH.tokens("run")
    assert ENGLISH.tokens("Studies studying") == ["studi", "studi"]


def test_english_stopwords_are_removed() -> None:
    assert ENGLISH.tokens("The cat and THE hat, for all of them") == ["cat", "hat"]


def test_portuguese_accents_and_plurals_match() -> None:
    assert PORTUGUESE.tokens("ações") == PORTUGUESE.tokens("acao") == PORTUGUESE.tokens("ação")
    assert PORTUGUESE.tokens("informação") == PORTUGUESE.tokens("informacoes")
    assert PORTUGUESE.tokens("Saúde") == PORTUGUESE.tokens("saude")


def test_portuguese_stopwords_are_removed_with_or_without_accents() -> None:
    assert PORTUGUESE.tokens("de que não nao você voce é à") == []
    assert PORTUGUESE.tokens("a casa de que falamos") == PORTUGUESE.tokens("casa falamos")


# Word families used to choose "strip accents, then stem" (see the module docstring).
PORTUGUESE_FAMILIES = [
    ["informação", "informações"], ["ação", "ações"], ["coração", "corações"],
    ["eleição", "eleições"], ["nação", "nações"], ["população", "populações"],
    ["educação", "educacional"], ["possível", "possíveis"], ["útil", "úteis"],
    ["fácil", "fáceis"], ["música", "músicas"], ["saúde"],
    ["português", "portuguesa", "portugueses"], ["inglês", "inglesa", "ingleses"],
    ["país", "países"], ["médico", "médicos", "médica"], ["público", "pública", "públicos"],
    ["análise", "análises"], ["técnico", "técnica", "técnicas"],
    ["ciência", "ciências", "científico"], ["experiência", "experiências"],
    ["família", "famílias"], ["histórico", "histórica"], ["econômico", "econômica", "economia"],
    ["política", "políticas", "político"], ["água", "águas"], ["difícil", "difíceis"],
    ["pão", "pães"], ["mão", "mãos"], ["irmão", "irmãos"], ["alemão", "alemães"],
    ["avó", "avós"], ["café", "cafés"], ["lápis"], ["está", "estão"], ["até"], ["três"],
    ["mês", "meses"],
    ["órgão", "órgãos"], ["razão", "razões"], ["opinião", "opiniões"], ["questão", "questões"],
    ["região", "regiões"], ["relação", "relações"], ["solução", "soluções"],
    ["função", "funções"], ["avaliação", "avaliações"], ["pesquisa", "pesquisas"],
    ["estratégia", "estratégias"], ["código", "códigos"], ["número", "números"],
    ["área", "áreas"], ["período", "períodos"], ["nível", "níveis"],
    ["responsável", "responsáveis"], ["disponível", "disponíveis"],
]  # fmt: skip
FRENCH_FAMILIES = [
    ["activité", "activités"], ["université", "universités"], ["été"], ["élève", "élèves"],
    ["école", "écoles"], ["intérêt", "intérêts"], ["préféré", "préférée", "préférés"],
    ["développement", "développements", "développer"],
    ["économie", "économique", "économiques"], ["général", "générale", "généraux"],
    ["problème", "problèmes"], ["système", "systèmes"], ["société", "sociétés"],
    ["qualité", "qualités"], ["sécurité"], ["médecin", "médecins", "médical", "médicale"],
    ["théorie", "théories", "théorique"], ["réseau", "réseaux"],
    ["créer", "créé", "création"], ["même", "mêmes"], ["très"], ["forêt", "forêts"],
    ["château", "châteaux"], ["hôpital", "hôpitaux"],
]  # fmt: skip


def test_accent_variants_always_give_the_same_token() -> None:
    for word in [w for family in PORTUGUESE_FAMILIES for w in family]:
        assert PORTUGUESE.tokens(word) == PORTUGUESE.tokens(_unaccented(word)), word
    french = Analyzer("french")
    for word in [w for family in FRENCH_FAMILIES for w in family]:
        assert french.tokens(word) == french.tokens(_unaccented(word)), word


def test_most_portuguese_families_conflate() -> None:
    families = [f for f in PORTUGUESE_FAMILIES if len(f) > 1]
    conflated = [f for f in families if len({tuple(PORTUGUESE.tokens(w)) for w in f}) == 1]
    # 39/52 when measured; stemming first conflated 31/52 (and was not accent-insensitive).
    assert len(conflated) >= 39, [f for f in families if f not in conflated]


def test_unknown_language_raises_config_error_listing_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        Analyzer("klingon")
    message = str(info.value)
    assert "'klingon'" in message
    assert "english" in message and "portuguese" in message


def test_every_snowball_language_builds() -> None:
    for language in ("german", "russian", "arabic", "hindi", "porter"):
        assert Analyzer(language).language == language


def test_digits_are_kept_and_split_from_letters() -> None:
    assert ENGLISH.tokens("COVID-19 in 2020, p53 and 3.14") == [
        "covid", "19", "2020", "p", "53", "3", "14",
    ]  # fmt: skip
    assert ENGLISH.tokens("covid19") == ENGLISH.tokens("Covid 19")
    assert ENGLISH.tokens("٣٤ १२") == ["٣٤", "१२"]  # non-ASCII digits are numbers too


def test_words_longer_than_the_limit_are_dropped() -> None:
    assert ENGLISH.tokens("x" * (MAX_TOKEN_CHARS + 1) + " keep") == ["keep"]
    assert ENGLISH.tokens("x" * MAX_TOKEN_CHARS) == ["x" * MAX_TOKEN_CHARS]


def test_unicode_compatibility_forms_and_case_fold_together() -> None:
    assert ENGLISH.tokens("ﬁsh ＦＩＳＨ Fish") == ["fish", "fish", "fish"]
    assert ENGLISH.tokens("Straße") == ENGLISH.tokens("STRASSE")
    assert Analyzer("german").tokens("Straße") == Analyzer("german").tokens("STRASSE")


def test_underscore_and_punctuation_split_words() -> None:
    assert ENGLISH.tokens("snake_case dotted.name e-mail") == [
        "snake", "case", "dot", "name", "e", "mail",
    ]  # fmt: skip


def test_combining_marks_keep_indic_words_whole() -> None:
    assert len(Analyzer("hindi").tokens("हिन्दी")) == 1
    tamil = Analyzer("tamil").tokens("தமிழ் மொழிகள்")
    assert len(tamil) == 2 and tamil[0] == "தமிழ்"  # the virama (pulli) is spelling: kept


def test_decomposed_input_matches_precomposed() -> None:
    nfd = unicodedata.normalize("NFD", "informações ação")
    assert PORTUGUESE.tokens(nfd) == PORTUGUESE.tokens("informações ação")


def test_tokens_rejects_non_strings() -> None:
    with pytest.raises(InvalidArgumentError):
        ENGLISH.tokens(b"bytes")  # type: ignore[arg-type]


def test_analyzer_gives_the_same_tokens_from_many_threads() -> None:
    analyzer = Analyzer("portuguese")
    texts = [f"As ações número {i} foram avaliadas em informações públicas" for i in range(300)]
    expected = [Analyzer("portuguese").tokens(t) for t in texts]
    results: dict[int, list[list[str]]] = {}

    def work(n: int) -> None:
        results[n] = [analyzer.tokens(t) for t in texts]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results.values())


def test_word_cache_turnover_does_not_change_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyzer_module, "_WORD_CACHE_MAX", 5)
    analyzer = Analyzer("english")
    text = "running studies of the connected networks of running studies"
    expected = ["run", "studi", "connect", "network", "run", "studi"]
    for _ in range(3):
        assert analyzer.tokens(text) == expected
        assert analyzer.tokens("unrelated words fill the cache quickly") != []


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_gives_clean_tokens(text: str) -> None:
    for analyzer in (ENGLISH, PORTUGUESE):
        tokens = analyzer.tokens(text)
        assert all(isinstance(t, str) and t for t in tokens)
        assert not any(c.isspace() for t in tokens for c in t)
        assert all(len(t) <= MAX_TOKEN_CHARS for t in tokens)


# -- BM25 against a reference ---------------------------------------------------------------------


def reference_bm25(
    docs: dict[int, list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> list[tuple[int, float]]:
    """Lucene/tantivy BM25: idf = ln(1 + (N - n + 0.5) / (n + 0.5)), saturating tf with
    length normalisation by dl / avgdl. A repeated query term counts once per repeat."""
    n_docs = len(docs)
    avgdl = sum(len(tokens) for tokens in docs.values()) / n_docs
    doc_freq = Counter(term for tokens in docs.values() for term in set(tokens))
    scores: dict[int, float] = {}
    for term, weight in Counter(query).items():
        n = doc_freq.get(term, 0)
        if n == 0:
            continue
        idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
        for key, tokens in docs.items():
            tf = tokens.count(term)
            if tf:
                norm = tf + k1 * (1 - b + b * len(tokens) / avgdl)
                scores[key] = scores.get(key, 0.0) + weight * idf * tf * (k1 + 1) / norm
    return sorted(scores.items(), key=lambda hit: (-hit[1], hit[0]))


def _assert_same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert len(got) == len(want)
    reference = dict(want)
    assert set(dict(got)) == set(reference)
    for (key, score), (want_key, want_score) in zip(got, want, strict=True):
        assert score == pytest.approx(reference[key], rel=1e-4)
        # Same order, except where two scores differ only by float32 rounding.
        assert key == want_key or math.isclose(reference[key], want_score, rel_tol=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_bm25_scores_match_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    # Consonant-only words: the analyzer leaves them as they are (checked below).
    vocabulary = sorted({"".join(rng.choices("bcdfghjklmnpqrtvwxz", k=3)) for _ in range(60)})
    weights = [1 / (i + 1) for i in range(len(vocabulary))]  # Zipf-like: frequent and rare
    # <= 40 tokens per document: tantivy stores lengths in one byte, exactly up to 40.
    docs = {
        rng.randrange(2**64): rng.choices(vocabulary, weights, k=rng.randint(1, 40))
        for _ in range(120)
    }
    for tokens in docs.values():
        assert ENGLISH.tokens(" ".join(tokens)) == tokens
    index = LexicalIndex(None, ENGLISH)
    items = list(docs.items())
    for start in range(0, len(items), 50):  # several commits -> several segments
        index.add((key, " ".join(tokens)) for key, tokens in items[start : start + 50])
        index.commit()
    assert index.count() == len(docs)
    for _ in range(20):
        query = rng.choices(vocabulary[:30], k=rng.randint(1, 5))
        got = index.search_tokens(query, 1000)
        assert got
        _assert_same_ranking(got, reference_bm25(docs, query))
        top = index.search_tokens(query, 7)
        assert top == got[:7]
        assert index.search(" ".join(query), 1000) == got


def test_query_text_goes_through_the_same_analyzer() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add([(1, "Runners were running"), (2, "the cat sat")])
    index.commit()
    assert [key for key, _ in index.search("RUN", 10)] == [1]
    assert index.search("the and of", 10) == []  # only stopwords
    assert index.search("", 10) == []


def test_equal_scores_are_ordered_by_smaller_key() -> None:
    index = LexicalIndex(None, ENGLISH)
    # Added largest key first, so tantivy's own tie order (by document) is the reverse.
    index.add((key, "same words here") for key in range(60, 0, -1))
    index.add([(1000, "same")])
    index.commit()
    hits = index.search("same words", 3)
    assert [key for key, _ in hits] == [1, 2, 3]
    assert len({score for _, score in hits}) == 1


def test_k_zero_or_negative_returns_nothing() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add([(1, "word")])
    index.commit()
    assert index.search("word", 0) == []
    assert index.search("word", -5) == []
    assert index.search("word", 10**9) == [(1, pytest.approx(index.search("word", 1)[0][1]))]


def test_bad_arguments_raise_invalid_argument() -> None:
    index = LexicalIndex(None, ENGLISH)
    bad_keys: list[object] = [-1, 2**64, True, "7", 1.0, None]
    for bad in bad_keys:
        with pytest.raises(InvalidArgumentError):
            index.add([(bad, "text")])  # type: ignore[list-item]
        with pytest.raises(InvalidArgumentError):
            index.delete([bad])  # type: ignore[list-item]
        with pytest.raises(InvalidArgumentError):
            index.search("text", 5, allowed=[bad])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        index.search("text", 2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        index.search_tokens("text", 5)
    with pytest.raises(InvalidArgumentError):
        index.add([(1, b"bytes")])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        index.add([1])  # type: ignore[list-item]


def test_full_u64_key_range_works() -> None:
    index = LexicalIndex(None, ENGLISH)
    keys = [0, 2**63 - 1, 2**63, 2**64 - 1]
    index.add((key, "edge keys") for key in keys)
    index.commit()
    assert sorted(key for key, _ in index.search("edge", 10)) == keys
    assert [key for key, _ in index.search("edge", 10, allowed=[2**64 - 1, 2**63])] == [
        2**63,
        2**64 - 1,
    ]
    index.delete([2**64 - 1])
    index.commit()
    assert sorted(key for key, _ in index.search("edge", 10)) == keys[:3]


# -- allowed -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_index() -> Iterator[tuple[LexicalIndex, dict[int, str]]]:
    rng = random.Random(7)
    vocabulary = [f"t{i}" for i in range(60)]
    weights = [1 / (i + 1) ** 0.8 for i in range(60)]
    docs = {
        key: " ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 30))) for key in range(3000)
    }
    index = LexicalIndex(None, ENGLISH)
    index.add(docs.items())
    index.commit()
    yield index, docs
    index.close()


# The three ways `allowed` runs: ranked then filtered (large share), an OR of key terms, and
# a term set (many keys); the thresholds are patched so each is taken on this small index.
FILTER_PATHS = {
    "postfilter": {"_POSTFILTER_MIN_SHARE": 10**9},
    "key-terms": {"_POSTFILTER_MIN_SHARE": 0, "_KEY_CLAUSES_MAX": 10**9},
    "term-set": {"_POSTFILTER_MIN_SHARE": 0, "_KEY_CLAUSES_MAX": 0},
}


@pytest.mark.parametrize("path", FILTER_PATHS)
@pytest.mark.parametrize("share", [0.9, 0.3, 0.02, 0.001])
def test_allowed_restricts_results_and_keeps_scores(
    corpus_index: tuple[LexicalIndex, dict[int, str]],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    share: float,
) -> None:
    index, docs = corpus_index
    for name, value in FILTER_PATHS[path].items():
        monkeypatch.setattr(bm25, name, value)
    rng = random.Random(f"{path}-{share}")
    everything = index.search_tokens(["t0", "t3", "t7", "t30"], len(docs))
    for k in (1, 10, 100):
        allowed = rng.sample(sorted(docs), max(1, int(share * len(docs))))
        allowed_set = set(allowed)
        expected = [hit for hit in everything if hit[0] in allowed_set][:k]
        assert index.search_tokens(["t0", "t3", "t7", "t30"], k, allowed=allowed) == expected


def test_allowed_with_keys_missing_from_the_index(
    corpus_index: tuple[LexicalIndex, dict[int, str]],
) -> None:
    index, docs = corpus_index
    # A large allowed list (the post-filter path) that is mostly keys the index lacks: the
    # search must still be exact, by falling back to filtering inside tantivy.
    allowed = [*range(10**6, 10**6 + 5000), 5, 17, 2999]
    everything = index.search_tokens(["t1", "t2"], len(docs))
    expected = [hit for hit in everything if hit[0] in {5, 17, 2999}]
    assert index.search_tokens(["t1", "t2"], 10, allowed=allowed) == expected


def test_allowed_empty_returns_nothing_and_none_means_all(
    corpus_index: tuple[LexicalIndex, dict[int, str]],
) -> None:
    index, _ = corpus_index
    assert index.search("t0", 10, allowed=[]) == []
    assert index.search("t0", 10, allowed=None) == index.search("t0", 10)
    assert index.search("t0", 10, allowed=range(3000)) == index.search("t0", 10)


def test_allowed_accepts_any_integer_sequence(
    corpus_index: tuple[LexicalIndex, dict[int, str]],
) -> None:
    index, _ = corpus_index
    numpy = pytest.importorskip("numpy")
    keys = [3, 99, 1500, 2001]
    assert index.search("t0 t1", 5, allowed=numpy.array(keys, dtype=numpy.uint64)) == (
        index.search("t0 t1", 5, allowed=tuple(keys))
    )


# -- writes, persistence ----------------------------------------------------------------------


def test_delete_then_re_add_the_same_key() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add([(1, "apple banana"), (2, "apple cherry")])
    index.commit()
    index.delete([1])
    assert [key for key, _ in index.search("apple", 10)] == [1, 2]  # not yet committed
    index.commit()
    assert [key for key, _ in index.search("apple", 10)] == [2]
    assert index.count() == 1
    index.add([(1, "banana split")])
    index.commit()
    assert [key for key, _ in index.search("banana", 10)] == [1]
    assert index.search("apple", 10)[0][0] == 2
    # Replace within one commit: delete first, then add.
    index.delete([2])
    index.add([(2, "durian")])
    index.commit()
    assert [key for key, _ in index.search("durian cherry", 10)] == [2]
    assert index.count() == 2


def test_delete_unknown_keys_is_a_no_op() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add([(1, "apple")])
    index.commit()
    index.delete([5, 6])
    index.delete([])
    index.commit()
    assert index.count() == 1


def test_rollback_drops_staged_writes() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.rollback()  # nothing staged, no writer yet
    index.add([(1, "apple")])
    index.commit()
    index.add([(2, "apple")])
    index.delete([1])
    index.rollback()
    index.commit()
    assert [key for key, _ in index.search("apple", 10)] == [1]


def test_clear_removes_everything_on_commit() -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add((key, "apple pie") for key in range(10))
    index.commit()
    index.clear()
    assert index.count() == 10
    index.commit()
    assert index.count() == 0
    assert index.search("apple", 10) == []
    index.add([(3, "apple")])
    index.commit()
    assert [key for key, _ in index.search("apple", 10)] == [3]


def test_optimize_keeps_results(tmp_path: Path) -> None:
    index = LexicalIndex(tmp_path / "lex", ENGLISH)
    for batch in range(12):  # many small segments, so tantivy may merge some
        index.add((batch * 10 + i, f"apple {'pie ' * i}") for i in range(10))
        index.commit()
    index.delete(range(0, 120, 2))
    index.commit()
    before = index.search("apple pie", 200)
    index.optimize()
    after = index.search("apple pie", 200)
    assert [key for key, _ in after] == [key for key, _ in before]
    assert index.count() == 60
    index.add([(500, "apple")])  # the writer is usable after optimize
    index.commit()
    assert index.count() == 61


def _sample_docs() -> dict[int, str]:
    rng = random.Random(3)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    ]
    return {key: " ".join(rng.choices(words, k=rng.randint(2, 60))) for key in range(400)}


QUERIES = ["alpha", "beta gamma", "kappa lambda mu mu", "zeta alpha theta"]


def test_ram_and_disk_give_identical_results(tmp_path: Path) -> None:
    docs = _sample_docs()
    ram = LexicalIndex(None, ENGLISH)
    disk = LexicalIndex(tmp_path / "lex", ENGLISH)
    for index in (ram, disk):
        index.add(docs.items())
        index.commit()
    for query in QUERIES:
        assert ram.search(query, 50) == disk.search(query, 50)
        assert ram.search(query, 20, allowed=range(0, 400, 3)) == disk.search(
            query, 20, allowed=range(0, 400, 3)
        )
    assert ram.size_bytes() == 0
    assert disk.size_bytes() > 0


def test_reopening_a_folder_gives_the_same_results(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / "lex"  # created, parents too
    index = LexicalIndex(folder, ENGLISH)
    index.add(_sample_docs().items())
    index.commit()
    index.delete([0, 1, 2])
    index.commit()
    before = {query: index.search(query, 30) for query in QUERIES}
    index.add([(9999, "alpha alpha alpha")])  # uncommitted: lost on close
    index.close()
    reopened = LexicalIndex(str(folder), Analyzer("english"))
    assert {query: reopened.search(query, 30) for query in QUERIES} == before
    assert reopened.count() == 397
    assert json.loads((folder / "lexical.json").read_text()) == {"language": "english", "format": 1}


def test_reopening_with_another_language_raises(tmp_path: Path) -> None:
    LexicalIndex(tmp_path / "lex", ENGLISH).close()
    with pytest.raises(ConfigError, match="'english'"):
        LexicalIndex(tmp_path / "lex", PORTUGUESE)


def test_path_that_is_a_file_raises(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError):
        LexicalIndex(tmp_path / "file", ENGLISH)


def test_second_writer_on_a_folder_is_locked_out(tmp_path: Path) -> None:
    first = LexicalIndex(tmp_path / "lex", ENGLISH)
    first.add([(1, "apple")])
    first.commit()
    second = LexicalIndex(tmp_path / "lex", ENGLISH)
    assert [key for key, _ in second.search("apple", 5)] == [1]  # reading needs no lock
    with pytest.raises(IndexLockedError):
        second.add([(2, "apple")])
    first.add([(3, "apple")])
    first.commit()
    second.reload()  # another writer's commit, seen at once
    assert [key for key, _ in second.search("apple", 5)] == [1, 3]
    first.close()
    second.add([(2, "apple")])
    second.commit()
    assert second.count() == 3


def test_closed_index_refuses_use() -> None:
    with LexicalIndex(None, ENGLISH) as index:
        index.add([(1, "apple")])
        index.commit()
    index.close()  # idempotent
    with pytest.raises(GuaipecaError, match="closed"):
        index.search("apple", 5)
    with pytest.raises(GuaipecaError, match="closed"):
        index.add([(2, "apple")])


# -- concurrency -------------------------------------------------------------------------------


def test_readers_see_only_committed_keys_while_a_writer_commits() -> None:
    index = LexicalIndex(None, ENGLISH)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    batches = 50
    committed_keys = set(range(batches * 20))
    ghost_keys = set(range(10**6, 10**6 + batches))  # added then rolled back, never visible
    done = threading.Event()
    errors: list[BaseException] = []
    searches = [0] * 4

    def read(n: int) -> None:
        rng = random.Random(n)
        last_count = 0
        try:
            while not done.is_set() or searches[n] == 0:
                hits = index.search(" ".join(rng.sample(words, 3)), 50)
                keys = {key for key, _ in hits}
                assert keys <= committed_keys, keys - committed_keys
                assert not keys & ghost_keys
                count = index.count()
                assert count >= last_count  # no deletes here: visibility only grows
                last_count = count
                searches[n] += 1
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    readers = [threading.Thread(target=read, args=(n,)) for n in range(4)]
    for thread in readers:
        thread.start()
    rng = random.Random(0)
    try:
        for batch in range(batches):
            index.add((batch * 20 + i, " ".join(rng.choices(words, k=8))) for i in range(20))
            index.commit()
            index.add([(10**6 + batch, " ".join(words))])
            index.rollback()
    finally:
        done.set()
        for thread in readers:
            thread.join()
    assert not errors, errors[0]
    assert all(searches)
    assert index.count() == batches * 20


# -- robustness --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def robust_index() -> Iterator[LexicalIndex]:
    index = LexicalIndex(None, ENGLISH)
    index.add(
        [
            (1, "ordinary English text"),
            (2, "ação e informação em português"),
            (3, "日本語のテキスト 中文 한국어"),
            (4, "emoji 🎉 and symbols ∑ √ ∞"),
            (5, ""),
        ]
    )
    index.commit()
    yield index
    index.close()


@settings(max_examples=200, deadline=None)
@given(text=st.text(), k=st.integers(min_value=-3, max_value=50))
def test_arbitrary_text_never_breaks_search(robust_index: LexicalIndex, text: str, k: int) -> None:
    hits = robust_index.search(text, k)
    assert len(hits) <= max(k, 0)
    assert all(key in {1, 2, 3, 4, 5} and score > 0 for key, score in hits)
    robust_index.search(text, 5, allowed=[2, 3])


@settings(max_examples=50, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=5))
def test_arbitrary_text_can_be_indexed(texts: list[str]) -> None:
    index = LexicalIndex(None, ENGLISH)
    index.add(enumerate(texts))
    index.commit()
    assert index.count() == len(texts)
    for text in texts:
        tokens = ENGLISH.tokens(text)
        if tokens:
            assert index.search(text, len(texts)), text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80))
def test_term_spans_give_the_tokens_with_their_place_in_the_text(text: str) -> None:
    analyzer = Analyzer("english")
    spans = analyzer.term_spans(text)
    assert all(0 <= start < end <= len(text) for start, end, _ in spans)
    if text.isascii():
        # One pass over ASCII: exactly the tokens, each from its own span.
        assert [term for _, _, term in spans] == analyzer.tokens(text)
        assert all(analyzer.tokens(text[s:e]) == [t] for s, e, t in spans)
    else:
        # Word by word elsewhere: every term comes from the word its span covers.
        assert all(t in analyzer.tokens(text[s:e]) for s, e, t in spans)


def test_term_spans_rejects_non_strings() -> None:
    with pytest.raises(InvalidArgumentError):
        Analyzer("english").term_spans(b"bytes")  # type: ignore[arg-type]


def test_merges_land_after_each_write_so_segments_stay_few(tmp_path: Path) -> None:
    lx = LexicalIndex(tmp_path / "lex", ENGLISH)
    for key in range(30):  # one commit per chunk: a segment each, until merges fold them
        lx.add([(key, f"chunk number {key}")])
        lx.commit()
        lx.release_writer()
    # The log merge policy folds every 8 small segments into one.
    assert lx.segment_count() < 8
    assert lx.count() == 30
    lx.close()


def test_replacing_one_chunk_documents_does_not_pile_up_segments(tmp_path: Path) -> None:
    # A replaced one-chunk document empties its segment; committed together with the new
    # chunk, that used to make tantivy throw every merge away.
    from guaipeca import Index
    from guaipeca.embed import HashingEmbedder

    with Index(tmp_path / "index", embedder=HashingEmbedder()) as index:
        for round_ in range(4):
            for i in range(10):
                index.add_documents({f"doc{i}": f"# Doc {i}\n\nversion {round_} of note {i}"})
        lexical = index.store("default").lexical
        assert lexical.segment_count() <= 8  # was one per document (10) before the fix
        assert lexical.count() == 10
        assert [h.doc_id for h in index.search("version 3 note 7", top_k=1)] == ["doc7"]
