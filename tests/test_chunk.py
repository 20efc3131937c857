"""Tests for the structure-aware, lossless chunker (SPEC §3)."""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.chunk import canonicalize, chunk_text, headings
from guaipeca.types import ChunkSpan

PROPERTY = settings(max_examples=200, deadline=None)


def assert_contract(text: str, spans: list[ChunkSpan], max_size: int) -> None:
    """The chunk contract of SPEC §3.2, checked in full."""
    prev_end = 0
    for i, s in enumerate(spans):
        assert s.position == i
        assert text[s.start : s.end] == s.text
        assert prev_end <= s.start < s.end
        gap = text[prev_end : s.start]
        assert gap == "" or gap.isspace(), f"non-whitespace dropped before span {i}: {gap!r}"
        assert len(s.text) <= max_size
        assert not s.text.isspace()
        assert not s.text[0].isspace() and not s.text[-1].isspace()
        prev_end = s.end
    tail = text[prev_end:]
    assert tail == "" or tail.isspace(), f"non-whitespace dropped at the end: {tail!r}"
    if not text.strip():
        assert spans == []


# --- generators -------------------------------------------------------------------------

words = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
    min_size=1,
    max_size=40,
)
line = st.lists(words, min_size=1, max_size=12).map(" ".join)
heading = st.tuples(st.integers(1, 7), line, st.sampled_from(["", " ##", "#"])).map(
    lambda t: "#" * t[0] + " " + t[1] + t[2]
)
paragraph = st.lists(line, min_size=1, max_size=6).map("\n".join)
list_block = st.lists(
    st.tuples(st.sampled_from(["- ", "* ", "1. ", "  - ", "10) "]), line, st.booleans()),
    min_size=1,
    max_size=8,
).map(lambda items: "\n".join(m + t + ("\n   more text" if c else "") for m, t, c in items))
table = st.lists(line, min_size=1, max_size=15).map(
    lambda rows: "\n".join("| " + r.replace("|", "/") + " |" for r in rows)
)
# A line inside a fence that is no fence itself (a generated "~~~" would close the block).
code_line = line.filter(lambda x: not x.lstrip(" \t").startswith(("```", "~~~")))
code = st.tuples(
    st.sampled_from(["```", "~~~", "````", "```python"]),
    st.lists(st.one_of(code_line, st.just("# not a heading"), st.just("")), max_size=10),
    st.booleans(),
).map(lambda t: "\n".join([t[0], *t[1]] + ([t[0].rstrip("python")] if t[2] else [])))
closed_code = st.tuples(
    st.sampled_from(["```", "~~~", "````", "```python"]),
    st.lists(st.one_of(code_line, st.just("# not a heading"), st.just("")), max_size=10),
).map(lambda t: "\n".join([t[0], *t[1], t[0].rstrip("python")]))
# An indented code block (four spaces or a tab): its "# comment" lines are no headings either.
indented_code = st.lists(
    st.tuples(
        st.sampled_from(["    ", "\t", "      "]), st.one_of(line, st.just("# not a heading"))
    ),
    min_size=1,
    max_size=6,
).map(lambda rows: "\n".join(i + r for i, r in rows))
long_line = st.integers(1, 5000).map(lambda n: "x" * n)
block = st.one_of(heading, paragraph, list_block, table, code, indented_code, long_line, words)
separator = st.sampled_from(["\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\n \n", "\n\n\n"])
markdown = st.lists(st.tuples(block, separator), max_size=25).map(
    lambda parts: "".join(b + s for b, s in parts)
)
# Documents whose only fences are the closed code blocks' own (a generated "~~~" paragraph, or
# a block left open, would pair with the next fence), so every "# not a heading" line is code.
fenced_markdown = st.lists(
    st.tuples(
        st.one_of(
            heading,
            st.lists(code_line, min_size=1, max_size=6).map("\n".join),
            list_block,
            table,
            closed_code,
            indented_code,
        ),
        separator,
    ),
    max_size=25,
).map(lambda parts: "".join(b + s for b, s in parts))
any_text = st.lists(
    st.one_of(
        st.characters(blacklist_categories=["Cs"]),
        st.sampled_from(["\r\n", "\r", "\n", " ", "# ", "## ", "|", "```", "- ", ". ", "\xa0"]),
        words,
    ),
    max_size=400,
).map("".join)
sizes = st.integers(1, 3000)

