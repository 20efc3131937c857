"""The page model (``_pages.py``): running heads, margin stamps and page numbers are dropped;
control characters never reach the text.
"""

from __future__ import annotations

import re

import pytest

from guaipeca.convert.pdf import convert_pdf
from support.pdf import FEDERAL, body_page, build_pdf, convert

pymupdf = pytest.importorskip("pymupdf")


def test_federal_register_running_heads_and_margin_stamps_are_dropped() -> None:
    text = convert(FEDERAL).text
    assert "Federal Register / Vol. 85, No. 152 / Thursday, August 6, 2020" not in text
    assert "VerDate" not in text
    assert "jbell on DSKJLSW7X2PROD" not in text  # rotated stamp in the margin of every page
    assert "</GPH>" not in text
    assert not re.search(r"(?m)^477\d\d$", text)  # bare page numbers


def test_running_heads_and_page_numbers_are_dropped() -> None:
    topics = ["apples", "pears", "plums", "figs"]
    data = build_pdf(*[body_page(f"This page is about {t}.") for t in topics], top=200)
    doc = pymupdf.open(stream=data, filetype="pdf")
    for n, page in enumerate(doc, start=1):
        page.insert_text((72, 40), f"ACME Corp - Annual Report 2024 - {n}", fontsize=9)
        page.insert_text((300, page.rect.height - 30), str(n), fontsize=9)
    result = convert_pdf(doc.tobytes())
    assert result.text == "".join(f"This page is about {t}.\n\n" for t in topics)[:-1]
    for n, topic in enumerate(topics):
        assert result.text[result.page_starts[n] :].startswith(f"This page is about {topic}.")


def test_carriage_returns_and_control_characters_never_reach_the_text() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "placeholder")
    xref = page.get_contents()[0]
    font = page.get_fonts()[0][4]
    doc.update_stream(
        xref, f"BT /{font} 12 Tf 72 720 Td (Line\rwith\x07control\x0bchars) Tj ET".encode()
    )
    result = convert_pdf(doc.tobytes())
    assert "\r" not in result.text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", result.text)
    assert "Line" in result.text and "chars" in result.text
