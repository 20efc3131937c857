"""Real DOCX, PPTX, XLSX and saved Wikipedia pages from ``tests/data/docs`` (see
tests/data/README.md): what each must give, and that the chunker accepts every result."""

from __future__ import annotations

import datetime as dt
import io
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.convert import Converted, FileLimits, convert_bytes, convert_file
from guaipeca.errors import ConversionError
from support import shared_data
from support.images import bomb_png, with_entry
from support.office import pptx_deck
from support.reliability import PeakRssGrowth

MAX_SIZE = 1500


@dataclass(frozen=True)
class Expect:
    format: str
    lines: tuple[str, ...]  # whole lines that must be present (headings, table rows)
    phrases: tuple[str, ...] = ()  # substrings that must be present
    absent: tuple[str, ...] = ()  # substrings that must not be present


EXPECTED: dict[str, Expect] = {
    "word_sample.docx": Expect(
        "docx",
        lines=(
            "# Swimming in the lake",  # Word "Title"
            "## Let’s swim!",  # Heading 1
            "### Let’s eat",  # Heading 2
            "* Enjoy summer warmth",
            "1. Wear sunglasses",
            "|  | Food | Calories per portion |",
            "| Berries | Blueberry, Strawberry, Cranberry | 150 |",
        ),
        phrases=("Summer activities", "Figure 1: This is a cute duckling"),
        # The picture (alt text "A cartoon duck ... automatically generated") is dropped.
        absent=("base64,", "![", "A cartoon duck"),
    ),
    "unit_test_headers.docx": Expect(
        "docx",
        lines=(
            "# Test Document",
            "## Section 1",
            "### Section 1.1",
            "### Section 1.2",
            "#### Section 1.2.3",
            "## Section 2",
            "#### Section 2.1.1",
            "### Section 2.1",
            "Paragraph 2.1.2",
        ),
    ),
    "word_tables.docx": Expect(
        "docx",
        lines=(
            "## Test with tables",
            "A uniform table",
            "| Header 0.0 | Header 0.1 | Header 0.2 |",
            "| Cell 1.0 | Cell 1.1 | Cell 1.2 |",
            "| Cell 1.0 | Merged Cell 1.1 1.2 | |",
            "| Header 0.0 | Header 0.1 | Header 0.2 | Header 0.3 |",
        ),
        phrases=("Merged Cell 3.1 4.1", "Cell 8.4"),
    ),
    "powerpoint_sample.pptx": Expect(
        "pptx",
        lines=(
            "# Test Table Slide",
            "## Second slide title",
            "| R1 | True | False |  | False | True | True |",
            "A rectangle shape with this text inside.",
            "### Notes:",
            "Final notes on the third slide.",
        ),
        phrases=("With footnote", "Maybe a list?"),
        absent=("<!-- Slide number",),
    ),
    "pptx_chart.pptx": Expect(
        "pptx",
        lines=(
            "# Quarterly Duck Survey",
            "## Quarterly revenue",
            "### Chart: Wild Duck Observations by Year",
            "| Category | Freshwater Ducks | Saltwater Ducks |",
            "| 2021 | 150.0 | 110.0 |",
        ),
    ),
    "xlsx_01.xlsx": Expect(
        "xlsx",
        lines=(
            "## Sheet1",
            "## Sheet2",
            "## Sheet3",
            "## Sheet4",
            "| first | second | third |",
            "| 6 | 0 | -6 |",
            "| col-1 | col-2 | col-3 | col-4 |",
            "| col-1 | col-2 | col-3 |",  # the table beside the first one on Sheet2
            "| header |",
        ),
    ),
    "pira_T_total.xlsx": Expect(
        "xlsx",
        lines=("## Pirá-T-Total",),
        phrases=(
            "| id_qa | corpus | question_en_origin | question_pt_origin |",
            "O que sugere os fenocristais de clinopiroxênio da Unidade Pico das Gaivotas?",
            "Quando o Leito de Ibaté se formou?",
            "When was the Bed of Ibaté formed?",
        ),
    ),
    "wikipedia_duck.html": Expect(
        "html",
        lines=(
            "# Duck",
            "## Etymology",
            "## Taxonomy",
            "### Feeding",
            "## Relationship with humans",
            "| Kingdom: | Animalia |",
        ),
        phrases=(
            "is the common name for numerous species of waterfowl in the family Anatidae",
            "The word *duck* comes from Old English",
        ),
        absent=(
            "<script",
            "Jump to content",
            "Main menu",
            "Create account",
            "136 languages",
            "[edit]",
            "](/wiki/",
            "This page was last edited",
            "Toggle the table of contents",
        ),
    ),
    "wikipedia_mozilla.html": Expect(
        "html",
        lines=(
            "# Mozilla",
            "## History",
            "### Firefox",
            "#### SpiderMonkey",
            "## See also",
            "| Industry | Open-source software |",
        ),
        phrases=("is a free-software community, created in 1998 by members of Netscape",),
        absent=(
            "<script",
            "Jump to:",
            "From Wikipedia, the free encyclopedia",
            "[edit]",
            "](/wiki/",
            "Personal tools",
        ),
    ),
}