# Without fences a regex finds every heading, so heading rules can be checked exactly.
plain_words = st.text(alphabet="abcXYZ019.!?,#|-*:é中", min_size=1, max_size=20)
plain_line = st.lists(plain_words, min_size=1, max_size=10).map(" ".join)
plain_heading = st.tuples(st.integers(1, 4), plain_line).map(lambda t: "#" * t[0] + " " + t[1])
plain_block = st.one_of(
    plain_heading,
    st.lists(plain_line, min_size=1, max_size=5).map("\n".join),
    st.lists(plain_line, min_size=1, max_size=5).map(lambda r: "\n".join("- " + x for x in r)),
    st.lists(plain_line, min_size=1, max_size=8).map(lambda r: "\n".join("| " + x for x in r)),
)
plain_markdown = st.lists(st.tuples(plain_block, separator), max_size=25).map(
    lambda parts: "".join(b + s for b, s in parts)
)
HEADING_LINE = re.compile(r"(?m)^ {0,3}(#{1,6})(?:[ \t][^\n]*)?$")


# --- property tests ----------------------------------------------------------------------


@PROPERTY
@given(any_text, sizes)
def test_contract_holds_for_arbitrary_text(raw: str, max_size: int) -> None:
    text = canonicalize(raw)
    assert_contract(text, chunk_text(text, doc_key="k", max_size=max_size), max_size)


@PROPERTY
@given(markdown, sizes)
def test_contract_holds_for_markdown_documents(raw: str, max_size: int) -> None:
    text = canonicalize(raw)
    assert_contract(text, chunk_text(text, doc_key="k", max_size=max_size), max_size)


@PROPERTY
@given(markdown, st.integers(1, 200))
def test_contract_holds_for_markdown_at_small_sizes(raw: str, max_size: int) -> None:
    text = canonicalize(raw)
    assert_contract(text, chunk_text(text, doc_key="k", max_size=max_size), max_size)


@PROPERTY
@given(any_text)
def test_canonicalize_leaves_no_cr_and_is_idempotent(raw: str) -> None:
    once = canonicalize(raw)
    assert "\r" not in once
    assert canonicalize(once) == once
    assert once.count("\n") == raw.count("\n") + raw.count("\r") - raw.count("\r\n")


@PROPERTY
@given(markdown, sizes)
def test_crlf_and_lf_inputs_chunk_identically(raw: str, max_size: int) -> None:
    lf = canonicalize(raw)
    crlf = lf.replace("\n", "\r\n")
    cr = lf.replace("\n", "\r")
    expected = chunk_text(lf, doc_key="k", max_size=max_size)
    assert chunk_text(canonicalize(crlf), doc_key="k", max_size=max_size) == expected
    assert chunk_text(canonicalize(cr), doc_key="k", max_size=max_size) == expected


@PROPERTY
@given(markdown, sizes)
def test_chunking_is_deterministic(raw: str, max_size: int) -> None:
    text = canonicalize(raw)
    assert chunk_text(text, doc_key="k", max_size=max_size) == chunk_text(
        text, doc_key="k", max_size=max_size
    )


@PROPERTY
@given(st.lists(line.map(lambda r: "| " + r.replace("|", "/") + " |"), min_size=1, max_size=40))
def test_table_rows_are_never_split_when_each_row_fits(rows: list[str]) -> None:
    text = "\n".join(rows)
    max_size = max(len(r) for r in rows)
    spans = chunk_text(text, doc_key="k", max_size=max_size)
    assert_contract(text, spans, max_size)
    for s in spans:
        assert s.start == 0 or text[s.start - 1] == "\n"
        assert s.end == len(text) or text[s.end] == "\n"


@PROPERTY
@given(markdown, sizes, st.lists(st.integers(0, 4000), max_size=10))
def test_page_numbers_follow_page_starts(raw: str, max_size: int, cuts: list[int]) -> None:
    text = canonicalize(raw)
    page_starts = [0, *sorted(cuts)]
    for s in chunk_text(text, doc_key="k", max_size=max_size, page_starts=page_starts):
        assert s.page_start == bisect_right(page_starts, s.start)
        assert s.page_end == bisect_right(page_starts, s.end - 1)
        assert s.page_start is not None and s.page_end is not None
        assert 1 <= s.page_start <= s.page_end


@PROPERTY
@given(plain_markdown, sizes)
def test_headings_start_chunks_and_sections(raw: str, max_size: int) -> None:
    text = canonicalize(raw)
    spans = chunk_text(text, doc_key="k", max_size=max_size)
    assert_contract(text, spans, max_size)
    heads = {m.start(1): len(m.group(1)) for m in HEADING_LINE.finditer(text)}
    by_start = {s.start: s for s in spans}
    assert set(heads) <= set(by_start), "every heading starts a chunk"
    for prev, cur in pairwise(spans):
        if heads.get(cur.start, 9) <= 2:
            assert cur.section_id != prev.section_id
        else:
            assert (cur.section_id, cur.heading_path) == (prev.section_id, prev.heading_path)
    for i, s in enumerate(spans):
        if s.start in heads and "\n" not in s.text and i + 1 < len(spans):
            nxt = spans[i + 1].start
            # A lone heading chunk only when its section is empty or nothing more could fit.
            assert nxt in heads or nxt - s.start >= max_size


