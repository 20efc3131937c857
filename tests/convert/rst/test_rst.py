"""reStructuredText → Markdown through docutils: titles become headings at docutils' levels,
code stays code, Sphinx's roles and directives show as text, bad markup degrades."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.chunk import headings
from guaipeca.convert import convert_bytes
from guaipeca.convert.rst import convert_rst, looks_like_rst

DOC = """\
=========
The title
=========

Intro with :class:`~django.db.models.QuerySet`, :doc:`the guide <topics/db/queries>`,
:meth:`~QuerySet.filter`, :setting:`DEBUG`, :rfc:`Safe methods <9110#section-9.2.1>`
and :frobnicate:`some text`.

Section one
===========

Text::

    # Hits the database.
    e = Entry.objects.get(id=5)

.. code-block:: python
    :caption: models.py
    :emphasize-lines: 2

    # a comment
    x = 1

Sub-section
-----------

.. versionadded:: 5.0

    The ``foo`` argument.

.. method:: filter(*args, **kwargs)

    Returns a new ``QuerySet``.

.. django-admin:: migrate

.. toctree::
    :maxdepth: 1

    intro/index

.. unheard-of:: its argument

    Its content.

Section two
===========

=====  =====
Name   Value
=====  =====
a      1
b      2
=====  =====

# A hash that RST reads as text, not a heading.
"""


@pytest.fixture(scope="module")
def markdown() -> str:
    md, warnings = convert_rst(DOC)
    assert warnings == ()
    return md


def test_section_titles_become_headings_at_the_levels_docutils_assigns(markdown: str) -> None:
    found = [(level, title) for _, level, title in headings(markdown)]
    assert found == [
        (1, "The title"),
        (2, "Section one"),
        (3, "Sub-section"),
        (2, "Section two"),
    ]


def test_code_blocks_stay_fenced_code_whatever_their_directive(markdown: str) -> None:
    assert "```\n# Hits the database.\ne = Entry.objects.get(id=5)\n```" in markdown
    assert "```python\n# a comment\nx = 1\n```" in markdown
    assert "caption" not in markdown  # an option of Sphinx's, not text


def test_roles_show_as_their_text(markdown: str) -> None:
    intro = markdown.split("## Section one")[0]
    assert "`QuerySet`" in intro and "django.db.models" not in intro
    assert "the guide" in intro and "topics/db/queries" not in intro
    assert "`filter()`" in intro and "`DEBUG`" in intro
    assert "Safe methods" in intro and "9110" not in intro
    assert "some text" in intro
    assert ":class:" not in markdown and "`~" not in markdown and ":frobnicate:" not in markdown


def test_sphinx_directives_show_their_argument_and_content_as_text(markdown: str) -> None:
    assert "*New in version 5.0.*" in markdown and "The `foo` argument." in markdown
    assert "`filter(*args, **kwargs)`" in markdown and "Returns a new `QuerySet`." in markdown
    assert "`migrate`" in markdown
    assert "its argument" in markdown and "Its content." in markdown
    assert "intro/index" not in markdown and "maxdepth" not in markdown  # toctree: navigation
    assert ".. " not in markdown


def test_tables_become_markdown_tables(markdown: str) -> None:
    assert "| Name | Value |\n|---|---|\n| a | 1 |\n| b | 2 |" in markdown


def test_running_text_that_looks_like_markdown_is_escaped(markdown: str) -> None:
    assert "\\# A hash that RST reads as text" in markdown


def test_nothing_is_reported_on_stderr_for_unknown_or_bad_markup(
    capfd: pytest.CaptureFixture[str],
) -> None:
    md, warnings = convert_rst("Title\n=====\n\n.. nope::\n\n:nope:`x` `unclosed\n\n|undefined|\n")
    assert warnings == ()
    assert "x" in md and capfd.readouterr().err == ""


def test_no_other_file_is_read_and_raw_html_is_dropped(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    source = f".. include:: {secret}\n\n.. raw:: html\n\n    <script>alert(1)</script>\n\nok\n"
    md, _ = convert_rst(source)
    assert "TOP SECRET" not in md and "<script>" not in md and "ok" in md


def test_a_source_docutils_cannot_parse_is_kept_as_text_with_a_warning() -> None:
    source = "".join(" " * i + "x\n\n" for i in range(300))  # nesting past Python's stack
    md, warnings = convert_rst(source)
    assert md == source
    (warning,) = warnings
    assert warning.startswith("reStructuredText could not be parsed (RecursionError")
    converted = convert_bytes(source.encode(), ".rst")
    assert (converted.format, converted.text, converted.warnings) == ("text", source, warnings)


def test_rst_files_and_rst_in_txt_files_are_converted_and_prose_is_not() -> None:
    assert convert_bytes(DOC.encode(), ".rst").format == "rst"
    as_txt = convert_bytes(DOC.encode(), ".txt")
    assert as_txt.format == "rst" and as_txt.text.startswith("# The title\n")
    prose = "Notes\n=====\n\nWe met on Monday. Bring the report::\n\nThanks.\n"
    plain = convert_bytes(prose.encode(), ".txt")
    assert (plain.format, plain.text) == ("text", prose)


@pytest.mark.parametrize(
    "text",
    [
        "Title\n=====\n\n.. note:: Read this.\n",  # a title and a directive
        "Use :func:`len` and ``len``.\n",  # a role and a literal
        ".. a::\n.. b::\n.. c::\n",  # three directives
        "=====\nTitle\n=====\n\nOne paragraph.\n",  # a document title
        "Title\n*****\n\nUse ``x`` here.\n",
    ],
)
def test_rst_is_detected_by_its_markup(text: str) -> None:
    assert looks_like_rst(text)


@pytest.mark.parametrize(
    "text",
    [
        "Just a letter.\n\nKind regards,\nAna\n",
        "Shopping\n--------\n\n- milk\n- eggs\n",  # one underlined heading
        "Report\n======\n\nSee ``this``.\n\n```python\nx = 1\n```\n",  # a Markdown fence
        "A much longer title\n===\n\nUse ``x``.\n",  # an underline shorter than its title
        "Mail me at :me:\n\nTime 10:30:`45\n",
    ],
)
def test_prose_and_markdown_are_not_taken_for_rst(text: str) -> None:
    assert not looks_like_rst(text)


# --- property: nothing inside a literal block is ever a heading ---------------------------

words = st.text(alphabet="abc XYZ#:.-*`=|019", min_size=1, max_size=30)
title_text = st.text(alphabet="abcXYZ ", min_size=1, max_size=20).map(lambda t: t.strip() or "T")
title = st.tuples(title_text, st.sampled_from("=-~^")).map(
    lambda t: f"{t[0]}\n{t[1] * max(3, len(t[0]))}"
)
literal = st.lists(st.one_of(words, st.just("# not a heading")), min_size=1, max_size=5).map(
    lambda lines: "Example::\n\n" + "\n".join("    " + x for x in lines)
)
code = st.lists(st.one_of(words, st.just("# not a heading")), min_size=1, max_size=5).map(
    lambda lines: ".. code-block:: python\n\n" + "\n".join("   " + x for x in lines)
)
rst = st.lists(st.one_of(title, words, literal, code), max_size=12).map("\n\n".join)


@settings(max_examples=100, deadline=None)
@given(rst)
def test_no_heading_ever_comes_from_a_literal_block(source: str) -> None:
    md, _warnings = convert_rst(source)
    assert all("not a heading" not in t for _, _, t in headings(md))
    assert "\r" not in md and "\x00" not in md
