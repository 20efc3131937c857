"""Markdown to HTML for the web page (§7.3): documents and snippets are shown rendered
(headings, lists, tables, code, link text), not as raw Markdown.

The rendering runs here, with markdown-it-py (CommonMark plus tables), so the page needs
nothing from elsewhere and works offline. It is sanitised by construction:

- raw HTML in a document is never passed through: it is escaped and shown as text;
- images become their alt text (nothing is loaded, from this server or any other);
- links become their text (a saved web page's links would lead off this server).

The hit's span is marked in place: two rare punctuation characters go into the Markdown at
the span's ends (moved off a line's block markers, blank lines and code fences, so a heading
stays a heading and a fenced example stays code) and come out
as empty ``<span class="hit-start">`` / ``<span class="hit-end">`` elements. The page then
wraps every piece of text between the two in ``<mark class="current">``, which stays
well-formed whatever blocks the span crosses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

__all__ = ["MAX_RENDER_CHARS", "render_markdown"]

#: Most characters one render call takes (the page asks for at most 1,000,000 at a time).
MAX_RENDER_CHARS: Final = 2_000_000
# Two rare punctuation marks (Unicode Po): CommonMark's emphasis rules treat punctuation
# as a boundary, so a span ending right after "**Note:**" leaves the bold closed (a
# private-use character there, as before, is a letter to those rules and broke it).
_START: Final = "\u2e4e"
_END: Final = "\u2e4f"
_START_HTML: Final = '<span class="hit-start"></span>'
_END_HTML: Final = '<span class="hit-end"></span>'
# What may open a line before its text: indentation, quote marks, list bullets or numbers,
# a heading's hashes, a table row's pipe. A span's start marker goes after them.
_LINE_MARKERS: Final = re.compile(r"[ \t]*(?:(?:>|[-*+]|\d{1,9}[.)]|#{1,6})[ \t]+|\|[ \t]*)*")
# A code fence's line (opening or closing), indented or inside a list item or a quote.
_FENCE: Final = re.compile(r"[ \t]*(?:(?:>|[-*+]|\d{1,9}[.)])[ \t]+)*(?:`{3,}|~{3,})")


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    return f'<span class="image">[{_escape(alt or "image")}]</span>'


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return '<span class="link">'


def _span_close(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "</span>"


def _mark_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "<mark>"


def _mark_close(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "</mark>"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# A snippet is one line (the chunk's whitespace folded): its block syntax is cut loose from
# line starts, so it is tidied as text: heading hashes go, a table's rule row goes, cell
# pipes become a middle dot, a bullet becomes one.
_SNIPPET_TIDY: Final = (
    (re.compile(r"(?<![^\s.…])#{1,6}(?=\s)"), ""),
    (re.compile(r"(?:\|\s*)*(?:\s*:?-{3,}:?\s*\|)+(?:\s*:?-{3,}:?\s*)?"), " "),
    (re.compile(r"\s*(?:\|\s*)+"), " · "),
    (re.compile(r"(?<!\S)[*+-](?=\s)"), "•"),
    (re.compile(r"\s{2,}"), " "),
)


def _parser(snippet: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )
    rules: dict[str, Any] = {
        "image": _image,
        "link_open": _link_open,
        "link_close": _span_close,
    }
    if snippet:  # a snippet marks the query's terms **like this**
        rules |= {"strong_open": _mark_open, "strong_close": _mark_close}
    for name, rule in rules.items():
        md.add_render_rule(name, rule)
    return md


_DOCUMENT: Final = _parser(snippet=False)
_SNIPPET: Final = _parser(snippet=True)


def _with_markers(text: str, span: tuple[int, int]) -> str:
    start, end = max(0, span[0]), min(len(text), span[1])
    if start >= end:
        return text
    start, end = _safe_start(text, start), _safe_end(text, end)
    if start >= end:
        return text
    return text[:start] + _START + text[start:end] + _END + text[end:]


def _line(text: str, at: int) -> tuple[int, int]:
    """``[begin, end)`` of the line holding offset ``at`` (its newline excluded)."""
    begin = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return begin, len(text) if end < 0 else end


def _safe_start(text: str, start: int) -> int:
    """Where the start marker can go without changing the blocks around it: past a line's
    block markers (a heading stays a heading), past blank lines (a paragraph break stays
    one) and past a code fence's line (a character before its backticks would make it
    text; RST's converted examples are fenced, often indented inside list items)."""
    while True:
        begin, end = _line(text, start)
        line = text[begin:end]
        if end < len(text) and (not line.strip() or _FENCE.match(line)):
            start = end + 1
            continue
        return max(start, _markers_end(text, begin))


def _safe_end(text: str, end: int) -> int:
    """Where the end marker can go: a span ending among a line's block markers, or in a
    code fence's line, ends at the close of the last line before with text (inside the
    code, or the text before it), so every line keeps its markers and fences first."""
    begin, _ = _line(text, end)
    if end > _markers_end(text, begin) and not _FENCE.match(text, begin):
        return end
    while begin > 0:
        previous = text.rfind("\n", 0, begin - 1) + 1
        if text[previous : begin - 1].strip() and not _FENCE.match(text, previous):
            return begin - 1
        begin = previous
    return 0


def _markers_end(text: str, begin: int) -> int:
    markers = _LINE_MARKERS.match(text, begin)
    return markers.end() if markers is not None else begin


def render_markdown(
    text: str, span: tuple[int, int] | None = None, *, snippet: bool = False
) -> str:
    """``text`` (Markdown, as converted) as sanitised HTML; ``span`` (character offsets into
    ``text``) comes out between a ``hit-start`` and a ``hit-end`` element. A ``snippet``
    renders as one line of inline HTML, its **marked** terms as ``<mark>``."""
    # A marker character already in the text must not pose as one.
    text = text.replace(_START, "\ufffd").replace(_END, "\ufffd")
    if snippet:
        for pattern, replacement in _SNIPPET_TIDY:
            text = pattern.sub(replacement, text)
        return str(_SNIPPET.renderInline(text.strip(" ·")))
    if span is not None:
        text = _with_markers(text, span)
    html = str(_DOCUMENT.render(text))
    return html.replace(_START, _START_HTML).replace(_END, _END_HTML)
