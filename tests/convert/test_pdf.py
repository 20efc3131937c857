"""PDF → Markdown (``guaipeca.convert.pdf``) on the real test documents and on hostile input.

The five PDFs come from ``tests/data/docs`` (see tests/data/README.md). Small PDFs for the edge
cases are built here with PyMuPDF itself, so nothing is downloaded.
"""

from __future__ import annotations

import re
import time
from functools import cache

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.convert.pdf import PdfResult, convert_pdf
from guaipeca.errors import ConversionError, InvalidArgumentError
from support import shared_data

pymupdf = pytest.importorskip("pymupdf")


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


def _doc_bytes(name: str) -> bytes:
    return shared_data("docs", name).read_bytes()


@cache
def _converted(name: str) -> PdfResult:
    return convert_pdf(_doc_bytes(name), name=name)


def convert(name: str) -> PdfResult:
    _doc_bytes(name)  # skip/fail before caching when the file is missing
    return _converted(name)


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _table_blocks(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of consecutive ``| … |`` lines."""
    return [(m.start(), m.end()) for m in re.finditer(r"(?m)^\|.*\|(?:\n\|.*\|)*$", text)]


def _assert_one_line(message: str) -> None:
    assert message, "empty message"
    assert "\n" not in message and "\r" not in message, message
    assert "Traceback" not in message, message
    assert "site-packages" not in message and "/tmp" not in message, message


# --------------------------------------------------------------------------- real documents
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
    assert convert_pdf(_doc_bytes(name), name=name) == convert(name)


@pytest.mark.parametrize("name", list(REAL))
def test_real_pdf_chunks_resolve_and_carry_pages(name: str) -> None:
    result = convert(name)
    chunks = chunk_text(result.text, doc_key=name, page_starts=result.page_starts)
    assert chunks
    for c in chunks:
        assert result.text[c.start : c.end] == c.text
        assert c.page_start is not None and c.page_end is not None
        assert 1 <= c.page_start <= c.page_end <= len(result.page_starts)


def test_federal_register_section_headings_are_markdown_headings() -> None:
    lines = set(_lines(convert(FEDERAL).text))
    for heading in (
        "# Proposed Rules",  # the one 18-pt title on page 1
        "## SUMMARY",  # run-in labels "SUMMARY: The FAA proposes …"
        "## DATES",
        "## ADDRESSES",
        "## FOR FURTHER INFORMATION CONTACT",
        "## SUPPLEMENTARY INFORMATION",
        "## Examining the AD Docket",  # bold body-size headings
        "## Background",
        "## Costs of Compliance",
        "## Explanation of Certain Provisions for Alternative Methods of Compliance (AMOCs)",
        "## (a) Comments Due Date",  # the AD's own paragraphs, bold 8 pt
        "## (q) Related Information",
    ):
        assert heading in lines, heading
    # Only one title.
    assert sum(1 for line in lines if line.startswith("# ")) == 1


def test_federal_register_running_heads_and_margin_stamps_are_dropped() -> None:
    text = convert(FEDERAL).text
    assert "Federal Register / Vol. 85, No. 152 / Thursday, August 6, 2020" not in text
    assert "VerDate" not in text
    assert "jbell on DSKJLSW7X2PROD" not in text  # rotated stamp in the margin of every page
    assert "</GPH>" not in text
    assert not re.search(r"(?m)^477\d\d$", text)  # bare page numbers


def test_federal_register_pages_start_where_their_text_starts() -> None:
    result = convert(FEDERAL)
    text, starts = result.text, result.page_starts

    def page_of(phrase: str) -> int:
        pos = text.index(phrase)
        return max(i for i, s in enumerate(starts) if s <= pos) + 1

    assert page_of("Preliminary KNKT.18.10.35.04 Aircraft Accident") == 2  # a footnote
    assert page_of("## Costs of Compliance") == 5
    assert page_of("## (a) Comments Due Date") == 6
    assert page_of("Airworthiness Directives; Pilatus Aircraft Ltd. Airplanes") == 15
    for i in range(1, len(starts)):
        if starts[i] < len(text) and (i + 1 == len(starts) or starts[i + 1] > starts[i]):
            assert text[starts[i] - 2 : starts[i]] == "\n\n"  # pages are blank-line separated


def test_federal_register_figure_only_page_is_reported() -> None:
    # Page 8 holds only a picture of AFM text between the running head and foot.
    assert convert(FEDERAL).warnings == (
        "page 8 has no text layer (scanned image?) and OCR is off or Tesseract is not "
        "installed; it was not indexed",
    )


def test_federal_register_lines_are_stitched_and_dehyphenated() -> None:
    text = convert(FEDERAL).text
    body = "\n".join(line for line in _lines(text) if not line.startswith("|"))
    assert not re.search(r"\w-\n\w", body)
    assert not re.search(r"[a-z]\n[a-z]", body)  # wrapped lines joined into paragraphs
    # A dash ending a line inside a number joins without a space ("737–" / "9").
    assert "Boeing Company Model 737–8 and 737–9 (737 MAX) airplanes" in text
    assert "Docket No. FAA–2020–0686" in text
    # URLs and e-mail addresses split after "//" or "@".
    assert "https://www.regulations.gov" in text
    assert "9-FAA-SACO-AD-Inquiry@faa.gov" in text
    # Real hyphens split at a line end stay: the document writes "non-normal" elsewhere.
    assert "prompt the flightcrew to perform a non-normal procedure" in text
    assert "nonnormal" not in text
    assert "$7,650 (90 work-hours × $85 per work-hour)" in text
    # A paragraph broken by a column change continues ("reference a specific portion of
    # the" | "proposal, explain the reason …").
    assert "reference a specific portion of the proposal, explain the reason" in text


def test_federal_register_cost_table_rows_are_rebuilt() -> None:
    lines = set(_lines(convert(FEDERAL).text))
    assert (
        "| Action | Labor cost | Parts cost | Cost per product | Cost on U.S. operators |" in lines
    )
    assert "| AFM revisions | 1 work-hour × $85 per hour = $85 | $0 | $85 | $6,205. |" in lines
    assert (
        "| MDS installation and verification, INOP marker removal. "
        "| 1 work-hour × $85 per hour = $85 | $0 | $85 | $6,205. |"
    ) in lines


def test_nics_big_table_is_a_markdown_table() -> None:
    text = convert(NICS).text
    lines = _lines(text)
    assert lines[0] == "# NICS Firearm Background Checks November - 2015"  # title above table
    assert (
        "| Alabama | 18,870 | 23,022 | 22,650 | 859 | 1,178 | 0 | 14 | 15 | 0 | 2,179 | 2,307 "
        "| 11 | 0 | 0 | 0 |  |  | 13 | 14 | 0 | 3 | 2 | 0 | 71,137 |"
    ) in lines
    wyoming = next(line for line in lines if line.startswith("| Wyoming |"))
    assert wyoming.endswith("| 5,017 |")
    totals = next(line for line in lines if line.startswith("| Totals |"))
    assert totals.endswith("| 2,236,457 |")
    # One row per state or territory, all with the same number of cells as the header.
    header = next(line for line in lines if line.startswith("|"))
    cells = header.count(" | ")
    states = [line for line in lines if re.match(r"\| [A-Z][a-z]+(?: [A-Za-z]+)* \| \d", line)]
    assert len(states) >= 55
    assert all(line.count(" | ") == cells for line in states)
    # The table's words are not repeated as running text.
    assert text.count("Alabama") == 1
    # A note spanning the table stays one cell.
    assert any("| *Refers to frames, receivers and other firearms" in line for line in lines)


def test_senate_table_without_rules_gets_one_row_per_record() -> None:
    lines = set(_lines(convert(SENATE).text))
    assert (
        "| DOCUMENT NO. | DATE POSTED | PAYEE NAME | OBLIGATION/SERVICE DATES |  "
        "| DESCRIPTION | AMOUNT ($) |"
    ) in lines
    assert "|  |  | BAIN, J MATTHEW |  |  | DISTRICT DIRECTOR | 37,499.96 |" in lines
    assert (
        "| DHAW20190001 | 05/03/2019 | CITIBANK - TRAVEL CBA CARD | 03/04/2019 | 03/06/2019 "
        "| STAFF TRANSPORTATION AIRFARE FOR E JOHNSON KANSAS CITY TO WASHINGTON DC AND RETURN "
        "| 920.68 |"
    ) in lines


def test_word365_title_lists_and_table() -> None:
    text = convert(WORD365).text
    lines = _lines(text)
    assert lines[0] == "# Titre"
    assert "- Liste\n- Liste 2\n- Liste 3" in text
    assert "1. Liste numérotée\n2. Liste numérotée" in text
    assert (
        "| En-tête 1 | En-tête 2 | En-tête 3 |\n|---|---|---|\n"
        "| Ligne 1 | Alouette | Farfadet |\n| Linge 2 | Belette | Bibitte |"
    ) in text


def test_amt_handbook_italic_subheadings_and_two_columns() -> None:
    text = convert(AMT).text
    lines = set(_lines(text))
    for heading in (
        "## Boots Self-Locking Nut",
        "## Stainless Steel Self-Locking Nut",
        "## Elastic Stop Nut",
    ):
        assert heading in lines, heading
    # The paragraph that runs from the foot of column 1 into column 2 is one paragraph.
    assert "The wing type that is the most common ranges in size for No. 6 up to" in text
    assert "7-45" not in lines  # the page number


@pytest.mark.parametrize("name", [FEDERAL, NICS, SENATE, WORD365])
def test_tables_stay_whole_in_large_chunks(name: str) -> None:
    result = convert(name)
    tables = _table_blocks(result.text)
    assert tables
    chunks = chunk_text(result.text, doc_key=name, max_size=20_000)
    for start, end in tables:
        assert any(c.start <= start and end <= c.end for c in chunks), (start, end)


@pytest.mark.parametrize("name", [NICS, SENATE])
def test_table_chunks_hold_only_table_rows_at_default_size(name: str) -> None:
    # These tables are larger than the default chunk size, so they are cut between rows.
    result = convert(name)
    tables = _table_blocks(result.text)
    chunks = chunk_text(result.text, doc_key=name)
    table_chunks = [c for c in chunks if any(c.start < e and s < c.end for s, e in tables)]
    assert len(table_chunks) > 1
    for c in table_chunks:
        for line in c.text.split("\n"):
            # A heading sticks to what follows it, so it may lead the first table chunk.
            assert line.startswith(("|", "#")) or not line, line


@pytest.mark.parametrize("name", [FEDERAL, NICS, SENATE, WORD365])
def test_table_rows_are_never_cut_at_default_size(name: str) -> None:
    result = convert(name)
    chunks = chunk_text(result.text, doc_key=name)
    for m in re.finditer(r"(?m)^\|.*\|$", result.text):
        assert any(c.start <= m.start() and m.end() <= c.end for c in chunks), m.group(0)


def test_federal_register_converts_quickly() -> None:
    data = _doc_bytes(FEDERAL)
    started = time.perf_counter()
    convert_pdf(data)
    assert time.perf_counter() - started < 10  # ~0.6 s here; generous for slow CI machines


# --------------------------------------------------------------------------- built PDFs
def _pdf(*pages: list[tuple[str, float, str]] | None, top: float = 72.0, **save: object) -> bytes:
    """A PDF whose pages hold ``(text, size, font)`` lines; ``None`` draws only a rectangle."""
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


def _body(text: str) -> list[tuple[str, float, str]]:
    return [(text, 11, "helv")]


def test_headings_and_dehyphenation_in_a_built_pdf() -> None:
    data = _pdf(
        [
            ("Information Retrieval Basics", 20, "helv"),
            (
                "The retrieval of infor-\nmation is an old and well-\nknown problem; a self-\n"
                "locking nut is used here.",
                11,
                "helv",
            ),
            ("Method", 11, "hebo"),
            ("We index every page of the corpus and\nsearch it quickly.", 11, "helv"),
        ]
    )
    text = convert_pdf(data).text
    assert text.startswith("# Information Retrieval Basics\n\n")
    assert (
        "The retrieval of information is an old and well-known problem; a self-locking nut "
        "is used here." in text
    )
    assert "\n## Method\n\nWe index every page of the corpus and search it quickly." in text


def test_running_heads_and_page_numbers_are_dropped() -> None:
    topics = ["apples", "pears", "plums", "figs"]
    data = _pdf(*[_body(f"This page is about {t}.") for t in topics], top=200)
    doc = pymupdf.open(stream=data, filetype="pdf")
    for n, page in enumerate(doc, start=1):
        page.insert_text((72, 40), f"ACME Corp - Annual Report 2024 - {n}", fontsize=9)
        page.insert_text((300, page.rect.height - 30), str(n), fontsize=9)
    result = convert_pdf(doc.tobytes())
    assert result.text == "".join(f"This page is about {t}.\n\n" for t in topics)[:-1]
    for n, topic in enumerate(topics):
        assert result.text[result.page_starts[n] :].startswith(f"This page is about {topic}.")


def test_partly_scanned_pdf_converts_with_a_warning_naming_the_page() -> None:
    data = _pdf(_body("Alpha page one text."), None, _body("Gamma page three text."))
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
    data = _pdf(_body("Text."), None, None, None, _body("More."), None)
    (warning,) = convert_pdf(data).warnings
    assert warning == (
        "pages 2-4, 6 have no text layer (scanned images?) and OCR is off or Tesseract is not "
        "installed; they were not indexed"
    )


def test_blank_page_is_not_reported() -> None:
    doc = pymupdf.open(stream=_pdf(_body("Only page with text.")), filetype="pdf")
    doc.new_page()
    result = convert_pdf(doc.tobytes())
    assert result.warnings == ()
    assert len(result.page_starts) == 2


@pytest.mark.parametrize("pages", [1, 3])
def test_pdf_without_any_text_layer_is_refused(pages: int) -> None:
    with pytest.raises(ConversionError) as err:
        convert_pdf(_pdf(*([None] * pages)))
    message = str(err.value)
    _assert_one_line(message)
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


def test_password_protected_pdf_is_refused() -> None:
    data = _pdf(
        _body("Secret text."), encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o"
    )
    with pytest.raises(ConversionError) as err:
        convert_pdf(data)
    _assert_one_line(str(err.value))
    assert "password" in str(err.value)


def test_owner_password_only_pdf_still_converts() -> None:
    data = _pdf(_body("Readable text."), encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o")
    assert convert_pdf(data).text == "Readable text.\n"


def test_pages_past_the_limit_are_skipped_with_a_warning() -> None:
    data = _pdf(_body("One."), _body("Two."), _body("Three."))
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
    _assert_one_line(str(err.value))
    assert "not a PDF" in str(err.value)


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7\n", b"%PDF-1.4\n%garbage\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"],
    ids=["header-only", "no-pages"],
)
def test_damaged_pdf_is_refused_with_one_line(data: bytes) -> None:
    with pytest.raises(ConversionError) as err:
        convert_pdf(data)
    _assert_one_line(str(err.value))


@pytest.mark.parametrize("name", list(REAL))
def test_truncated_pdf_is_refused_or_partly_converted(name: str) -> None:
    data = _doc_bytes(name)
    started = time.perf_counter()
    try:
        result = convert_pdf(data[: len(data) // 2], name=name)
    except ConversionError as err:
        _assert_one_line(str(err))
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


def test_table_detection_failure_falls_back_to_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("table finder crashed")

    monkeypatch.setattr(pymupdf.Page, "find_tables", broken)
    result = convert_pdf(_doc_bytes(NICS), name=NICS)
    assert result.warnings == (
        "table detection failed on page 1; tables there are kept as plain text",
    )
    assert "Alabama" in result.text and "71,137" in result.text
    assert not any(line.startswith("|") for line in _lines(result.text))


def test_max_pages_must_be_positive() -> None:
    with pytest.raises(InvalidArgumentError):
        convert_pdf(_pdf(_body("Text.")), max_pages=0)
