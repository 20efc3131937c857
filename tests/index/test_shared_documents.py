"""The shared sample documents end to end: clean canonical text (no image syntax, no picture
URLs, the same article text), and snippets that show the answer (issue 22's checks)."""

from __future__ import annotations

import re
from functools import cache

import pytest

from guaipeca import Index
from guaipeca.chunk import chunk_text
from guaipeca.convert import OcrOptions, convert_file
from support import MemoEmbedder, shared_data

# A picture's URL: by extension (also MediaWiki's "....webm.jpg" thumbnails) or host.
IMAGE_URL = re.compile(
    r"(?:https?:)?//\S+?\.(?:png|jpe?g|gif|svg|webp|webm|ogv|tiff?)\b|upload\.wikimedia",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")


@cache
def _converted(name: str) -> str:
    return convert_file(shared_data("docs", name), ocr=OcrOptions(enabled=False)).text


def _names() -> list[str]:
    folder = shared_data("docs")
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".md")


def test_no_chunk_of_any_shared_document_holds_image_syntax_or_a_picture_url() -> None:
    names = _names()
    assert len(names) >= 14
    for name in names:
        text = _converted(name)
        for chunk in chunk_text(text, doc_key=name):
            # Every hit's text is one of these spans (or a section made of them), and its
            # snippet is cut from that text.
            assert "![" not in chunk.text, name
            assert not IMAGE_URL.search(chunk.text), (name, IMAGE_URL.search(chunk.text))


@pytest.mark.parametrize("name", ["wikipedia_duck.html", "wikipedia_mozilla.html"])
def test_wikipedia_pages_keep_every_article_paragraph(name: str) -> None:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(shared_data("docs", name).read_bytes(), "html.parser")
    # Citation markers, edit links and maintenance tags ("[citation needed]") are page
    # decoration, not article text.
    for tag in soup.select("sup.reference, .mw-editsection, .noprint, style, script"):
        tag.decompose()
    paragraphs = [
        " ".join(w.lower() for w in _WORD.findall(p.get_text(" ")))
        for p in soup.select("#mw-content-text p")
    ]
    paragraphs = [p for p in paragraphs if p]
    assert len(paragraphs) > 25
    text = _converted(name)
    words = " ".join(w.lower() for w in _WORD.findall(text))
    missing = [p[:80] for p in paragraphs if p not in words]
    assert missing == []
    assert "![" not in text and "upload.wikimedia" not in text and "](" not in text


def test_what_do_ducks_eat_shows_eat_highlighted_in_the_feeding_passage(
    real_embedder: MemoEmbedder,
) -> None:
    with Index(embedder=real_embedder) as ix:
        ix.add_documents({"wikipedia_duck.html": _converted("wikipedia_duck.html")})
        hits = ix.search("what do ducks eat?", top_k=5)
        feeding = [h for h in hits if h.heading_trail[-1:] == ("Feeding",)]
        assert feeding, [h.heading_trail for h in hits]
        hit = feeding[0]
        assert hit.heading_trail == ("Duck", "Behaviour", "Feeding")
        assert "**eat**" in hit.snippet.lower()
        assert "Ducks eat food sources such as grasses" in hit.snippet.replace("**", "")
        assert not IMAGE_URL.search(hit.snippet) and "![" not in hit.snippet
        assert any(hit.text[a:b].lower() == "eat" for a, b in hit.highlights)
