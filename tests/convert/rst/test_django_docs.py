"""Real Sphinx documentation, indexed as a new user would: three files of Django 5.2's docs
(reStructuredText saved as ``.txt``; BSD-3-Clause, licence in tests/data/django/LICENSE)
go through the folder sync, and their headings, ToC, code and roles come out true."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guaipeca import Index
from guaipeca.convert import convert_file
from guaipeca.ingest import sync_folder
from support import CountingEmbedder, shared_data

TITLE = "QuerySet API reference"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("django")
    index = Index(root / "idx", embedder=CountingEmbedder())
    report = sync_folder(index, shared_data("django"), corpus="django", cache_dir=root / "c")
    assert report.failed == [] and report.added == 3
    return index


def _nodes(headings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for node in headings:
        out.append(node)
        out.extend(_nodes(node["children"]))
    return out


def test_the_rst_files_are_detected_and_converted() -> None:
    for name in ("querysets.txt", "admindocs.txt", "5.0.6.txt"):
        converted = convert_file(shared_data("django", name))
        assert (converted.format, converted.warnings) == ("rst", ())


def test_the_toc_of_querysets_is_its_section_titles(index: Index) -> None:
    toc = index.toc("querysets.txt")
    (top,) = toc["headings"]
    assert (top["title"], top["level"]) == (TITLE, 1)
    sections = [c["title"] for c in top["children"]]
    assert sections[:2] == ["When QuerySets are evaluated", "QuerySet API"]
    api = top["children"][1]
    subsections = {c["title"]: c for c in api["children"]}
    methods = subsections["Methods that return new QuerySets"]
    assert methods["level"] == 3
    assert {"filter()", "exclude()", "select_related()"} <= {
        c["title"] for c in methods["children"]
    }
    every = _nodes(toc["headings"])
    assert not [n["title"] for n in every if n["title"].startswith("Doesn't hit the database")]
    assert not [n["title"] for n in every if "#" in n["title"] or "`" in n["title"]]


def test_every_chunk_of_querysets_has_a_true_trail(index: Index) -> None:
    hits = index.search("select_related database", mode="keyword", top_k=100)
    mine = [h for h in hits if h.doc_id == "querysets.txt"]
    assert mine and all(h.heading_trail[0] == TITLE for h in mine)
    assert not [h for h in mine if any(t.startswith("Doesn't hit") for t in h.heading_trail)]
    sr = next(h for h in mine if h.heading_trail[-1] == "select_related()")
    assert sr.heading_trail == (
        TITLE,
        "QuerySet API",
        "Methods that return new QuerySets",
        sr.heading_trail[-1],
    )
    assert sr.heading_path == (TITLE, "QuerySet API")
    inside = index.search(
        "select_related", mode="keyword", section_filter=f"{TITLE} > QuerySet API", top_k=5
    )
    assert inside and {h.doc_id for h in inside} == {"querysets.txt"}


def test_code_stays_code_and_roles_show_as_text(index: Index) -> None:
    text = index.get_document("querysets.txt").text
    comment = text.index("# Doesn't hit the database, because e.blog has been prepopulated")
    fences = [line for line in text[:comment].split("\n") if line.startswith("```")]
    assert len(fences) % 2 == 1  # the comment sits inside an open fence
    assert "```pycon\n>>> import pickle\n" in text
    for markup in (":meth:", ":class:", ":doc:", ":ref:", ".. method::", ".. code-block::"):
        assert markup not in text, markup
    assert "It's more efficient to use `exists()`." in text
    assert "material presented in the model and database query guides" in " ".join(text.split())


def test_sphinx_directives_and_tables_of_a_small_page(index: Index) -> None:
    text = index.get_document("admindocs.txt").text
    assert text.startswith("# The Django admin documentation generator\n")
    assert "| Django Component | reStructuredText roles |\n|---|---|\n" in text
    assert "*Changed in version 5.2.*\n\nSupport for custom link text was added." in text
    note = index.get_document("5.0.6.txt").text
    assert note == (
        "# Django 5.0.6 release notes\n\n*May 7, 2024*\n\n"
        "Django 5.0.6 fixes a packaging error in 5.0.5.\n"
    )


def test_the_licence_sits_beside_the_files() -> None:
    licence = Path(shared_data("django", "LICENSE")).read_text()
    assert "Django Software Foundation" in licence and "Redistribution and use" in licence
