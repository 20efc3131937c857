"""The store contract: every Index operation behaves the same on both backends."""

from __future__ import annotations

import pytest

from guaipeca import NewDocument
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import InvalidArgumentError, ModelError, NotFoundError
from support.qdrant import MakeIndex, open_index

MODES = ("hybrid", "dense", "keyword")


def test_add_search_and_read_back(make_index: MakeIndex) -> None:
    index = make_index()
    text = "# Guide\n\n## Install\n\nRun the installer twice.\n\n## Usage\n\nSearch the notes."
    report = index.add_documents(
        [NewDocument("guide", text, metadata={"kind": "manual"}, source_path="docs/guide.md")]
    )
    assert report.added == 1 and report.chunks >= 2
    for mode in MODES:
        hit = index.search("installer", mode=mode, top_k=1)[0]
        assert hit.doc_id == "guide" and index.resolve(hit) == hit.text
        assert hit.source_path == "docs/guide.md" and hit.metadata == {"kind": "manual"}
        assert hit.heading_path[0] == "Guide" and hit.section_id
    hit = index.search("installer", mode="keyword")[0]
    assert hit.scores.lexical is not None and hit.scores.lexical_rank == 1
    chunk = index.get_chunk(hit.chunk_id)
    assert (chunk.text, chunk.start, chunk.end) == (hit.text, hit.start, hit.end)
    doc = index.get_document("guide")
    assert doc.text == text and doc.chunk_count == report.chunks
    toc = index.toc("guide")
    assert toc["structured"] and [h["title"] for h in toc["headings"][0]["children"]] == [
        "Install",
        "Usage",
    ]
    [info] = index.list_documents()
    assert (info.doc_id, info.source_path) == ("guide", "docs/guide.md")
    assert index.stats().corpora[0].documents == 1


def test_replace_reuses_vectors_and_drops_old_chunks(make_index: MakeIndex) -> None:
    from support import CountingEmbedder

    embedder = CountingEmbedder()
    index = make_index(embedder=embedder)
    sections = [f"## Part {i}\n\n" + f"Paragraph {i} about topic {i}. " * 30 for i in range(6)]
    text = "# Book\n\n" + "\n\n".join(sections)
    first = index.add_documents({"book": text})
    edited = text.replace("Paragraph 3 about", "Paragraph 3 (revised) about", 1)
    second = index.add_documents({"book": edited})
    assert second.replaced == 1 and second.chunks_embedded == 1
    assert second.chunks_reused == second.chunks - 1
    assert index.add_documents({"book": edited}).unchanged == 1
    assert index.stats().chunks == first.chunks
    assert index.search("revised", mode="keyword")[0].doc_id == "book"
    hits = index.search("paragraph topic", top_k=100, mode="keyword")
    current = {c.chunk_id for c in index.neighbors(hits[0].chunk_id, window=100)}
    assert len(current) == first.chunks
    assert {h.chunk_id for h in hits} <= current  # no chunk of the first version is left


def test_update_metadata_delete_and_filters_follow(make_index: MakeIndex) -> None:
    index = make_index()
    index.add_documents({"a": "some words here", "b": "other words"}, metadata={"v": 1, "k": True})
    index.update_metadata("a", {"v": 2})
    assert index.get_document("a").metadata == {"v": 2, "k": True}
    assert [h.doc_id for h in index.search("words", where={"v": 2})] == ["a"]
    index.update_metadata("a", {"only": 1}, merge=False)
    assert index.get_document("a").metadata == {"only": 1}
    assert [h.doc_id for h in index.search("words", where={"k": {"$exists": False}})] == ["a"]
    with pytest.raises(NotFoundError):
        index.update_metadata("missing", {"v": 1})
    assert index.delete_document("b") and not index.delete_document("b")
    assert [h.doc_id for h in index.search("words", top_k=10)] == ["a"]
    with pytest.raises(NotFoundError):
        index.get_document("b")
    assert [d.doc_id for d in index.list_documents()] == ["a"]


