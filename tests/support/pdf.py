"""Helpers for the PDF converter's tests (tests/convert/pdf/): the real test documents, their
conversions (memoised: each is converted once per test run) and small PDFs built with PyMuPDF
itself, so nothing is downloaded.

The five PDFs come from ``tests/data/docs`` (see tests/data/README.md).
"""

from __future__ import annotations

import re
from functools import cache

from guaipeca.convert.pdf import PdfResult, convert_pdf
from support import shared_data

FEDERAL = "federal-register-2020-17221.pdf"
NICS = "nics-background-checks-2015-11.pdf"
SENATE = "senate-expenditures.pdf"
WORD365 = "word365_structure.pdf"
AMT = "amt_handbook_sample.pdf"

# file → (pages, phrases that must appear verbatim in the Markdown)
REAL = {
    FEDERAL: (
        15,
        [
            "The FAA proposes to supersede Airworthiness Directive (AD) 2018–23–51",
            "Lion Air (Lion Air Flight 610)",
            "Airworthiness Directives; Pilatus Aircraft Ltd. Airplanes",
        ],
    ),
    NICS: (1, ["NICS Firearm Background Checks", "District of Columbia", "2,236,457"]),
    SENATE: (1, ["BAIN, J MATTHEW", "AIRFARE FOR E JOHNSON KANSAS CITY TO WASHINGTON DC"]),
    WORD365: (1, ["Lorem ipsum dolor sit amet", "Alouette", "Bibitte"]),
    AMT: (
        1,
        [
            "The Boots self-locking nut is of one piece, all-metal construction designed to "
            "hold tight despite severe vibration.",
            "Figure 7-27. Stainless steel self-locking nut.",
        ],
    ),
}


def doc_bytes(name: str) -> bytes:
    return shared_data("docs", name).read_bytes()


@cache
def _converted(name: str) -> PdfResult:
    return convert_pdf(doc_bytes(name), name=name)


def convert(name: str) -> PdfResult:
    doc_bytes(name)  # skip/fail before caching when the file is missing
    return _converted(name)


def text_lines(text: str) -> list[str]:
    return text.split("\n")


def table_blocks(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of consecutive ``| … |`` lines."""
    return [(m.start(), m.end()) for m in re.finditer(r"(?m)^\|.*\|(?:\n\|.*\|)*$", text)]


def assert_one_line(message: str) -> None:
    assert message, "empty message"
    assert "\n" not in message and "\r" not in message, message
    assert "Traceback" not in message, message
    assert "site-packages" not in message and "/tmp" not in message, message


def build_pdf(
    *pages: list[tuple[str, float, str]] | None, top: float = 72.0, **save: object
) -> bytes:
    """A PDF whose pages hold ``(text, size, font)`` lines; ``None`` draws only a rectangle."""
    import pymupdf  # here, not at the top: the test modules skip when PyMuPDF is missing

    doc = pymupdf.open()
    for spec in pages:
        page = doc.new_page()
        if spec is None:
            page.draw_rect(pymupdf.Rect(100, 100, 300, 300), color=(0, 0, 0), fill=(0.5, 0.5, 0.5))
            continue
        y = top
        for text, size, font in spec:
            page.insert_text((72, y), text, fontsize=size, fontname=font)
            y += (text.count("\n") + 1) * size * 1.25 + size
    return bytes(doc.tobytes(**save))


def body_page(text: str) -> list[tuple[str, float, str]]:
    return [(text, 11, "helv")]
