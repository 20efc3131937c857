"""embedding_input: what a chunk is embedded as (SPEC §3.3, §3.5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.embed import embedding_input
from guaipeca.errors import InvalidArgumentError


def test_heading_line_and_short_text() -> None:
    got = embedding_input("Body text.", ["Guide", "Install"])
    assert got == "Guide > Install\nBody text."


def test_no_heading_line_without_headings() -> None:
    assert embedding_input("Body.", []) == "Body."
    assert embedding_input("Body.", ["", "  "]) == "Body."


def test_own_heading_is_not_repeated() -> None:
    # The section's first chunk opens with its heading: only the parents go on the line.
    got = embedding_input("## Install\n\nRun it.", ["Guide", "Install"])
    assert got == "Guide\n## Install\n\nRun it."
    assert embedding_input("# Guide\n\nHello.", ["Guide"]) == "# Guide\n\nHello."
    # A heading that differs (or a later chunk of the section) keeps the full path.
    assert embedding_input("## Other\n\nx", ["Guide", "Install"]).startswith("Guide > Install\n")
    assert embedding_input("Install the tool.", ["Guide", "Install"]).startswith(
        "Guide > Install\n"
    )


def test_truncates_at_word_boundary() -> None:
    text = "alpha beta gamma delta"
    # 12 chars = "alpha beta g": the space at 10 lies in the last 20% window (>= 9.6).
    assert embedding_input(text, [], max_chars=12) == "alpha beta"
    # A cut that already ends a word keeps it all.
    assert embedding_input(text, [], max_chars=10) == "alpha beta"


def test_truncates_mid_word_when_no_boundary_is_near() -> None:
    text = "a" * 30 + " tail"
    assert embedding_input(text, [], max_chars=20) == "a" * 20


def test_default_budget_is_500() -> None:
    text = "x" * 2000
    assert embedding_input(text, ["T"]) == "T\n" + "x" * 500


def test_context_goes_before_the_text() -> None:
    got = embedding_input("Body.", ["Doc"], context="previous paragraph")
    assert got == "Doc\nprevious paragraph\nBody."


def test_without_preprocess_text_is_whole() -> None:
    text = "word " * 300
    got = embedding_input(text, ["Doc", "Sec"], preprocess=False, context="ctx")
    assert got == "Doc > Sec\nctx\n" + text


def test_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError):
        embedding_input("t", "Heading")
    with pytest.raises(InvalidArgumentError):
        embedding_input("t", [], max_chars=0)


@given(st.text(), st.integers(min_value=1, max_value=200))
def test_body_is_a_bounded_prefix(text: str, max_chars: int) -> None:
    body = embedding_input(text, [], max_chars=max_chars)
    assert len(body) <= max_chars
    assert text.startswith(body)
    if len(text) <= max_chars:
        assert body == text
    else:
        # At most the last 20% of the budget is given up to end on a word boundary.
        assert len(body) >= len(text[: int(max_chars * 0.8)].rstrip())


def test_a_table_chunk_is_embedded_with_its_header_row_when_it_lacks_it() -> None:
    header = "| id | name |"
    rows = "| 7 | Mallard |\n| 8 | Teal |"
    assert embedding_input(rows, ["Sheet"], table_header=header) == f"Sheet\n{header}\n{rows}"
    whole = f"{header}\n|---|---|\n{rows}"
    assert embedding_input(whole, ["Sheet"], table_header=header) == f"Sheet\n{whole}"
    assert embedding_input(rows, [], table_header=None) == rows
