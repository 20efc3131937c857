"""Snippets: the densest cluster of query terms in a chunk, as readable text, terms marked.

The chunk is stored as Markdown, which is not what a reader wants in a one-line preview:
link targets, image syntax, table pipes and emphasis markers are stripped first (a table
row reads ``Kingdom: | Animalia``, ``|---|`` rules disappear, list bullets become ``•``),
keeping a map from every
shown character back to the chunk text. Query terms are found in that plain text by the
lexical index's own analysis, the window is placed around the densest cluster of them,
and each match is given twice: marked ``**like this**`` in the snippet (a literal ``**`` of
the text, or a ``*`` touching a marker, escaped as ``\\*``, so the markers are unambiguous)
and as ``[start, end)``
character offsets into the chunk text, so no client has to parse the markers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Snippet", "make_snippet", "plain_text"]

TermSpans = Callable[[str], Sequence[tuple[int, int, str]]]

_IMAGE = re.compile(
    r"\[\s*!\[[^\]\n]*\]\([^)\n]*\)\s*\]\([^)\n]*\)"  # a linked image
    r"|!\[[^\]\n]*\]\([^)\n]*\)"
)
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+", re.MULTILINE)
_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(?=\S)", re.MULTILINE)
_STRONG = re.compile(r"(\*\*|__)(?=\S)([^\n]+?)(?<=\S)\1")
_EMPH = re.compile(r"(?<![\w*\\])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*\\])\*(?![\w*])")
_CODE = re.compile(r"`+")
_ROW = re.compile(r"^[ \t]*\|.*$", re.MULTILINE)
_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_ESCAPED_PIPE = re.compile(r"\\\|")


@dataclass(frozen=True, slots=True)
class Snippet:
    """A snippet (query terms marked ``**…**``) and the matches as ``[start, end)`` offsets
    into the chunk text it was made from (every match in the chunk, in order)."""

    text: str
    highlights: tuple[tuple[int, int], ...] = ()


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _edits(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping ``(start, end, replacement)`` edits that turn Markdown into text."""
    edits: list[tuple[int, int, str]] = []
    for m in _ROW.finditer(text):
        if _RULE.fullmatch(m.group(0)):
            edits.append((m.start(), m.end(), ""))
            continue
        line, base = m.group(0), m.start()
        bounds = [b.start() for b in _CELL_SPLIT.finditer(line)]
        cells = [(a + 1, b) for a, b in zip(bounds, [*bounds[1:], len(line)], strict=True)]
        kept = False
        cursor = 0
        for a, b in cells:
            cell = line[a:b]
            if not cell.strip():
                continue
            a += len(cell) - len(cell.lstrip())
            b -= len(cell) - len(cell.rstrip())
            edits.append((base + cursor, base + a, " | " if kept else ""))
            kept, cursor = True, b
        edits.append((base + cursor, base + len(line), ""))
    for pattern, keep in ((_IMAGE, None), (_LINK, 1), (_STRONG, 2), (_EMPH, 1)):
        for m in pattern.finditer(text):
            if keep is None:
                edits.append((m.start(), m.end(), ""))
            else:
                edits.append((m.start(), m.start(keep), ""))
                edits.append((m.end(keep), m.end(), ""))
    for pattern in (_HEADING, _CODE):
        edits.extend((m.start(), m.end(), "") for m in pattern.finditer(text))
    edits.extend((m.start(), m.end(), "• ") for m in _BULLET.finditer(text))
    edits.extend((m.start(), m.start() + 1, "") for m in _ESCAPED_PIPE.finditer(text))
    edits.sort(key=lambda e: (e[0], -e[1]))  # at one start, the longest edit wins
    out: list[tuple[int, int, str]] = []
    end = 0
    for e in edits:
        if e[0] >= end or (e[0] == e[1] == end):  # the first of overlapping edits wins
            out.append(e)
            end = max(end, e[1])
    return out


def plain_text(text: str) -> tuple[str, list[int]]:
    """``text`` (Markdown) as one line of plain text, and for each of its characters the
    offset in ``text`` it comes from (inserted separators point at where they stand)."""
    chars: list[str] = []
    where: list[int] = []
    pos = 0
    for start, end, replacement in [*_edits(text), (len(text), len(text), "")]:
        for i in range(pos, start):
            chars.append(text[i])
            where.append(i)
        chars.extend(replacement)
        where.extend([start] * len(replacement))
        pos = max(pos, end)
    # One space for every run of whitespace, none at the ends.
    flat: list[str] = []
    flat_where: list[int] = []
    for char, at in zip(chars, where, strict=True):
        if char.isspace():
            if flat and flat[-1] != " ":
                flat.append(" ")
                flat_where.append(at)
            continue
        flat.append(char)
        flat_where.append(at)
    if flat and flat[-1] == " ":
        flat.pop()
        flat_where.pop()
    return "".join(flat), flat_where


