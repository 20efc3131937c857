"""Markdown to HTML for the web page (§7.3): documents and snippets are shown rendered
(headings, lists, tables, code, link text), not as raw Markdown.

The rendering runs here, with markdown-it-py (CommonMark plus tables), so the page needs
nothing from elsewhere and works offline. It is sanitised by construction:

- raw HTML in a document is never passed through: it is escaped and shown as text;
- images become their alt text (nothing is loaded, from this server or any other);
- links become their text (a saved web page's links would lead off this server).

The hit's span is marked in place: two private-use characters go into the Markdown at the
span's ends (moved past a line's block markers, so a heading stays a heading) and come out
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
_START: Final = "\ue000"
_END: Final = "\ue001"
_START_HTML: Final = '<span class="hit-start"></span>'
_END_HTML: Final = '<span class="hit-end"></span>'
# What may open a line before its text: indentation, quote marks, list bullets or numbers,
# a heading's hashes, a table row's pipe. A span's start marker goes after them.
_LINE_MARKERS: Final = re.compile(r"[ \t]*(?:(?:>|[-*+]|\d{1,9}[.)]|#{1,6})[ \t]+|\|[ \t]*)*")


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
    line_start = text.rfind("\n", 0, start) + 1
    markers = _LINE_MARKERS.match(text, line_start)
    if markers is not None and not text[line_start:start].strip():
        start = min(max(start, markers.end()), end)  # the span opens its line: skip its markers
    return text[:start] + _START + text[start:end] + _END + text[end:]


def render_markdown(
    text: str, span: tuple[int, int] | None = None, *, snippet: bool = False
) -> str:
    """``text`` (Markdown, as converted) as sanitised HTML; ``span`` (character offsets into
    ``text``) comes out between a ``hit-start`` and a ``hit-end`` element. A ``snippet``
    renders as one line of inline HTML, its **marked** terms as ``<mark>``."""
    # The markers are private-use characters; one already in the text must not pose as one.
    text = text.replace(_START, "\ufffd").replace(_END, "\ufffd")
    if snippet:
        for pattern, replacement in _SNIPPET_TIDY:
            text = pattern.sub(replacement, text)
        return str(_SNIPPET.renderInline(text.strip(" ·")))
    if span is not None:
        text = _with_markers(text, span)
    html = str(_DOCUMENT.render(text))
    return html.replace(_START, _START_HTML).replace(_END, _END_HTML)