# --- explicit examples -------------------------------------------------------------------


@PROPERTY
@given(fenced_markdown, sizes)
def test_no_heading_is_read_inside_code_and_every_heading_starts_a_chunk(
    raw: str, max_size: int
) -> None:
    text = canonicalize(raw)
    found = headings(text)
    assert all("not a heading" not in title for _, _, title in found)
    spans = chunk_text(text, doc_key="k", max_size=max_size)
    assert all("not a heading" not in h for s in spans for h in s.heading_trail)
    starts = {s.start for s in spans}
    assert all(text[offset] == "#" and offset in starts for offset, _, _ in found)


def test_headings_are_offset_level_and_title_outside_code() -> None:
    text = (
        "# Title\n\nText::\n\n    # Doesn't hit the database\n    b = e.blog\n\n"
        "  ## Section ##\n\n```\n# comment\n```\n\n\t# tab-indented code\n\n### \n"
    )
    assert headings(text) == [(0, 1, "Title"), (text.index("## Section"), 2, "Section")]


@pytest.mark.parametrize("with_spaces", [False, True])
def test_single_24000_char_line_is_cut_within_max_size(with_spaces: bool) -> None:
    text = ("word " * 4800).strip() if with_spaces else "x" * 24000
    spans = chunk_text(text, doc_key="k", max_size=1000)
    assert_contract(text, spans, 1000)
    if with_spaces:  # cut at whitespace: no word is broken
        assert all(len(w) == 4 for s in spans for w in s.text.split(" "))
    else:
        assert [len(s.text) for s in spans] == [1000] * 24


def test_crlf_and_lf_documents_give_identical_spans() -> None:
    lf = "# T\n\nPara one.\nline two.\n\n## S\n\n- a\n- b\n\n| x |\n| y |\n"
    crlf = lf.replace("\n", "\r\n")
    spans = chunk_text(canonicalize(crlf), doc_key="k", max_size=20)
    assert spans == chunk_text(canonicalize(lf), doc_key="k", max_size=20)
    assert all(canonicalize(crlf)[s.start : s.end] == s.text for s in spans)


def test_canonicalize_maps_crlf_and_lone_cr_to_lf_only() -> None:
    assert canonicalize("a\r\nb\rc\n\r\r\nd\t ") == "a\nb\nc\n\n\nd\t "


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\n \u3000\xa0"])
def test_empty_or_whitespace_document_gives_no_chunks(text: str) -> None:
    assert chunk_text(text, doc_key="k") == []


def test_non_canonical_text_is_rejected() -> None:
    with pytest.raises(ValueError):
        chunk_text("a\r\nb", doc_key="k")


