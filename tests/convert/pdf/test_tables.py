"""Tables (``_tables.py``): ruled tables and records without rules become Markdown tables
that chunking keeps whole or cuts between rows; a failing table finder leaves plain text.
"""

from __future__ import annotations

import re

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.convert.pdf import convert_pdf
from support.pdf import FEDERAL, NICS, SENATE, WORD365, convert, doc_bytes, table_blocks, text_lines

pymupdf = pytest.importorskip("pymupdf")


def test_federal_register_cost_table_rows_are_rebuilt() -> None:
    lines = set(text_lines(convert(FEDERAL).text))
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
    lines = text_lines(text)
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
    lines = set(text_lines(convert(SENATE).text))
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


@pytest.mark.parametrize("name", [FEDERAL, NICS, SENATE, WORD365])
def test_tables_stay_whole_in_large_chunks(name: str) -> None:
    result = convert(name)
    tables = table_blocks(result.text)
    assert tables
    chunks = chunk_text(result.text, doc_key=name, max_size=20_000)
    for start, end in tables:
        assert any(c.start <= start and end <= c.end for c in chunks), (start, end)


@pytest.mark.parametrize("name", [NICS, SENATE])
def test_table_chunks_hold_only_table_rows_at_default_size(name: str) -> None:
    # These tables are larger than the default chunk size, so they are cut between rows.
    result = convert(name)
    tables = table_blocks(result.text)
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


def test_table_detection_failure_falls_back_to_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("table finder crashed")

    monkeypatch.setattr(pymupdf.Page, "find_tables", broken)
    result = convert_pdf(doc_bytes(NICS), name=NICS)
    assert result.warnings == (
        "table detection failed on page 1; tables there are kept as plain text",
    )
    assert "Alabama" in result.text and "71,137" in result.text
    assert not any(line.startswith("|") for line in text_lines(result.text))
