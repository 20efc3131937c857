"""AsciiDoc → Markdown: section titles become headings, listing and literal blocks become
fenced code, and nothing inside a delimited block is a heading."""

from __future__ import annotations

from guaipeca.chunk import headings
from guaipeca.convert import convert_bytes
from guaipeca.convert.asciidoc import asciidoc_to_markdown

DOC = """\
= The Guide
Ana Author
:toc:

Intro text.

== Install

[source,python]
----
= not a title
# not a heading
x = 1
----

=== On Linux

....
== not a title either
....

////
== a comment, dropped
////

====
An example block with *text*.
====

 # an indented literal paragraph

== Usage ==

Done.
"""


def test_titles_become_headings_and_blocks_stay_code() -> None:
    md = asciidoc_to_markdown(DOC)
    assert [(level, title) for _, level, title in headings(md)] == [
        (1, "The Guide"),
        (2, "Install"),
        (3, "On Linux"),
        (2, "Usage"),
    ]
    assert "```python\n= not a title\n# not a heading\nx = 1\n```" in md
    assert "```\n== not a title either\n```" in md
    assert "```\n # an indented literal paragraph\n```" in md
    assert "a comment, dropped" not in md
    assert "====\nAn example block with *text*.\n====" in md  # content blocks stay as they are


def test_an_unclosed_listing_block_is_code_to_the_end() -> None:
    md = asciidoc_to_markdown("= T\n\n----\n== inside\n")
    assert [t for _, _, t in headings(md)] == ["T"]
    assert md.endswith("```\n== inside\n\n```")


def test_adoc_and_asciidoc_files_are_converted() -> None:
    for ext in (".adoc", ".asciidoc"):
        converted = convert_bytes(b"= Title\n\n== Part\n\nText.\n", ext)
        assert converted.format == "asciidoc"
        assert converted.text == "# Title\n\n## Part\n\nText.\n"