@pytest.mark.parametrize("max_size", [0, -5])
def test_max_size_below_one_is_rejected(max_size: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", doc_key="k", max_size=max_size)


def test_unsorted_page_starts_are_rejected() -> None:
    with pytest.raises(ValueError):
        chunk_text("text", doc_key="k", page_starts=[0, 10, 5])


def _table(rows: int) -> str:
    head = "| id | name | value |\n|----|------|-------|\n"
    return head + "\n".join(f"| {i} | item number {i} | {i * 7} |" for i in range(rows))


def test_small_table_stays_in_one_chunk_with_surrounding_text() -> None:
    text = "Before the table.\n\n" + _table(10) + "\n\nAfter the table."
    spans = chunk_text(text, doc_key="k", max_size=len(_table(10)) + 5)
    assert_contract(text, spans, len(_table(10)) + 5)
    assert _table(10) in [s.text for s in spans]


def test_large_table_splits_only_between_rows() -> None:
    text = _table(200)
    spans = chunk_text(text, doc_key="k", max_size=500)
    assert_contract(text, spans, 500)
    assert len(spans) > 1
    for s in spans:
        assert all(row.startswith("|") and row.endswith("|") for row in s.text.split("\n"))


def test_heading_in_fenced_code_is_not_a_split_point() -> None:
    code = "```python\nx = 1\n# not a heading\ny = 2\n```"
    text = "## Code\n\nIntro.\n\n" + code + "\n\n~~~\n## also not\n~~~\n"
    spans = chunk_text(text, doc_key="k", max_size=1000)
    assert len(spans) == 1
    assert spans[0].heading_path == ("Code",)
    small = chunk_text(text, doc_key="k", max_size=len(code))
    assert code in [s.text for s in small]
    assert {s.section_id for s in small} == {spans[0].section_id}


def test_large_code_block_splits_at_line_boundaries() -> None:
    text = "```\n" + "\n".join(f"line_{i} = {i}" for i in range(300)) + "\n```"
    spans = chunk_text(text, doc_key="k", max_size=200)
    assert_contract(text, spans, 200)
    for s in spans:
        assert s.start == 0 or text[s.start - 1] == "\n"
        assert s.end == len(text) or text[s.end] == "\n"


def test_small_list_is_kept_whole() -> None:
    items = "- one\n- two\n  still two\n- three"
    text = "Para before, long enough to matter.\n\n" + items + "\n\nPara after."
    spans = chunk_text(text, doc_key="k", max_size=len(items) + 3)
    assert items in [s.text for s in spans]


def test_paragraphs_are_packed_then_cut_at_sentences() -> None:
    sentence = "This is a sentence of moderate length. "
    text = (sentence * 40).strip()
    spans = chunk_text(text, doc_key="k", max_size=300)
    assert_contract(text, spans, 300)
    assert all(s.text.endswith(".") for s in spans)
    packed = chunk_text("One.\n\nTwo.\n\nThree.", doc_key="k", max_size=100)
    assert [s.text for s in packed] == ["One.\n\nTwo.\n\nThree."]


def test_heading_sticks_to_the_following_block() -> None:
    text = "## Section\n\n" + "A paragraph that is long. " * 10
    spans = chunk_text(text.strip(), doc_key="k", max_size=100)
    assert spans[0].text.startswith("## Section\n\nA paragraph")
    assert all(s.text != "## Section" for s in spans)


def test_title_and_two_sections_get_heading_paths_and_section_ids() -> None:
    text = "# My Doc\n\nIntro.\n\n## First ##\n\nOne.\n\n## Second\n\nTwo.\n"
    spans = chunk_text(text, doc_key="doc-1", max_size=1500)
    assert [s.text for s in spans] == [
        "# My Doc\n\nIntro.",
        "## First ##\n\nOne.",
        "## Second\n\nTwo.",
    ]
    assert [s.heading_path for s in spans] == [
        ("My Doc",),
        ("My Doc", "First"),
        ("My Doc", "Second"),
    ]

    def sid(path: tuple[str, ...], ordinal: int) -> str:
        raw = "doc-1\x00" + "\x1f".join(path) + "\x00" + str(ordinal)
        return "s:" + hashlib.sha1(raw.encode()).hexdigest()[:16]

    assert [s.section_id for s in spans] == [
        sid(("My Doc",), 1),
        sid(("My Doc", "First"), 2),
        sid(("My Doc", "Second"), 3),
    ]


def test_deeper_heading_starts_chunk_but_keeps_section() -> None:
    text = "# T\n\n## Sec\n\nText.\n\n### Sub\n\nMore.\n\n#### Deeper\n\nEven more."
    spans = chunk_text(text, doc_key="k")
    assert [s.text for s in spans][1:] == [
        "## Sec\n\nText.",
        "### Sub\n\nMore.",
        "#### Deeper\n\nEven more.",
    ]
    assert {s.section_id for s in spans[1:]} == {spans[1].section_id}
    assert all(s.heading_path == ("T", "Sec") for s in spans[1:])
    assert spans[0].section_id != spans[1].section_id


def test_chunks_before_any_heading_and_docs_without_title() -> None:
    spans = chunk_text("Preamble.\n\n## Only\n\nBody.", doc_key="k")
    assert [s.heading_path for s in spans] == [(), ("Only",)]
    assert spans[0].section_id != spans[1].section_id
    assert all(s.section_id.startswith("s:") for s in spans)


def test_document_without_headings_gets_unstructured_section_id() -> None:
    text = ("Plain paragraph text without any heading. " * 30 + "\n\n") * 3
    spans = chunk_text(text, doc_key="plain", max_size=400)
    assert len(spans) > 1
    expected = "unstructured:" + hashlib.sha1(b"plain").hexdigest()[:16]
    assert {s.section_id for s in spans} == {expected}
    assert all(s.heading_path == () for s in spans)


def test_hash_without_space_is_not_a_heading() -> None:
    spans = chunk_text("#hashtag text\n\nmore", doc_key="k")
    assert spans[0].section_id.startswith("unstructured:")


def test_page_starts_map_spans_to_pages() -> None:
    text = "Page one text.\n\nStill page one.\n\nPage two starts here.\n\nPage three."
    p2 = text.index("Page two")
    p3 = text.index("Page three")
    spans = chunk_text(text, doc_key="k", max_size=25, page_starts=[0, p2, p3])
    pages = {s.text: (s.page_start, s.page_end) for s in spans}
    assert pages["Page one text."] == (1, 1)
    assert pages["Page two starts here."] == (2, 2)
    assert pages["Page three."] == (3, 3)
    across = chunk_text(text, doc_key="k", max_size=1000, page_starts=[0, p2, p3])
    assert [(s.page_start, s.page_end) for s in across] == [(1, 3)]
    assert all(s.page_start is None for s in chunk_text(text, doc_key="k"))


def test_one_megabyte_document_is_chunked() -> None:
    section = (
        "## Section\n\nSome prose. It has sentences! And more of them?\n\n"
        "- item a\n- item b\n\n| a | b |\n| 1 | 2 |\n\n```\ncode line\n```\n\n"
    )
    text = "# Big\n\n" + section * (1_000_000 // len(section))
    text += "y" * 30_000 + " " + "z " * 20_000
    spans = chunk_text(text, doc_key="k", max_size=1500)
    assert_contract(text, spans, 1500)


# -- heading trail and table header (§3.4b) ------------------------------------------------


def test_heading_trail_holds_every_level_while_the_path_keeps_two() -> None:
    text = (
        "Intro before any heading.\n\n# Duck\n\nLead.\n\n## Behaviour\n\nIntro.\n\n"
        "### Feeding\n\nDucks eat grass.\n\n#### Diving\n\nSome dive.\n\n"
        "### Predators\n\nFoxes.\n\n## Notes\n\nEnd.\n"
    )
    got = [
        (c.text.split("\n")[0], c.heading_path, c.heading_trail)
        for c in chunk_text(text, doc_key="d")
    ]
    assert got == [
        ("Intro before any heading.", ("Duck",), ("Duck",)),
        ("# Duck", ("Duck",), ("Duck",)),
        ("## Behaviour", ("Duck", "Behaviour"), ("Duck", "Behaviour")),
        ("### Feeding", ("Duck", "Behaviour"), ("Duck", "Behaviour", "Feeding")),
        ("#### Diving", ("Duck", "Behaviour"), ("Duck", "Behaviour", "Feeding", "Diving")),
        ("### Predators", ("Duck", "Behaviour"), ("Duck", "Behaviour", "Predators")),
        ("## Notes", ("Duck", "Notes"), ("Duck", "Notes")),
    ]


def test_heading_trail_skips_levels_and_empty_headings() -> None:
    text = "## A\n\nx\n\n#### Deep\n\ny\n\n###\n\nz\n\n### C\n\nw\n"
    trails = [c.heading_trail for c in chunk_text(text, doc_key="d")]
    assert trails == [("A",), ("A", "Deep"), ("A",), ("A", "C")]


def test_a_long_table_is_cut_into_row_groups_that_carry_its_header_row() -> None:
    header = "| id | name | value |"
    rows = [f"| {i} | item number {i} | {i * 7} |" for i in range(60)]
    text = (
        "## Sheet\n\nSome words.\n\n" + "\n".join([header, "|---|---|---|", *rows]) + "\n\nAfter.\n"
    )
    chunks = chunk_text(text, doc_key="d", max_size=300)
    table = [c for c in chunks if "| item number" in c.text]
    assert len(table) > 3
    for c in table:
        assert c.table_header == header
        lines = c.text.split("\n")
        body = [ln for ln in lines if ln.startswith("| ") and "item number" in ln]
        assert all(ln in rows for ln in body)  # whole rows only: cut between rows
    assert table[0].text.startswith(header)
    assert all(header not in c.text for c in table[1:])
    assert [c.table_header for c in chunks if "| item number" not in c.text] == [None] * (
        len(chunks) - len(table)
    )
    # The contract holds: exact spans, in order.
    for c in chunks:
        assert text[c.start : c.end] == c.text


def test_pipe_lines_without_a_rule_are_not_a_table() -> None:
    text = "| not | a table |\n| just | pipes |\n"
    assert [c.table_header for c in chunk_text(text, doc_key="d")] == [None]


def test_an_empty_header_row_is_no_table_header() -> None:
    text = "|  | |\n|---|---|\n| Industry | Software |\n"
    assert [c.table_header for c in chunk_text(text, doc_key="d")] == [None]
