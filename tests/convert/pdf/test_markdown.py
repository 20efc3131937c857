"""Lines to Markdown (``_markdown.py``, with ``_repair.py``'s line joining): headings from
sizes and emphasis, stitched and dehyphenated paragraphs, lists, page offsets.
"""

from __future__ import annotations

import re

from guaipeca.convert.pdf import convert_pdf
from support.pdf import AMT, FEDERAL, WORD365, build_pdf, convert, text_lines


def test_federal_register_section_headings_are_markdown_headings() -> None:
    lines = set(text_lines(convert(FEDERAL).text))
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


def test_federal_register_lines_are_stitched_and_dehyphenated() -> None:
    text = convert(FEDERAL).text
    body = "\n".join(line for line in text_lines(text) if not line.startswith("|"))
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


def test_word365_title_lists_and_table() -> None:
    text = convert(WORD365).text
    lines = text_lines(text)
    assert lines[0] == "# Titre"
    assert "- Liste\n- Liste 2\n- Liste 3" in text
    assert "1. Liste numérotée\n2. Liste numérotée" in text
    assert (
        "| En-tête 1 | En-tête 2 | En-tête 3 |\n|---|---|---|\n"
        "| Ligne 1 | Alouette | Farfadet |\n| Linge 2 | Belette | Bibitte |"
    ) in text


def test_amt_handbook_italic_subheadings_and_two_columns() -> None:
    text = convert(AMT).text
    lines = set(text_lines(text))
    for heading in (
        "## Boots Self-Locking Nut",
        "## Stainless Steel Self-Locking Nut",
        "## Elastic Stop Nut",
    ):
        assert heading in lines, heading
    # The paragraph that runs from the foot of column 1 into column 2 is one paragraph.
    assert "The wing type that is the most common ranges in size for No. 6 up to" in text
    assert "7-45" not in lines  # the page number


def test_headings_and_dehyphenation_in_a_built_pdf() -> None:
    data = build_pdf(
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
