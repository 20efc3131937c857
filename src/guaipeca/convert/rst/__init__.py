"""reStructuredText sources (``.rst``, and ``.txt`` files whose content is RST) → Markdown.

docutils, the reference parser, reads the source into a doctree (``_parse``: Sphinx's
directives and roles read as text, nothing reported, nothing halted, no other file read)
and ``_markdown`` writes that tree as Markdown: section titles become ``#`` headings at the
levels docutils assigns, code stays fenced code, roles show as their text. A source docutils
cannot parse at all is kept as plain text, with a warning.

``looks_like_rst`` is the cheap, conservative test that tells RST saved as ``.txt`` (as
Django's and Python's documentation are) from plain prose: see its docstring.
"""

from __future__ import annotations

import re

__all__ = ["convert_rst", "looks_like_rst"]

_ADORNMENT_CHARS = "=-`:'\"~^_*+#<>"
_ADORNMENT = re.compile(r"([=\-`:'\"~^_*+#<>])\1{2,}[ \t]*")
_DIRECTIVE = re.compile(r"\.\.[ \t]+[A-Za-z][\w:+.-]*[ \t]*::(?:[ \t]|$)")
_ROLE = re.compile(r"(?<![\w`]):[A-Za-z][\w:+.-]*:`[^`\n]+`")
_LITERAL = re.compile(r"``[^`\s][^`\n]*``")
# A Markdown code fence at a line's start (RST's literal blocks are indented).
_FENCE = re.compile(r"```[ \t]*[\w+#.-]*[ \t]*")
#: Lines read to decide (a long file says what it is in its first thousands of lines).
_SCAN_LINES = 5000


def _is_title(lines: list[str], i: int) -> bool:
    """Whether line ``i`` is text underlined (optionally also overlined) by an adornment line
    at least as long, as RST section titles are."""
    title = lines[i].rstrip()
    if not title.strip() or _ADORNMENT.fullmatch(title) or i + 1 >= len(lines):
        return False
    under = lines[i + 1].rstrip()
    if not _ADORNMENT.fullmatch(under) or len(under) < len(title):
        return False
    if i > 0 and _ADORNMENT.fullmatch(lines[i - 1].rstrip()):
        over = lines[i - 1].rstrip()
        return over == under  # an overline matches its underline
    return not title.startswith((" ", "\t"))


def _adorns(lines: list[str], i: int) -> bool:
    """Whether line ``i`` is the underline or overline of a section title."""
    return (i > 0 and _is_title(lines, i - 1)) or (i + 2 < len(lines) and _is_title(lines, i + 1))


def looks_like_rst(text: str) -> bool:
    """Whether a ``.txt`` file's text is reStructuredText.

    Four kinds of RST markup are counted: section titles (a line underlined, or over- and
    underlined, with a run of one punctuation character at least as long as the title),
    ``.. name::`` directive lines, ``:role:`text``` roles and ````literal```` text. The text
    is RST when it has two of the kinds, or one kind other than titles at least three times,
    or when it opens with a title between an overline and an underline (a release note that
    is a title and one paragraph).
    A Markdown code fence (a line of ```` ``` ```` and a language) anywhere rules RST out.
    Plain prose, which at most underlines a heading or two, stays plain text.
    """
    lines = text.split("\n", _SCAN_LINES)[:_SCAN_LINES]
    counts = {"title": 0, "directive": 0, "role": 0, "literal": 0}
    for i, line in enumerate(lines):
        if line.startswith("```") and _FENCE.fullmatch(line) and not _adorns(lines, i):
            return False
        stripped = line.lstrip()
        if stripped.startswith(".. ") and _DIRECTIVE.match(stripped):
            counts["directive"] += 1
        if ":`" in line and _ROLE.search(line):
            counts["role"] += 1
        if "``" in line and _LITERAL.search(line):
            counts["literal"] += 1
        if i and line[:1] in _ADORNMENT_CHARS and line and _is_title(lines, i - 1):
            counts["title"] += 1
    kinds = sum(1 for n in counts.values() if n)
    if kinds >= 2 or any(n >= 3 for k, n in counts.items() if k != "title"):
        return True
    return _opens_with_overlined_title(lines)


def _opens_with_overlined_title(lines: list[str]) -> bool:
    """Whether the first lines are a title between an overline and an underline (RST's
    document title; neither Markdown nor plain prose has overlines)."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    return (
        first is not None
        and first + 2 < len(lines)
        and bool(_ADORNMENT.fullmatch(lines[first].rstrip()))
        and _is_title(lines, first + 1)
    )


def convert_rst(text: str) -> tuple[str, tuple[str, ...]]:
    """``(markdown, warnings)`` of an RST source; on a source docutils cannot parse at all,
    the text itself and a one-line warning that says so."""
    from guaipeca.convert.rst._markdown import to_markdown
    from guaipeca.convert.rst._parse import parse_rst

    try:
        markdown = to_markdown(parse_rst(text))
    except Exception as exc:  # docutils' failures have no common base; any one degrades
        detail = str(exc).strip().split("\n", 1)[0][:200]
        reason = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        return text, (f"reStructuredText could not be parsed ({reason}); kept as plain text",)
    return markdown, ()