def test_neighbours_chunks_and_errors(make_index: MakeIndex) -> None:
    index = make_index()
    text = "# T\n\n" + "\n\n".join(f"## S{i}\n\nbody {i}" for i in range(5))
    index.add_documents({"doc": text})
    hit = index.search("body 2", mode="keyword", top_k=1)[0]
    around = index.neighbors(hit.chunk_id, window=1)
    assert [c.position for c in around] == [hit.position - 1, hit.position, hit.position + 1]
    assert all(text[c.start : c.end] == c.text for c in around)
    with pytest.raises(NotFoundError):
        index.get_chunk("default:999999")
    with pytest.raises(NotFoundError):
        index.get_document("nope")
    with pytest.raises(InvalidArgumentError):
        index.search("x", top_k=0)


def test_reopen_keeps_everything_and_refuses_another_model(make_index: MakeIndex) -> None:
    index = make_index()
    index.add_documents({f"d{i}": f"document number {i} about apples" for i in range(20)})
    index.add_documents({"p": "maçãs e peras"}, corpus="pt")
    before = [(h.chunk_id, h.score) for h in index.search("apples 7", top_k=5)]
    index.close()
    again = make_index()
    assert again.corpora == ["default", "pt"]
    assert [(h.chunk_id, h.score) for h in again.search("apples 7", top_k=5)] == before
    again.close()
    broken = make_index(embedder=HashingEmbedder(32))
    with pytest.raises(ModelError):
        broken.search("apples", corpora=["default"])


def test_delete_then_compact_matches_a_fresh_index(
    make_index: MakeIndex, tmp_path_factory: pytest.TempPathFactory
) -> None:
    docs = {f"d{i}": f"apple report {i} " + "filler words " * (i % 7) for i in range(60)}
    index = make_index()
    index.add_documents(docs)
    for i in range(0, 60, 3):
        index.delete_document(f"d{i}")
    index.compact()
    kept = {k: v for i, (k, v) in enumerate(docs.items()) if i % 3}
    # The reference is the embedded backend on the kept documents only.
    reference = open_index("embedded", tmp_path_factory.mktemp("ref"))
    reference.add_documents(docs)
    for i in range(0, 60, 3):
        reference.delete_document(f"d{i}")
    reference.compact()
    assert [d.doc_id for d in index.list_documents(limit=1000)] == sorted(kept)
    for mode in MODES:
        got = [h.doc_id for h in index.search("apple report 10 filler", mode=mode, top_k=10)]
        want = [h.doc_id for h in reference.search("apple report 10 filler", mode=mode, top_k=10)]
        assert got == want, mode
    reference.close()


def test_corpora_weights_and_languages(make_index: MakeIndex) -> None:
    index = make_index()
    index.create_corpus("pt", language="portuguese", weight=2.0)
    index.add_documents({"x": "As ações da empresa subiram."}, corpus="pt")
    index.add_documents({"y": "The company shares rose."})
    hit = index.search("ação", mode="keyword", corpora=["pt"])[0]
    assert hit.corpus == "pt" and hit.chunk_id.startswith("pt:")
    index.drop_corpus("pt")
    assert index.corpora == ["default"]


def test_empty_documents_and_paged_sources(make_index: MakeIndex) -> None:
    index = make_index()
    text = "# Report\n\nFirst page words.\n\n## Later\n\nSecond page words."
    index.add_documents(
        [
            NewDocument("empty", ""),
            NewDocument("paged", text, source_path="r.pdf", page_starts=(0, text.index("## L"))),
        ]
    )
    assert index.get_document("empty").chunk_count == 0
    assert [d.doc_id for d in index.list_documents()] == ["empty", "paged"]
    assert [d.doc_id for d in index.list_documents(where={"extension": ".pdf"})] == ["paged"]
    hit = index.search("second page", mode="keyword", where={"page": 2})[0]
    assert (hit.page_start, hit.doc_id) == (2, "paged")
    assert index.source_states("default")[0].doc_id == "empty"
