"""The web page's Markdown rendering: real markdown-it-py, sanitised output, the hit's
span marked in place without breaking the blocks it sits in."""

from __future__ import annotations

import bisect
import random
import re
from pathlib import Path

from guaipeca.convert import convert_bytes
from guaipeca.server.webrender import render_markdown

START = '<span class="hit-start"></span>'
END = '<span class="hit-end"></span>'


def test_headings_tables_lists_and_code_render_as_html() -> None:
    text = (
        "# Title\n\n## Section\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```\ncode <here>\n```\n"
    )
    html = render_markdown(text)
    for tag in ("<h1>Title</h1>", "<h2>Section</h2>", "<li>one</li>", "<table>", "<td>2</td>"):
        assert tag in html
    assert "<pre><code>code &lt;here&gt;\n</code></pre>" in html


def test_raw_html_images_and_links_never_become_live_markup() -> None:
    text = (
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(1)">\n\n'
        "![a chart](https://example.invalid/c.png) [site](javascript:alert(1)) "
        "[docs](https://example.invalid/)"
    )
    html = render_markdown(text)
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert "&lt;script&gt;" in html and "&lt;img" in html
    assert '<span class="image">[a chart]</span>' in html
    assert '<span class="link">docs</span>' in html
    assert "https://example.invalid" not in html


def test_a_span_opening_a_heading_line_keeps_the_heading() -> None:
    text = "intro\n\n## Taxonomy\n\nDucks are birds.\n"
    start = text.index("## Taxonomy")
    html = render_markdown(text, (start, len(text)))
    assert f"<h2>{START}Taxonomy</h2>" in html
    assert f"Ducks are birds.{END}</p>" in html  # ends with its last line of text


def test_a_span_inside_a_table_row_keeps_the_table() -> None:
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n"
    start = text.index("| 3")
    html = render_markdown(text, (start, start + 5))
    assert html.count("<tr>") == 3
    assert f"<td>{START}3</td>" in html


def test_out_of_range_or_empty_spans_and_marker_lookalikes_are_harmless() -> None:
    assert START not in render_markdown("abc", (5, 9))
    assert START not in render_markdown("abc", (2, 2))
    html = render_markdown("a \u2e4e b \u2e4f c")  # the two marker characters
    assert START not in html and END not in html and "\ufffd" in html


def test_a_snippet_is_one_tidy_line_with_its_terms_marked() -> None:
    assert render_markdown("the **duck** swims", snippet=True) == "the <mark>duck</mark> swims"
    folded = "...## Domestication Main | **duck** | 3 | |---|---| * Rubber ![toy](x.png) [y](z)"
    assert render_markdown(folded, snippet=True) == (
        '... Domestication Main · <mark>duck</mark> · 3 • Rubber <span class="image">[toy]</span>'
        ' <span class="link">y</span>'
    )
    assert render_markdown("the **duck** swims") == "<p>the <strong>duck</strong> swims</p>\n"


def _without_markers(html: str) -> str:
    return html.replace(START, "").replace(END, "")


def test_spans_in_converted_rst_never_change_its_blocks() -> None:
    # Issue 31: RST converted to Markdown has fenced examples indented inside list items
    # and bold labels ("**Note:**"); a span starting on a fence or ending after the bold
    # turned the code into text and the bold into asterisks. Every span cut at word
    # boundaries must render as the document does, plus the two marks.
    source = Path(__file__).resolve().parents[1] / "data" / "django" / "querysets.txt"
    converted = convert_bytes(source.read_bytes(), ".txt")
    assert converted.format == "rst"
    text = converted.text[:30_000]
    plain = render_markdown(text)
    cuts = sorted(
        {m.start() for m in re.finditer(r"(?<=\s)\S", text)}
        | {m.end() for m in re.finditer(r"\S(?=\s)", text)}
    )
    rng = random.Random(31)
    for _ in range(300):
        start = rng.choice(cuts)
        end = cuts[min(len(cuts) - 1, bisect.bisect_left(cuts, start + rng.randint(1, 800)))]
        html = render_markdown(text, (start, end))
        if start < end:
            assert START in html and END in html, (start, end)
        assert _without_markers(html) == plain, (start, end, text[start - 20 : end + 20])


def test_a_span_starting_on_a_code_fence_starts_inside_the_code() -> None:
    text = "- Iteration:\n\n  ```\n  for e in rows:\n      print(e)\n  ```\n\n- Next item.\n"
    start = text.index("  ```")
    end = text.index("- Next")  # the next line's bullet stays first on its line
    html = render_markdown(text, (start, end))
    assert f"<pre><code>{START}for e in rows:" in html
    assert f"print(e){END}" in html and "<li>\n<p>Next item.</p>" in html
