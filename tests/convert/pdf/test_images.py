"""Images a PDF page declares larger than ``limits.max_image_pixels`` (``_images.py``): a
page showing such an inline image is skipped before MuPDF interprets it (which decodes it
whole), a scanned page showing such an image object is not rendered for OCR; either way in
bounded memory and time, with a warning naming the limit. Built as 2 MB bombs of 46,300 x
46,300 grey pixels (2.1 GB decoded) by tests/support/images.py.
"""

from __future__ import annotations

import os
import time

import pytest

from guaipeca.convert import DEFAULT_MAX_IMAGE_PIXELS, OcrOptions, convert_bytes
from guaipeca.convert.ocr import installed_languages
from guaipeca.convert.pdf import convert_pdf
from guaipeca.errors import ConversionError
from support.images import BOMB_SIDE, bomb_pdf
from support.reliability import PeakRssGrowth

OVER = (
    f"is {BOMB_SIDE:,} x {BOMB_SIDE:,} pixels ({BOMB_SIDE**2:,}); the limit is "
    f"limits.max_image_pixels ({DEFAULT_MAX_IMAGE_PIXELS:,})"
)
MB = 2**20


def test_a_page_with_an_inline_image_bomb_is_skipped_and_the_rest_kept() -> None:
    data = bomb_pdf(text_page="Alpha page one text.", inline=True)
    started = time.perf_counter()
    with PeakRssGrowth() as peak:
        result = convert_pdf(data)
    assert result.text.strip() == "Alpha page one text."
    assert result.warnings == (f"page 2 was skipped: an inline image on the page {OVER}",)
    assert time.perf_counter() - started < 2
    assert peak.growth < 100 * MB


def test_a_pdf_whose_only_page_is_an_inline_bomb_is_refused_naming_the_limit() -> None:
    with pytest.raises(ConversionError) as err:
        convert_bytes(bomb_pdf(inline=True), ".pdf", name="bomb.pdf")
    assert str(err.value) == f"page 1 was skipped: an inline image on the page {OVER}"


def test_an_image_object_bomb_is_never_decoded_for_the_text() -> None:
    """Without OCR the page is only interpreted for its text: the image is not decoded."""
    data = bomb_pdf(text_page="Alpha page one text.")
    with PeakRssGrowth() as peak:
        result = convert_pdf(data, ocr=OcrOptions(enabled=False))
    assert result.text.strip() == "Alpha page one text."
    assert "page 2 has no text layer" in result.warnings[0]
    assert peak.growth < 100 * MB


def test_a_scanned_page_showing_an_image_bomb_is_not_rendered_for_ocr() -> None:
    if "eng" not in installed_languages():
        message = "Tesseract's language data is not installed (apt install tesseract-ocr-eng)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it: .ci/run
        pytest.skip(message)
    started = time.perf_counter()
    with PeakRssGrowth() as peak:
        result = convert_pdf(bomb_pdf(text_page="Alpha page one text."), ocr=OcrOptions())
        with pytest.raises(ConversionError) as err:
            convert_bytes(bomb_pdf(), ".pdf", name="bomb.pdf", ocr=OcrOptions())
    assert result.text.strip() == "Alpha page one text."
    assert result.warnings == (f"page 2 was not read with OCR: an image on the page {OVER}",)
    assert str(err.value) == f"page 1 was not read with OCR: an image on the page {OVER}"
    assert time.perf_counter() - started < 5
    assert peak.growth < 100 * MB
