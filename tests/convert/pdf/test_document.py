"""The PDF converter as a whole (``guaipeca.convert.pdf``, ``_document.py``): the real test
documents convert with their pages, deterministically, into chunks that cite their pages;
hostile input (not a PDF, damaged, truncated, encrypted, too many pages) gets one line.
"""

from __future__ import annotations

import time

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.convert.pdf import convert_pdf
from guaipeca.errors import ConversionError, InvalidArgumentError
from support.pdf import FEDERAL, REAL, assert_one_line, body_page, build_pdf, convert, doc_bytes

pymupdf = pytest.importorskip("pymupdf")


@pytest.mark.parametrize("name", list(REAL))
def test_real_pdf_converts_with_pages_and_known_phrases(name: str) -> None:
    result = convert(name)
    pages, phrases = REAL[name]
    assert len(result.page_starts) == pages
    assert result.page_starts[0] == 0
    assert list(result.page_starts) == sorted(result.page_starts)
    assert result.page_starts[-1] <= len(result.text)
    assert "\r" not in result.text
    for phrase in phrases:
        assert phrase in result.text, phrase


@pytest.mark.parametrize("name", list(REAL))
def test_real_pdf_conversion_is_deterministic(name: str) -> None:
    assert convert_pdf(doc_bytes(name), name=name) == convert(name)


@pytest.mark.parametrize("name", list(REAL))
def test_real_pdf_chunks_resolve_and_carry_pages(name: str) -> None:
    result = convert(name)
    chunks = chunk_text(result.text, doc_key=name, page_starts=result.page_starts)
    assert chunks
    for c in chunks:
        assert result.text[c.start : c.end] == c.text
        assert c.page_start is not None and c.page_end is not None
        assert 1 <= c.page_start <= c.page_end <= len(result.page_starts)


def test_federal_register_converts_quickly() -> None:
    data = doc_bytes(FEDERAL)
    started = time.perf_counter()
    convert_pdf(data)
    assert time.perf_counter() - started < 10  # ~0.6 s here; generous for slow CI machines


def test_password_protected_pdf_is_refused() -> None:
    data = build_pdf(
        body_page("Secret text."), encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o"
    )
    with pytest.raises(ConversionError) as err:
        convert_pdf(data)
    assert_one_line(str(err.value))
    assert "password" in str(err.value)


def test_owner_password_only_pdf_still_converts() -> None:
    data = build_pdf(
        body_page("Readable text."), encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o"
    )
    assert convert_pdf(data).text == "Readable text.\n"


def test_pages_past_the_limit_are_skipped_with_a_warning() -> None:
    data = build_pdf(body_page("One."), body_page("Two."), body_page("Three."))
    cut = convert_pdf(data, max_pages=2)
    assert cut.text == "One.\n\nTwo.\n"
    assert cut.warnings == ("read the first 2 of 3 pages: the limit is limits.max_pages (2)",)
    assert len(cut.page_starts) == 2
    full = convert_pdf(data, max_pages=3)
    assert full.text == "One.\n\nTwo.\n\nThree.\n" and full.warnings == ()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello, this is plain text and not a PDF",
        b"\x89PNG\r\n\x1a\n" + bytes(200),
        b" " * 1100 + b"<!doctype html><html><body>%PDF-1.4 quoted late</body></html>",
        bytes(range(256)) * 8,
    ],
    ids=["empty", "text", "png", "html", "binary"],
)
def test_bytes_that_are_not_a_pdf_are_refused(data: bytes) -> None:
    with pytest.raises(ConversionError) as err:
        convert_pdf(data)
    assert_one_line(str(err.value))
    assert "not a PDF" in str(err.value)


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7\n", b"%PDF-1.4\n%garbage\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"],
    ids=["header-only", "no-pages"],
)
def test_damaged_pdf_is_refused_with_one_line(data: bytes) -> None:
    with pytest.raises(ConversionError) as err:
        convert_pdf(data)
    assert_one_line(str(err.value))


@pytest.mark.parametrize("name", list(REAL))
def test_truncated_pdf_is_refused_or_partly_converted(name: str) -> None:
    data = doc_bytes(name)
    started = time.perf_counter()
    try:
        result = convert_pdf(data[: len(data) // 2], name=name)
    except ConversionError as err:
        assert_one_line(str(err))
    else:
        assert "\r" not in result.text
        assert result.page_starts[0] == 0
    assert time.perf_counter() - started < 30


def test_damaged_content_is_repaired_without_printing(capfd: pytest.CaptureFixture[str]) -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Hello")
    xref = page.get_contents()[0]
    doc.update_stream(xref, b"BT /F1 12 Tf 72 72 Td (Hello) Tj ET /Im9 Do ((( garbage")
    data = doc.tobytes()
    convert_pdf(data)
    with pytest.raises(ConversionError):
        convert_pdf(data[: len(data) // 2] + b"xx")
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # MuPDF must not write into an MCP stdio stream


def test_max_pages_must_be_positive() -> None:
    with pytest.raises(InvalidArgumentError):
        convert_pdf(build_pdf(body_page("Text.")), max_pages=0)
