"""Structure-aware search: section mode, section filters, return modes, the table of contents."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca import Index, InvalidArgumentError, NewDocument, NotFoundError
from guaipeca.chunk import chunk_text
from support import CountingEmbedder

GUIDE = (
    "# Guide\n\nIntro to the guide.\n\n"
    "## Install\n\n" + "Run the installer with care. " * 40 + "\n\n"
    "### On Linux\n\nUse the installer package on Linux.\n\n"
    "## Usage\n\nSearch the index. Use filters.\n\n"
    "```\n# not a heading\n```\n"
)


@pytest.fixture
def index(counting_embedder: CountingEmbedder) -> Index:
    ix = Index(embedder=counting_embedder)
    ix.add_documents({"guide": GUIDE, "plain": "No headings here, only installer words."})
    return ix


def test_section_mode_returns_each_section_once_with_its_whole_text(index: Index) -> None:
    hits = index.search("installer", mode="keyword", section_mode=True, top_k=10)
    keys = [(h.doc_id, h.section_id) for h in hits]
    assert len(keys) == len(set(keys))
    install = next(h for h in hits if h.heading_path == ("Guide", "Install"))
    assert install.text.startswith("## Install") and "On Linux" in install.text
    assert GUIDE[install.start : install.end] == install.text
    assert index.resolve(install) == install.text


def test_section_filter_takes_a_heading_path_prefix_or_a_section_id(index: Index) -> None:
    hits = index.search("installer", mode="keyword", section_filter="Guide > Install")
    assert hits and all(h.heading_path[:2] == ("Guide", "Install") for h in hits)
    assert index.search("installer", section_filter="Guide > Usage", mode="keyword") == []
    sid = hits[0].section_id
    assert {h.section_id for h in index.search("installer", section_filter=sid)} == {sid}
    assert {h.doc_id for h in index.search("installer", section_filter="Guide")} == {"guide"}
    with pytest.raises(InvalidArgumentError):
        index.search("x", section_filter="  ")


def _small_budget(index: Index, max_chars: int) -> Index:
    """An index of GUIDE alone whose ``search.max_chars`` is ``max_chars``."""
    small = Index(
        embedder=CountingEmbedder(),
        settings=index.settings.model_copy(
            update={"search": index.settings.search.model_copy(update={"max_chars": max_chars})}
        ),
    )
    small.add_documents({"guide": GUIDE})
    return small


def test_return_mode_documents(index: Index) -> None:
    docs = index.search("installer", mode="keyword", return_mode="documents")
    assert sorted(h.doc_id for h in docs) == ["guide", "plain"]
    guide = next(h for h in docs if h.doc_id == "guide")
    assert (guide.start, guide.end, guide.text) == (0, len(GUIDE), GUIDE)
    with pytest.raises(InvalidArgumentError):
        index.search("x", return_mode="pages")  # type: ignore[arg-type]


def test_return_mode_auto_gives_chunks_while_they_fit_else_documents(index: Index) -> None:
    # The seed Guaipeca's auto (issue 38): chunks while their total is under
    # search.max_chars, otherwise collapsed to documents.
    chunks = index.search("installer", mode="keyword")
    assert sum(len(h.text) for h in chunks) < index.settings.search.max_chars
    auto = index.search("installer", mode="keyword", return_mode="auto")
    assert [(h.chunk_id, h.text) for h in auto] == [(h.chunk_id, h.text) for h in chunks]
    small = _small_budget(index, 100)
    over = small.search("installer", mode="keyword", return_mode="auto")
    assert [(h.doc_id, h.text) for h in over] == [("guide", GUIDE)]


def test_return_mode_documents_if_fit_keeps_the_earlier_auto(index: Index) -> None:
    # What auto did before issue 38: whole documents when they fit together, else chunks.
    docs = index.search("installer", mode="keyword", return_mode="documents")
    fit = index.search("installer", mode="keyword", return_mode="documents_if_fit")
    assert {h.text for h in fit} == {h.text for h in docs}
    small = _small_budget(index, 100)
    chunks = small.search("installer", mode="keyword", return_mode="documents_if_fit")
    assert chunks and all(len(h.text) < len(GUIDE) for h in chunks)


def test_toc_is_a_heading_tree_with_chunk_counts(index: Index) -> None:
    toc = index.toc("guide")
    assert toc["structured"] is True
    (title,) = toc["headings"]
    assert title["title"] == "Guide" and title["level"] == 1
    names = [c["title"] for c in title["children"]]
    assert names == ["Install", "Usage"]
    install = title["children"][0]
    assert [c["title"] for c in install["children"]] == ["On Linux"]
    total = title["chunks"] + sum(
        c["chunks"] + sum(g["chunks"] for g in c["children"]) for c in title["children"]
    )
    assert total == toc["chunks"] == index.get_document("guide").chunk_count
    plain = index.toc("plain")
    assert plain["structured"] is False and plain["headings"] == [] and plain["chunks"] == 1
    with pytest.raises(NotFoundError):
        index.toc("missing")


def test_a_comment_in_indented_code_is_no_heading_of_the_toc(index: Index) -> None:
    # A chunk cut inside an indented example starts at its "# comment" line: read alone, that
    # chunk seemed to open with a level-1 heading (Django's querysets.txt had one over 64 of
    # its 88 chunks).
    example = "Example::\n\n    # Hits the database.\n    e = 1\n\n"
    example += "    # Doesn't hit the database.\n    b = e.blog\n"
    text = "# Guide\n\n" + "Some words here. " * 112 + "\n\n" + example
    index.add_documents({"example": text})
    chunks = [c.text for c in chunk_text(text, doc_key="example")]
    assert any(c.startswith("# Doesn't hit") for c in chunks)  # the case in point
    toc = index.toc("example")
    (title,) = toc["headings"]
    assert (title["title"], title["children"], title["chunks"]) == ("Guide", [], len(chunks))


def test_a_whole_document_hit_spans_its_pages(tmp_path: Path) -> None:
    # The page span comes from one aggregate query, not from reading every chunk (issue 38).
    pages = ["# Report\n\nThe installer page one. " + "filler words " * 60, "Page two. " * 80]
    text = "\n\n".join(pages)
    doc = NewDocument("report", text, page_starts=(0, len(pages[0]) + 2))
    with Index(tmp_path / "ix", embedder=CountingEmbedder()) as ix:
        ix.add_documents([doc, NewDocument("plain", "installer without pages")])
        hits = ix.search("installer", mode="keyword", return_mode="documents")
        spans = {h.doc_id: (h.page_start, h.page_end) for h in hits}
    assert spans == {"report": (1, 2), "plain": (None, None)}
