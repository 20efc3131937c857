"""Pages without a text layer (``_scanned.py``) when OCR is off: reported by page, or the
document refused when no page has text. OCR itself: tests/convert/test_ocr.py.
"""

from __future__ import annotations

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.convert.pdf import convert_pdf
from guaipeca.errors import ConversionError
from support.pdf import FEDERAL, assert_one_line, body_page, build_pdf, convert

pymupdf = pytest.importorskip("pymupdf")


def test_federal_register_figure_only_page_is_reported() -> None:
    # Page 8 holds only a picture of AFM text between the running head and foot.
    assert convert(FEDERAL).warnings == (
        "page 8 has no text layer (scanned image?) and OCR is off or Tesseract is not "
        "installed; it was not indexed",
    )


def test_partly_scanned_pdf_converts_with_a_warning_naming_the_page() -> None:
    data = build_pdf(body_page("Alpha page one text."), None, body_page("Gamma page three text."))
    result = convert_pdf(data)
    assert result.warnings == (
        "page 2 has no text layer (scanned image?) and OCR is off or Tesseract is not "
        "installed; it was not indexed",
    )
    assert len(result.page_starts) == 3
    chunks = chunk_text(result.text, doc_key="d", page_starts=result.page_starts, max_size=25)
    assert [(c.text, c.page_start, c.page_end) for c in chunks] == [
        ("Alpha page one text.", 1, 1),
        ("Gamma page three text.", 3, 3),
    ]
    gamma = result.text.index("Gamma")
    assert result.page_starts[2] == gamma
    assert result.page_starts[1] <= gamma


def test_several_scanned_pages_are_listed_as_ranges() -> None:
    data = build_pdf(body_page("Text."), None, None, None, body_page("More."), None)
    (warning,) = convert_pdf(data).warnings
    assert warning == (
        "pages 2-4, 6 have no text layer (scanned images?) and OCR is off or Tesseract is not "
        "installed; they were not indexed"
    )


def test_blank_page_is_not_reported() -> None:
    doc = pymupdf.open(stream=build_pdf(body_page("Only page with text.")), filetype="pdf")
    doc.new_page()
    result = convert_pdf(doc.tobytes())
    assert result.warnings == ()
    assert len(result.page_starts) == 2


@pytest.mark.parametrize("pages", [1, 3])
def test_pdf_without_any_text_layer_is_refused(pages: int) -> None:
    with pytest.raises(ConversionError) as err:
        convert_pdf(build_pdf(*([None] * pages)))
    message = str(err.value)
    assert_one_line(message)
    assert "no text layer" in message
    assert "OCR is off or Tesseract is not installed" in message
    if pages > 1:
        assert f"any of its {pages} pages" in message


def test_pdf_with_an_image_and_no_text_is_refused() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 40), False)
    pix.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 72, 272, 272), pixmap=pix)
    with pytest.raises(ConversionError, match="no text layer"):
        convert_pdf(doc.tobytes())