def _matches(flat: str, query_terms: set[str], term_spans: TermSpans) -> list[tuple[int, int, str]]:
    matches: list[tuple[int, int, str]] = []
    last_end = -1
    for start, end, term in term_spans(flat):
        if term not in query_terms or start < last_end:
            continue  # not asked for, or inside a word already marked
        # Grow to the whole word: "covid" matched inside "covid19" marks "covid19".
        while start > 0 and _is_word_char(flat[start - 1]):
            start -= 1
        while end < len(flat) and _is_word_char(flat[end]):
            end += 1
        if start < last_end:
            continue
        matches.append((start, end, term))
        last_end = end
    return matches


def _densest(matches: list[tuple[int, int, str]], width: int) -> tuple[int, int]:
    """``(first, last)`` index of the run of matches fitting in ``width`` with the most
    distinct terms, then the most matches, then the shortest span."""
    best = (0, 0)
    best_key: tuple[int, int, int] | None = None
    j = 0
    for i, (start, _, _) in enumerate(matches):
        j = max(j, i)
        while j + 1 < len(matches) and matches[j + 1][1] - start <= width:
            j += 1
        run = matches[i : j + 1]
        key = (len({t for _, _, t in run}), len(run), -(run[-1][1] - start))
        if best_key is None or key > best_key:
            best, best_key = (i, j), key
    return best


def _window(flat: str, lo_match: int, hi_match: int, width: int) -> tuple[int, int]:
    """A ``width`` window centred on ``[lo_match, hi_match)``, cut at spaces."""
    slack = max(0, width - (hi_match - lo_match))
    lo = max(0, lo_match - slack // 2)
    hi = min(len(flat), lo + width)
    lo = max(0, hi - width)
    if lo > 0:
        space = flat.find(" ", lo, lo_match)
        lo = space + 1 if space >= 0 else lo
    if hi < len(flat):
        space = flat.rfind(" ", hi_match, hi + 1)
        hi = space if space >= 0 else hi
    return lo, hi


_STAR_RUN = re.compile(r"\*{2,}")


def _escape(text: str, *, before_mark: bool = False, after_mark: bool = False) -> str:
    """``text`` with every ``*`` that could be read as part of a ``**`` marker escaped: runs
    of two or more, and a lone one touching a marker."""
    text = _STAR_RUN.sub(lambda m: "\\*" * len(m.group(0)), text)
    if before_mark and text.endswith("*") and not text.endswith("\\*"):
        text = text[:-1] + "\\*"
    if after_mark and text.startswith("*"):
        text = "\\*" + text[1:]
    return text


def make_snippet(
    text: str,
    query_terms: set[str],
    term_spans: TermSpans,
    *,
    width: int = 240,
) -> Snippet:
    """The ``width``-character window of ``text``'s plain form around its densest cluster
    of query terms, the terms marked, with every match's offsets in ``text``.

    ``term_spans`` maps a text to its index terms (stemmed, stopwords dropped) with their
    character spans — the lexical index's own analysis (``Analyzer.term_spans``), so
    "running" in the text matches "runs" in the query. A match is marked as the whole word
    around it. Without matches the snippet is the chunk's opening.
    """
    flat, where = plain_text(text)
    if not flat:
        return Snippet("")
    matches = _matches(flat, query_terms, term_spans) if query_terms else []
    if not matches:
        return Snippet(_escape(flat[:width]) + ("…" if len(flat) > width else ""))
    highlights = tuple((where[s], where[e - 1] + 1) for s, e, _ in matches)
    first, last = _densest(matches, width)
    lo, hi = _window(flat, matches[first][0], matches[last][1], width)
    pieces: list[str] = []
    cursor = lo
    marked_before = False
    for start, end, _ in matches:
        if start < lo or end > hi:
            continue
        pieces.append(_escape(flat[cursor:start], before_mark=True, after_mark=marked_before))
        pieces.append(f"**{_escape(flat[start:end])}**")
        cursor, marked_before = end, True
    pieces.append(_escape(flat[cursor:hi], after_mark=marked_before))
    marked = ("…" if lo > 0 else "") + "".join(pieces) + ("…" if hi < len(flat) else "")
    return Snippet(marked, highlights)
