"""Resource URIs and the links built from a tool's structured result."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.uri_template import UriTemplate

from guaipeca.server.tools.links import (
    CHUNK_URI_TEMPLATE,
    DOCUMENT_URI_TEMPLATE,
    chunk_uri,
    document_uri,
    resource_links,
)

NAMES = st.text(min_size=1, max_size=40).filter(lambda s: "\0" not in s)


@given(corpus=NAMES, doc_id=NAMES)
def test_a_document_uri_matches_its_template_back_to_the_same_values(
    corpus: str, doc_id: str
) -> None:
    matched = UriTemplate.parse(DOCUMENT_URI_TEMPLATE).match(document_uri(corpus, doc_id))
    assert matched == {"corpus": corpus, "doc_id": doc_id}


@given(corpus=NAMES, number=st.integers(min_value=0, max_value=10**12))
def test_a_chunk_uri_names_the_corpus_and_the_number_of_its_id(corpus: str, number: int) -> None:
    matched = UriTemplate.parse(CHUNK_URI_TEMPLATE).match(chunk_uri(f"{corpus}:{number}"))
    assert matched == {"corpus": corpus, "chunk": str(number)}


def test_uris_percent_encode_each_value_slash_included() -> None:
    assert document_uri("docs", "a/b c#1.md") == "guaipeca://corpus/docs/doc/a%2Fb%20c%231.md"
    assert chunk_uri("my docs:12") == "guaipeca://corpus/my%20docs/chunk/12"


def hit(chunk: int, doc_id: str, corpus: str = "docs") -> dict[str, object]:
    return {
        "chunk_id": f"{corpus}:{chunk}",
        "corpus": corpus,
        "doc_id": doc_id,
        "heading_path": ["Guide", "Install"],
        "heading_trail": ["Guide", "Install", "Linux"],
        "start": 10,
        "end": 20,
    }


def test_hits_link_each_chunk_then_each_document_once() -> None:
    links = resource_links(
        {"hits": [hit(3, "a.md"), hit(4, "b.md"), hit(5, "a.md"), hit(3, "a.md")]}
    )
    assert [(link.name, link.uri) for link in links] == [
        ("docs:3", chunk_uri("docs:3")),
        ("docs:4", chunk_uri("docs:4")),
        ("docs:5", chunk_uri("docs:5")),
        ("a.md", document_uri("docs", "a.md")),
        ("b.md", document_uri("docs", "b.md")),
    ]
    assert links[0].title == "Guide > Install > Linux"
    assert links[0].description == "chunk docs:3 of a.md, characters 10-20"
    assert links[3].title == "Guide"
    assert {link.type for link in links} == {"resource_link"}
    assert {link.mime_type for link in links} == {"text/markdown"}


def test_the_same_doc_id_in_two_corpora_is_two_documents() -> None:
    links = resource_links({"hits": [hit(1, "a.md"), hit(1, "a.md", corpus="other")]})
    assert [link.uri for link in links][2:] == [
        document_uri("docs", "a.md"),
        document_uri("other", "a.md"),
    ]


def test_listed_documents_take_the_results_corpus_when_they_have_none() -> None:
    # get_toc's corpus listing: the corpus is named once, at the top.
    links = resource_links({"corpus": "docs", "documents": [{"doc_id": "x.md"}]})
    assert [link.uri for link in links] == [document_uri("docs", "x.md")]


def test_a_result_naming_no_record_has_no_links() -> None:
    assert resource_links({"version": "1", "corpora": [{"name": "docs"}]}) == []
    assert resource_links({"hits": "not a list", "documents": [{"corpus": "docs"}]}) == []
