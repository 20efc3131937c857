"""Contract tests of the library API: identical rankings in memory and on disk, reopening,
delete + compact, filters that cannot inject SQL, exact spans, incremental re-embedding."""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca import (
    ConfigError,
    Index,
    InvalidArgumentError,
    InvalidFilterError,
    ModelError,
    NewDocument,
    NotFoundError,
)
from guaipeca.config import EngineSettings
from guaipeca.embed import HashingEmbedder
from support import CountingEmbedder, MemoEmbedder, beir_queries, ranking

MODES = ("hybrid", "dense", "keyword")


def _queries(n: int = 15) -> list[str]:
    return [q for _, q in list(beir_queries("scifact"))[:n]]


def _with_year(docs: dict[str, str]) -> list[NewDocument]:
    return [
        NewDocument(k, v, metadata={"year": 2000 + i % 25, "tags": ["even" if i % 2 else "odd"]})
        for i, (k, v) in enumerate(docs.items())
    ]


def test_in_memory_and_on_disk_return_identical_rankings(
    tmp_path: Path, real_embedder: MemoEmbedder, scifact_sample: dict[str, str]
) -> None:
    memory = Index(embedder=real_embedder)
    disk = Index(tmp_path / "idx", embedder=real_embedder)
    for index in (memory, disk):
        index.add_documents(_with_year(scifact_sample))
    for query in _queries():
        for mode in MODES:
            a = [(h.chunk_id, h.score, h.start, h.end) for h in memory.search(query, mode=mode)]
            b = [(h.chunk_id, h.score, h.start, h.end) for h in disk.search(query, mode=mode)]
            assert a == b, (query, mode)
            where = {"year": {"$gte": 2010}, "tags": {"$contains": "odd"}}
            assert ranking(memory, query, mode=mode, where=where) == ranking(
                disk, query, mode=mode, where=where
            )
    disk.close()


def test_reopening_an_index_returns_the_same_results(
    tmp_path: Path, real_embedder: MemoEmbedder, scifact_sample: dict[str, str]
) -> None:
    with Index(tmp_path / "idx", embedder=real_embedder) as index:
        index.add_documents(scifact_sample)
        before = {(q, m): ranking(index, q, mode=m) for q in _queries(8) for m in MODES}
        stats = index.stats()
    with Index(tmp_path / "idx", embedder=real_embedder) as index:
        after = {(q, m): ranking(index, q, mode=m) for q in _queries(8) for m in MODES}
        assert index.stats().chunks == stats.chunks
    assert before == after
    assert all(before.values())


def test_delete_compact_reopen_keeps_everything_else_identical(
    tmp_path: Path, real_embedder: MemoEmbedder, scifact_sample: dict[str, str]
) -> None:
    docs = _with_year(scifact_sample)
    doomed = {d.doc_id for d in docs[::3]}
    kept = [d for d in docs if d.doc_id not in doomed]
    with Index(tmp_path / "a", embedder=real_embedder) as index:
        index.add_documents(docs)
        for doc_id in doomed:
            assert index.delete_document(doc_id)
        index.compact()
    reference = Index(embedder=real_embedder)
    reference.add_documents(kept)
    with Index(tmp_path / "a", embedder=real_embedder) as index:
        assert [d.doc_id for d in index.list_documents(limit=1000)] == sorted(
            d.doc_id for d in kept
        )
        for d in kept[:20]:
            got, want = index.get_document(d.doc_id), reference.get_document(d.doc_id)
            assert (got.text, got.metadata, got.chunk_count) == (
                want.text,
                want.metadata,
                want.chunk_count,
            )
        for query in _queries():
            for mode in MODES:
                assert ranking(index, query, mode=mode) == ranking(reference, query, mode=mode)
        assert index.stats().corpora[0].deleted_slots == 0
        for doc_id in doomed:
            with pytest.raises(NotFoundError):
                index.get_document(doc_id)