def _docs_dir() -> Path:
    return shared_data("docs")


def _doc(name: str) -> Path:
    return shared_data("docs", name)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Conversion must work offline: any attempt to open a connection fails the test."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("conversion tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)


_cache: dict[str, Converted] = {}


def _converted(name: str) -> Converted:
    if name not in _cache:
        _cache[name] = convert_file(_doc(name))
    return _cache[name]


def test_every_office_and_html_document_in_the_folder_is_covered() -> None:
    found = {
        p.name
        for p in _docs_dir().iterdir()
        if p.suffix.lower() in (".docx", ".pptx", ".xlsx", ".html", ".htm")
    }
    assert found == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_document_converts_with_its_content(name: str) -> None:
    expect = EXPECTED[name]
    result = _converted(name)
    assert result.format == expect.format
    assert result.warnings == ()
    text = result.text
    assert "\r" not in text and text.endswith("\n") and not text.endswith("\n\n")
    assert "\n\n\n" not in text
    lines = set(text.split("\n"))
    for line in expect.lines:
        assert line in lines, f"missing line {line!r}"
    for phrase in expect.phrases:
        assert phrase in text, f"missing {phrase!r}"
    for junk in expect.absent:
        assert junk not in text, f"unexpected {junk!r}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_headings_are_atx_and_never_empty(name: str) -> None:
    text = _converted(name).text
    lines = text.split("\n")
    headings = [ln for ln in lines if re.match(r"#{1,6} ", ln)]
    assert headings, "no heading at all"
    assert not [ln for ln in lines if re.fullmatch(r"#{1,6}\s*", ln)]
    # No setext headings: an underline of = or - right below a text line.
    for above, line in pairwise(lines):
        if re.fullmatch(r" {0,3}(=+|-+)\s*", line):
            assert not above.strip(), f"setext heading {above!r}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_conversion_is_deterministic(name: str) -> None:
    path = _doc(name)
    first = convert_bytes(path.read_bytes(), path.suffix, name=name)
    assert first == _converted(name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_chunks_honour_the_contract(name: str) -> None:
    result = _converted(name)
    text = result.text
    chunks = chunk_text(text, doc_key=name, max_size=MAX_SIZE, page_starts=result.page_starts)
    assert chunks
    previous_end = 0
    for position, c in enumerate(chunks):
        assert text[c.start : c.end] == c.text
        assert 0 < len(c.text) <= MAX_SIZE
        assert c.position == position
        assert not text[previous_end : c.start].strip()  # only whitespace is skipped
        previous_end = c.end
    assert not text[previous_end:].strip()


def test_docx_heading_path_is_title_then_section() -> None:
    result = _converted("unit_test_headers.docx")
    chunks = chunk_text(result.text, doc_key="u", max_size=MAX_SIZE)
    paths = {c.heading_path for c in chunks if "Paragraph 2.1.2" in c.text}
    assert paths == {("Test Document", "Section 2")}


def test_docx_tables_arrive_as_markdown_tables() -> None:
    text = _converted("word_tables.docx").text
    separators = [ln for ln in text.split("\n") if re.fullmatch(r"\|( --- \|)+", ln)]
    assert len(separators) == 7
    table = (
        "| Header 0.0 | Header 0.1 | Header 0.2 |\n"
        "| --- | --- | --- |\n"
        "| Cell 1.0 | Cell 1.1 | Cell 1.2 |\n"
        "| Cell 2.0 | Cell 2.1 | Cell 2.2 |\n"
    )
    assert "A uniform table\n\n" + table + "\nA non-uniform table" in text
    # A table that fits stays in one chunk.
    chunks = chunk_text(text, doc_key="t", max_size=MAX_SIZE)
    assert any(table.strip() in c.text for c in chunks)


def test_pptx_has_one_page_per_slide() -> None:
    result = _converted("powerpoint_sample.pptx")
    text, starts = result.text, result.page_starts
    assert starts is not None and len(starts) == 3 and starts[0] == 0
    assert text[starts[1] :].startswith("## Second slide title\n")
    assert text[starts[2] :].startswith("List item4\n")
    chunks = chunk_text(text, doc_key="p", max_size=MAX_SIZE, page_starts=starts)
    notes = [c for c in chunks if "Final notes on the third slide." in c.text]
    assert notes and notes[0].page_end == 3
    second = [c for c in chunks if c.text.startswith("## Second slide title")]
    assert second and second[0].page_start == 2
    assert second[0].heading_path == ("Test Table Slide", "Second slide title")


def test_xlsx_sheet_is_one_table_with_every_row() -> None:
    text = _converted("pira_T_total.xlsx").text
    lines = text.split("\n")
    rows = [ln for ln in lines if ln.startswith("| ")]
    assert len(rows) == 2069 + 1  # header + one row per question
    assert all(ln.count(" | ") >= 17 for ln in rows[:50])  # 18 columns
    # Cells with line breaks stay on one table row.
    assert "| A846 | 1 | How many blocks were offered in the second bid" in text


def test_wikipedia_page_is_mostly_article() -> None:
    path = _doc("wikipedia_duck.html")
    text = _converted("wikipedia_duck.html").text
    assert len(text) < path.stat().st_size // 5
    assert text.startswith("# Duck\n")


# -- synthetic workbooks and decks: values, layout, limits ---------------------------------


def _xlsx(build: Callable[[Any], None]) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    build(wb)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def test_xlsx_values_are_rendered_as_one_line_cells() -> None:
    def build(wb: Any) -> None:
        ws = wb.active
        ws.title = "Values"
        ws.append(["name", "value"])
        ws.append(["int", 42])
        ws.append(["float", 0.1 + 0.2])
        ws.append(["whole float", 3.0])
        ws.append(["bool", True])
        ws.append(["date", dt.datetime(2024, 5, 17)])
        ws.append(["datetime", dt.datetime(2024, 5, 17, 8, 30)])
        ws.append(["multi\nline", "a | b"])
        ws.append(["formula, never calculated", "=1+1"])

    text = convert_bytes(_xlsx(build), ".xlsx").text
    assert text == (
        "## Values\n\n"
        "| name | value |\n|---|---|\n"
        "| int | 42 |\n"
        "| float | 0.3 |\n"
        "| whole float | 3 |\n"
        "| bool | TRUE |\n"
        "| date | 2024-05-17 |\n"
        "| datetime | 2024-05-17 08:30:00 |\n"
        "| multi line | a \\| b |\n"
        "| formula, never calculated |  |\n"
    )


def test_xlsx_blank_rows_and_columns_separate_tables_and_empty_sheets_vanish() -> None:
    def build(wb: Any) -> None:
        ws = wb.active
        ws.title = "Two"
        ws["A1"], ws["B1"], ws["A2"], ws["B2"] = "k", "v", "a", 1
        ws["E1"], ws["E2"] = "side", "x"  # beside, after empty columns C and D
        ws["B5"], ws["B6"] = "below", "y"  # after an empty row
        wb.create_sheet("Empty")

    text = convert_bytes(_xlsx(build), ".xlsx").text
    assert text == (
        "## Two\n\n"
        "| k | v |\n|---|---|\n| a | 1 |\n\n"
        "| side |\n|---|\n| x |\n\n"
        "| below |\n|---|\n| y |\n"
    )


def test_xlsx_with_only_empty_sheets_is_refused() -> None:
    with pytest.raises(ConversionError, match=r"^no text found in the XLSX"):
        convert_bytes(_xlsx(lambda wb: None), ".xlsx")


def test_xlsx_row_cap_cuts_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from guaipeca.convert import office

    monkeypatch.setattr(office, "XLSX_MAX_ROWS", 3)

    def build(wb: Any) -> None:
        ws = wb.active
        ws.title = "Big"
        for i in range(10):
            ws.append([f"row {i}"])
        wb.create_sheet("Later").append(["never read"])

    result = convert_bytes(_xlsx(build), ".xlsx")
    assert result.text == "## Big\n\n| row 0 |\n|---|\n| row 1 |\n| row 2 |\n"
    assert result.warnings == (
        "sheet 'Big' cut at row 4: the workbook has more than 3 non-empty rows",
    )


def test_xlsx_cell_limit_is_a_setting_named_in_the_warning() -> None:
    def build(wb: Any) -> None:
        ws = wb.active
        ws.title = "Wide"
        for i in range(10):
            ws.append([f"r{i}c{j}" for j in range(4)])

    result = convert_bytes(_xlsx(build), ".xlsx", limits=FileLimits(max_cells=20))
    rows = [line for line in result.text.splitlines() if line.startswith("| r")]
    assert len(rows) == 5  # five rows of four cells read, the sixth cut
    assert result.warnings == (
        "sheet 'Wide' cut at row 6: the workbook has more than 20 cells, the limit "
        "limits.max_cells",
    )
    assert "r9c0" in convert_bytes(_xlsx(build), ".xlsx").text


def test_character_limit_cuts_at_a_line_end_with_a_warning() -> None:
    text = "".join(f"line {i:03d}\n" for i in range(300))
    result = convert_bytes(text.encode(), ".md", limits=FileLimits(max_chars=1000))
    assert result.text == text[:999]  # 111 whole lines of 9 characters
    assert result.warnings == (
        "cut at 999 of 2,700 characters: the limit is limits.max_chars (1,000)",
    )


def test_zip_entries_over_the_configured_limit_are_refused_naming_the_setting() -> None:
    deck = pptx_deck(60)  # 38 parts of a one-slide deck + 2 per further slide: 156 entries
    message = "PPTX has 156 zip entries; the limit is limits.max_zip_entries (100) (zip bomb?)"
    with pytest.raises(ConversionError, match=re.escape(message)):
        convert_bytes(deck, ".pptx", limits=FileLimits(max_zip_entries=100))
    result = convert_bytes(deck, ".pptx")
    assert result.page_starts is not None and len(result.page_starts) == 60
    assert result.text.startswith("# Slide 1\n\n## Slide 2\n") and "## Slide 60" in result.text


@pytest.mark.slow
def test_a_5000_slide_deck_is_read_under_the_default_limit() -> None:
    deck = pptx_deck(5000)  # 10,036 entries: refused when the limit was a fixed 10,000
    result = convert_bytes(deck, ".pptx")
    assert result.page_starts is not None and len(result.page_starts) == 5000
    assert result.text.rstrip().endswith("## Slide 5000")


def test_pptx_pages_cover_empty_slides_and_multi_line_titles() -> None:
    from pptx import Presentation

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Deck title"
    first.placeholders[1].text = "Opening words"
    deck.slides.add_slide(deck.slide_layouts[6])  # blank layout: no text at all
    third = deck.slides.add_slide(deck.slide_layouts[1])
    third.shapes.title.text_frame.text = "Two\vlines"  # a line break inside the title
    third.placeholders[1].text = "Closing words"
    buf = io.BytesIO()
    deck.save(buf)

    result = convert_bytes(buf.getvalue(), ".pptx")
    assert result.text == "# Deck title\nOpening words\n\n## Two lines\nClosing words\n"
    assert result.page_starts == (0, 28, 28)


def _pptx_with_picture() -> bytes:
    """A one-slide PPTX with a title and a small picture, ppt/media/image1.png."""
    from PIL import Image
    from pptx import Presentation
    from pptx.util import Inches

    png = io.BytesIO()
    Image.new("L", (20, 20), 0).save(png, "PNG")
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "A slide over a bomb"
    slide.shapes.add_picture(io.BytesIO(png.getvalue()), Inches(1), Inches(1))
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@pytest.mark.parametrize("ext", [".docx", ".pptx"])
def test_an_embedded_image_bomb_is_never_decoded(ext: str) -> None:
    """A DOCX's or PPTX's pictures are dropped from the text unread (never decoded, never
    OCRed), so an embedded 46,300 x 46,300 PNG (2.1 GB decoded) costs its 2 MB of bytes."""
    if ext == ".docx":
        office = with_entry(
            _doc("word_sample.docx").read_bytes(), "word/media/image1.png", bomb_png()
        )
        expected = "# Swimming in the lake"
    else:
        office = with_entry(_pptx_with_picture(), "ppt/media/image1.png", bomb_png())
        expected = "# A slide over a bomb"
    with PeakRssGrowth() as peak:
        result = convert_bytes(office, ext)
    assert expected in result.text
    assert peak.growth < 100 * 2**20