def test_every_hit_resolves_to_its_exact_source_span(
    real_embedder: MemoEmbedder, scifact_sample: dict[str, str]
) -> None:
    index = Index(embedder=real_embedder)
    index.add_documents(scifact_sample)
    for query in _queries(5):
        for hit in index.search(query, top_k=10):
            doc = index.get_document(hit.doc_id)
            assert index.resolve(hit) == hit.text == doc.text[hit.start : hit.end]
            assert hit.scores.dense is not None or hit.scores.lexical is not None
            assert hit.heading_path and hit.section_id and hit.snippet


def test_hits_carry_every_field(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents(
        [
            NewDocument(
                "guide",
                "# Guide\n\n## Install\n\nRun the installer.\n\n"
                "## Usage\n\nSearch the index often.",
                metadata={"lang": "en"},
                source_path="/docs/guide.md",
                page_starts=(0, 30),
            )
        ]
    )
    (hit,) = index.search("installer", top_k=1, mode="keyword")
    d = hit.to_dict()
    assert d["chunk_id"].startswith("default:") and d["corpus"] == "default"
    assert d["doc_id"] == "guide" and d["source_path"] == "/docs/guide.md"
    assert d["heading_path"] == ["Guide", "Install"] and d["section_id"].startswith("s:")
    assert (d["page_start"], d["page_end"]) == (1, 2)
    assert d["text"] == "## Install\n\nRun the installer."
    assert "**installer**" in d["snippet"] and d["metadata"] == {"lang": "en"}
    assert d["scores"]["lexical"] > 0 and d["scores"]["lexical_rank"] == 1
    assert index.list_documents(where={"filename": "guide.md"})[0].doc_id == "guide"
    assert index.list_documents(where={"extension": ".md", "page": 2})[0].chunk_count == 3


@pytest.mark.parametrize(
    "where",
    [
        {"x'); DROP TABLE documents;--": 1},
        {'a" OR 1=1 --': "x"},
        {"year": {"$gt) OR 1=1 --": 1}},
        {"$or": "1=1"},
    ],
)
def test_a_filter_crafted_as_sql_injection_is_refused_and_changes_nothing(
    tmp_path: Path, counting_embedder: CountingEmbedder, where: dict[str, object]
) -> None:
    with Index(tmp_path / "idx", embedder=counting_embedder) as index:
        index.add_documents({"a": "alpha text", "b": "beta text"}, metadata={"year": 2020})
        with pytest.raises(InvalidFilterError):
            index.search("text", where=where)
        assert len(index.list_documents()) == 2
    db = sqlite3.connect(tmp_path / "idx/corpora/default/catalog.sqlite")
    assert db.execute("SELECT count(*) FROM documents").fetchone()[0] == 2


def test_an_injection_string_as_a_value_is_just_a_value(
    counting_embedder: CountingEmbedder,
) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents({"a": "alpha text"}, metadata={"kind": "' OR '1'='1"})
    assert index.search("text", where={"kind": "' OR 1=1 --"}) == []
    assert [h.doc_id for h in index.search("text", where={"kind": "' OR '1'='1"})] == ["a"]
    assert index.list_documents()[0].metadata == {"kind": "' OR '1'='1"}


def test_filters_restrict_beforeranking(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    docs = [NewDocument(f"d{i}", f"apple report number {i}", metadata={"n": i}) for i in range(50)]
    index.add_documents(docs)
    for mode in MODES:
        hits = index.search("apple report", top_k=50, mode=mode, where={"n": {"$in": [3, 47]}})  # type: ignore[arg-type]
        assert sorted(h.doc_id for h in hits) == ["d3", "d47"]
        hits = index.search(
            "apple", top_k=5, mode=mode, where={"$or": [{"n": 1}, {"n": {"$gte": 48}}]}
        )  # type: ignore[arg-type]
        assert sorted(h.doc_id for h in hits) == ["d1", "d48", "d49"]


def test_replacing_a_document_reembeds_only_its_changed_chunks(
    counting_embedder: CountingEmbedder,
) -> None:
    index = Index(embedder=counting_embedder)
    sections = [f"## Part {i}\n\n" + f"Paragraph {i} about topic {i}. " * 30 for i in range(6)]
    text = "# Book\n\n" + "\n\n".join(sections)
    first = index.add_documents({"book": text})
    assert first.added == 1 and first.chunks_embedded == first.chunks >= 6
    edited = text.replace("Paragraph 3 about", "Paragraph 3 (revised) about", 1)
    second = index.add_documents({"book": edited})
    assert second.replaced == 1 and second.chunks_embedded == 1
    assert second.chunks_reused == second.chunks - 1
    third = index.add_documents({"book": edited})
    assert third.unchanged == 1 and third.chunks_embedded == 0
    assert "revised" in index.get_document("book").text
    assert index.search("revised", mode="keyword")[0].doc_id == "book"


def test_update_metadata_does_not_reembed(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents({"a": "some words here"}, metadata={"v": 1, "keep": True})
    embedded = len(counting_embedder.passages)
    index.update_metadata("a", {"v": 2})
    assert index.get_document("a").metadata == {"v": 2, "keep": True}
    index.update_metadata("a", {"only": 1}, merge=False)
    assert index.get_document("a").metadata == {"only": 1}
    assert index.search("words", where={"only": 1})[0].doc_id == "a"
    assert len(counting_embedder.passages) == embedded
    with pytest.raises(NotFoundError):
        index.update_metadata("missing", {"v": 1})


def test_reading_chunks_neighbours_and_documents(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    text = "# T\n\n" + "\n\n".join(f"## S{i}\n\nbody {i}" for i in range(5))
    index.add_documents({"doc": text})
    hit = index.search("body 2", mode="keyword", top_k=1)[0]
    chunk = index.get_chunk(hit.chunk_id)
    assert chunk.text == hit.text and chunk.position == hit.position
    around = index.neighbors(hit.chunk_id, window=1)
    assert [c.position for c in around] == [chunk.position - 1, chunk.position, chunk.position + 1]
    assert all(text[c.start : c.end] == c.text for c in around)
    with pytest.raises(NotFoundError):
        index.get_chunk("default:999999")
    with pytest.raises(NotFoundError):
        index.get_chunk("not-an-id")
    with pytest.raises(NotFoundError):
        index.get_document("nope")
    with pytest.raises(InvalidArgumentError):
        index.neighbors(hit.chunk_id, window=-1)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab é€\n😀ção#"), min_size=0, max_size=200),
    offset=st.integers(0, 220),
    max_chars=st.integers(1, 220),
)
def test_a_document_part_is_the_slice_python_would_cut(
    text: str, offset: int, max_chars: int
) -> None:
    # SQLite cuts the stored text (substr/length): its characters must be Python's, emoji
    # and accents included, or offsets from search hits would point elsewhere.
    index = Index(embedder=HashingEmbedder(32))
    index.add_documents({"doc": text})
    part = index.read_document("doc", offset=offset, max_chars=max_chars)
    assert part.text == text[offset : offset + max_chars]
    assert part.chars == len(text) and part.offset == min(offset, len(text))
    assert part.end == part.offset + len(part.text)
    assert part.truncated == (part.end < len(text))


def test_reading_a_part_of_a_huge_document_holds_only_that_part() -> None:
    index = Index(embedder=HashingEmbedder(32))
    text = "".join(f"line {i} ção\n" for i in range(400_000))  # 5.2 million characters
    index.add_documents({"big": text})
    del text
    tracemalloc.start()
    try:
        part = index.read_document("big", offset=1_000_000, max_chars=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(part.text) == 1000 and part.chars > 5_000_000 and part.truncated
    # get_document would hold the whole text (10 MB as a str) in Python; the part is read
    # in pieces of 256 KiB.
    assert peak < 2_500_000, peak
    with pytest.raises(NotFoundError):
        index.read_document("nope", max_chars=10)
    with pytest.raises(InvalidArgumentError):
        index.read_document("big", offset=-1, max_chars=10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "non-empty"),
        ({"query": "x" * 1_000_000}, "limit"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 10**9}, "top_k"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
        ({"query": "x", "where": {"a": {"$regex": "."}}}, "$regex"),
    ],
)
def test_bad_search_arguments_get_clear_errors(
    counting_embedder: CountingEmbedder, kwargs: dict[str, object], message: str
) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents({"a": "text"})
    with pytest.raises((InvalidArgumentError, InvalidFilterError), match=None) as info:
        index.search(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_bad_documents_get_clear_errors(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    with pytest.raises(InvalidArgumentError, match="JSON"):
        index.add_documents({"a": "t"}, metadata={"x": float("nan")})
    with pytest.raises(InvalidArgumentError, match="ids"):
        index.add_documents({"": "t"})
    with pytest.raises(InvalidArgumentError, match="string"):
        index.add_documents({"a": b"bytes"})  # type: ignore[dict-item]
    assert index.stats().chunks == 0


def test_empty_documents_are_stored_without_chunks(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents({"empty": "", "blank": " \n\n "})
    assert index.get_document("empty").chunk_count == 0
    assert {d.doc_id for d in index.list_documents()} == {"empty", "blank"}
    assert index.search("anything") == []


def test_corpora_are_separate_with_weights_and_languages(
    counting_embedder: CountingEmbedder,
) -> None:
    index = Index(embedder=counting_embedder)
    index.create_corpus("pt", language="portuguese")
    index.add_documents({"lei": "As ações da empresa e a informação fiscal."}, corpus="pt")
    index.add_documents({"law": "Company shares and tax information."}, corpus="en")
    assert index.corpora == ["en", "pt"]
    assert [h.doc_id for h in index.search("acao", mode="keyword")] == ["lei"]
    assert [h.doc_id for h in index.search("informacao", corpora=["pt"])] == ["lei"]
    index.add_documents({"same": "shared id"}, corpus="pt")
    index.add_documents({"same": "shared id"}, corpus="en")
    with pytest.raises(InvalidArgumentError, match="several corpora"):
        index.get_document("same")
    assert index.get_document("same", corpus="en").corpus == "en"
    index.set_corpus_weight("en", 0.0)
    assert {h.corpus for h in index.search("shared id") if h.score > 0} == {"pt"}
    with pytest.raises(NotFoundError):
        index.search("x", corpora=["nope"])


def test_a_misspelt_corpus_name_gets_a_did_you_mean(counting_embedder: CountingEmbedder) -> None:
    index = Index(embedder=counting_embedder)
    index.add_documents({"a": "some text"}, corpus="papers")
    index.add_documents({"b": "other text"}, corpus="leis")
    with pytest.raises(NotFoundError) as caught:
        index.search("text", corpora=["paprs"])
    assert (
        str(caught.value)
        == "no corpus named 'paprs'; did you mean 'papers'? (corpora: leis, papers)"
    )
    with pytest.raises(NotFoundError, match=r"'lies'; did you mean 'leis'\?"):
        index.list_documents(corpus="lies")
    with pytest.raises(NotFoundError) as caught:
        index.search("text", corpora=["zzz"])
    assert str(caught.value) == "no corpus named 'zzz' (corpora: leis, papers)"


def test_languages_are_given_by_iso_code_or_name(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(32), language="pt") as index:
        assert index.language == "portuguese"
        index.add_documents({"lei": "As ações da empresa."})
        index.create_corpus("br", language="pt-BR")
        index.create_corpus("br", language="portuguese")  # the same language: no change
        index.create_corpus("en", language="en")
        assert index.store("default").language == index.store("br").language == "portuguese"
        assert index.store("en").language == "english"
        assert [h.doc_id for h in index.search("acao", mode="keyword")] == ["lei"]
        with pytest.raises(ConfigError, match="unknown language 'klingon'"):
            index.create_corpus("x", language="klingon")
    with pytest.raises(ConfigError, match="pt-BR"):
        Index(embedder=HashingEmbedder(32), language="xx")


LEIS = {
    "a": "As ações da empresa pagam imposto sobre a informação fiscal.",
    "b": "O imposto de renda das pessoas físicas vence em abril.",
    "c": "A empresa publicou a informação para os acionistas.",
    "d": "Regras de contabilidade para ações preferenciais e ordinárias.",
}


def test_hybrid_ignores_the_dense_list_on_a_language_the_model_does_not_know() -> None:
    english_only = EngineSettings(embedding={"languages": ["en"]})
    with Index(embedder=HashingEmbedder(64), settings=english_only, language="pt") as index:
        index.add_documents(LEIS)
        index.create_corpus("en", language="en")
        index.add_documents({"en": "Company shares pay tax on information."}, corpus="en")
        for query in ("imposto da empresa", "informação", "ações ordinárias", "renda abril"):
            hybrid = index.search(query, corpora=["default"])
            keyword = index.search(query, mode="keyword", corpora=["default"])
            assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in keyword]
        # only stopwords: BM25 finds nothing, and the dense list is not used either
        assert index.search("de para com", corpora=["default"]) == []
        # the English corpus in the same index is still fused with its dense list
        assert index.search("de para com", corpora=["en"]) != []
    # a model of unknown languages (this one) is trusted on any corpus
    with Index(embedder=HashingEmbedder(64), language="pt") as index:
        index.add_documents(LEIS)
        assert index.search("de para com") != []
        with pytest.raises(InvalidArgumentError, match="fusion must be one of"):
            index.search("imposto", fusion="sum")
        assert index.search("imposto renda", fusion="zscore")[0].doc_id == "b"


def test_reopening_with_another_model_is_refused_densely(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents({"a": "text"})
    with Index(tmp_path / "idx", embedder=HashingEmbedder(32)) as index:
        assert "guaipeca reembed default" in index.mismatched_corpora["default"]
        with pytest.raises(ModelError, match="reembed"):
            index.search("text", corpora=["default"])
        assert index.search("text", corpora=["default"], mode="keyword")
        with pytest.raises(ModelError):
            index.add_documents({"b": "more"})
        index.drop_corpus("default")
        index.add_documents({"b": "more"})
        assert index.mismatched_corpora == {}


def test_a_second_process_cannot_write_while_the_lock_is_held(
    tmp_path: Path, counting_embedder: CountingEmbedder
) -> None:
    import subprocess
    import sys

    index = Index(tmp_path / "idx", embedder=counting_embedder)
    index.add_documents({"a": "text"})
    corpus = index.store("default")
    code = (
        "import sys, time\n"
        "from guaipeca.store.embedded import WriteLock\n"
        "from pathlib import Path\n"
        "with WriteLock(Path(sys.argv[1])):\n"
        "    print('held', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "idx/corpora/default/write.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        corpus._lock.timeout = 0.2
        from guaipeca import IndexLockedError

        with pytest.raises(IndexLockedError, match="another process"):
            index.add_documents({"b": "more"})
        assert [d.doc_id for d in index.list_documents()] == ["a"]
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    index.add_documents({"b": "more"})
    assert len(index.list_documents()) == 2
    index.close()


def test_dense_scores_are_cosine_similarities(real_embedder: MemoEmbedder) -> None:
    index = Index(embedder=real_embedder)
    index.add_documents({"v": "Vaccines train the immune system.", "s": "Stocks fell sharply."})
    hits = index.search("how do vaccines work", mode="dense")
    assert hits[0].doc_id == "v"
    q = real_embedder.embed_query("how do vaccines work")
    (p,) = real_embedder.embed_passages(
        [index.get_chunk(hits[0].chunk_id).text]  # no heading: the input is the text itself
    )
    assert np.isclose(hits[0].score, float(p @ q), atol=1e-5)
