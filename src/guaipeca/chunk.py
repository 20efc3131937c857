"""Structure-aware, lossless chunking of canonical document text.

This module is hand-written rather than delegated to a text-splitting library on purpose:
the chunk contract is the product's edge. Every chunk is an exact ``[start, end)`` span of
the canonical text, so a hit can always be cited and resolved byte for byte; nothing but
whitespace ever falls between chunks; no chunk exceeds ``max_size`` characters, even for a
single 24,000-character line. Generic splitters rewrite, overlap or trim text and lose that
guarantee. On top of the contract we add what makes retrieval good: cuts follow the
Markdown structure (headings, paragraphs, lists, fenced code, tables) and every chunk knows
its title, ``##`` section, full heading trail (every level), pages, and -- for a chunk holding
table rows -- its table's header row, so a chunk cut from the middle of a long table (a
spreadsheet is cut into groups of whole rows) still says what its columns mean.

How a cut is chosen: the document is split into segments at ATX headings (a heading always
starts a chunk). A segment that fits is one chunk. Otherwise it is cut greedily: from the
current start, take the furthest break inside the ``max_size`` window of the best kind
available -- block boundary, then row/line/list-item boundary, then sentence end, then soft
line break, then any whitespace, then a hard cut at ``max_size``. Sentence ends and soft
breaks only count in the back half of the window, so prose is not cut into slivers.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from guaipeca.types import ChunkSpan

__all__ = ["canonicalize", "chunk_text", "headings", "structure_at"]

# Per-line code-fence roles.
_NORMAL, _OPEN, _INSIDE, _CLOSE = 0, 1, 2, 3

# All patterns are used with .match(text, pos, endpos) on one line, so "$" means end of line.
_HEADING = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
# Fences may be indented (e.g. inside list items); being generous here is what keeps a
# "# comment" inside code from being taken for a heading.
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_TABLE_ROW = re.compile(r"[ \t]*\|")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_SENTENCE_END = re.compile(r"[.!?…][)\]\"'»”’]*(?=\s)|[。！？]")
_WS_RUN = re.compile(r"\s+")
_NON_WS = re.compile(r"\S")


def canonicalize(text: str) -> str:
    """Map CRLF and lone CR to LF, and NUL to U+FFFD (SQLite's text functions stop at a NUL,
    so stored spans would no longer resolve); nothing else changes. Offsets refer to this
    text."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")


@dataclass(slots=True)
class _Lines:
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # end of content, before the "\n"
    roles: list[int] = field(default_factory=list)
    blank: list[bool] = field(default_factory=list)
    level: list[int] = field(default_factory=list)  # ATX heading level, 0 if not a heading


@dataclass(slots=True)
class _Breaks:
    """Candidate cut positions of one segment, each list ascending, best kind first."""

    block: list[int] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    sentence: list[int] = field(default_factory=list)
    soft: list[int] = field(default_factory=list)
    space: list[int] = field(default_factory=list)


def _scan_lines(text: str) -> _Lines:
    lines = _Lines()
    pos = 0
    fence: str | None = None
    for raw in text.split("\n"):
        role, level = _NORMAL, 0
        lead = raw.lstrip(" \t")[:1]  # only lines led by a marker need a regex
        if fence is None:
            if lead in ("`", "~"):
                m = _FENCE.match(raw)
                # A backtick "fence" whose info string holds a backtick is inline code.
                if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                    role, fence = _OPEN, m.group(1)
            elif lead == "#":
                h = _HEADING.match(raw)
                level = len(h.group(1)) if h else 0
        else:
            role = _INSIDE
            m = _FENCE.match(raw) if lead == fence[0] else None
            # Closed only by the same character, at least as long, with nothing after it.
            if m and len(m.group(1)) >= len(fence) and m.group(1)[0] == fence[0]:
                role = _INSIDE if m.group(2).strip() else _CLOSE
            if role == _CLOSE:
                fence = None
        lines.starts.append(pos)
        pos += len(raw)
        lines.ends.append(pos)
        lines.roles.append(role)
        lines.blank.append(not raw or raw.isspace())
        lines.level.append(level)
        pos += 1
    return lines


def _heading_text(text: str, start: int, end: int) -> str:
    h = _HEADING.match(text, start, end)
    content = text[h.end() if h else start : end].strip()
    # An optional closing run of "#" counts only when separated by a space (CommonMark).
    bare = content.rstrip("#")
    if not bare or bare[-1] in " \t":
        content = bare.strip()
    return content


def headings(text: str) -> list[tuple[int, int, str]]:
    """The ATX headings of canonical ``text`` as ``(offset, level, title)``, in order.

    ``offset`` is where the heading's ``#`` marker starts. This is the one heading reader:
    chunking, trails and the ToC all use it, so a ``# comment`` inside fenced code, or
    indented four spaces or more (an indented code block), is never a heading. Headings
    with no text are left out, as in the trails.
    """
    ln = _scan_lines(text)
    out: list[tuple[int, int, str]] = []
    for i, level in enumerate(ln.level):
        if level:
            title = _heading_text(text, ln.starts[i], ln.ends[i])
            if title:
                marker = text.index("#", ln.starts[i], ln.ends[i])
                out.append((marker, level, title))
    return out


def _body_breaks(text: str, ln: _Lines, lo: int, hi: int, brk: _Breaks) -> None:
    """Record break positions for the blocks of lines ``[lo, hi)``."""
    starts, ends, roles, blank = ln.starts, ln.ends, ln.roles, ln.blank

    def is_item(k: int) -> bool:
        return _LIST_ITEM.match(text, starts[k], ends[k]) is not None

    def is_row(k: int) -> bool:
        return roles[k] == _NORMAL and _TABLE_ROW.match(text, starts[k], ends[k]) is not None

    def indented(k: int) -> bool:
        return not blank[k] and text[starts[k]] in " \t"

    def fence_end(k: int) -> int:
        """Last line of the fenced block opened at line k."""
        j = k + 1
        while j < hi and roles[j] == _INSIDE:
            j += 1
        return j if j < hi and roles[j] == _CLOSE else j - 1

    i = lo
    while i < hi:
        if blank[i] and roles[i] == _NORMAL:
            i += 1
            continue
        if roles[i] == _OPEN:
            last = fence_end(i)
            # Cut between content lines only: a lone fence line is a useless chunk.
            content_last = last - 1 if roles[last] == _CLOSE else last
            brk.line.extend(ends[k] for k in range(i + 1, content_last))
            last_line = last
        elif is_row(i):
            j = i + 1
            while j < hi and is_row(j):
                j += 1
            brk.line.extend(ends[k] for k in range(i, j - 1))  # between rows, never inside
            last_line = j - 1
        elif is_item(i):
            last_line = i
            j = i + 1
            while j < hi:
                if roles[j] == _OPEN:
                    if not indented(j):
                        break
                    brk.soft.append(ends[last_line])
                    last_line = fence_end(j)
                    j = last_line + 1
                    continue
                if blank[j]:
                    # A loose list goes on after blank lines if an item or indented text follows.
                    k = j
                    while k < hi and blank[k] and roles[k] == _NORMAL:
                        k += 1
                    if k < hi and roles[k] in (_NORMAL, _OPEN) and (is_item(k) or indented(k)):
                        j = k
                        continue
                    break
                if is_item(j):
                    brk.line.append(ends[last_line])
                elif is_row(j) or roles[j] != _NORMAL:
                    break
                else:  # indented or lazy continuation line
                    brk.soft.append(ends[last_line])
                last_line = j
                j += 1
        else:  # paragraph: the first line always belongs to it, so the loop always advances
            j = i + 1
            while (
                j < hi and roles[j] == _NORMAL and not blank[j] and not is_row(j) and not is_item(j)
            ):
                j += 1
            brk.soft.extend(ends[k] for k in range(i, j - 1))
            brk.sentence.extend(
                m.end() for m in _SENTENCE_END.finditer(text, starts[i], ends[j - 1])
            )
            last_line = j - 1
        brk.block.append(ends[last_line])
        i = last_line + 1


def _furthest(positions: list[int], after: int, limit: int) -> int | None:
    idx = bisect_right(positions, limit) - 1
    if idx >= 0 and positions[idx] > after:
        return positions[idx]
    return None


def _pick_cut(brk: _Breaks, s: int, max_size: int) -> int:
    limit = s + max_size
    half = s + max_size // 2
    for positions, after in (
        (brk.block, s),
        (brk.line, s),
        (brk.sentence, half),
        (brk.soft, half),
        (brk.space, s),
    ):
        c = _furthest(positions, after, limit)
        if c is not None:
            return c
    return limit  # no whitespace in reach: hard cut


def _cut_segment(
    text: str, ln: _Lines, lo: int, hi: int, has_heading: bool, max_size: int
) -> list[tuple[int, int]]:
    """Cut the segment made of lines ``[lo, hi)`` into stripped ``(start, end)`` spans."""
    seg_stop = ln.ends[hi - 1]
    first = _NON_WS.search(text, ln.starts[lo], seg_stop)
    if first is None:
        return []
    s = first.start()
    seg_end = seg_stop
    while text[seg_end - 1].isspace():
        seg_end -= 1
    if seg_end - s <= max_size:
        return [(s, seg_end)]

    brk = _Breaks()
    body_lo = lo + 1 if has_heading else lo
    _body_breaks(text, ln, body_lo, hi, brk)
    # The heading sticks to what follows: no whitespace cut before the body's first character.
    body = _NON_WS.search(text, ln.ends[lo] if has_heading else s, seg_end)
    body_start = body.start() if body else seg_end
    brk.space = [m.start() for m in _WS_RUN.finditer(text, body_start, seg_end)]

    spans: list[tuple[int, int]] = []
    while True:
        if seg_end - s <= max_size:
            spans.append((s, seg_end))
            return spans
        c = _pick_cut(brk, s, max_size)
        e = c
        while text[e - 1].isspace():  # text[s] is not whitespace, so e stays > s
            e -= 1
        spans.append((s, e))
        nxt = _NON_WS.search(text, c, seg_end)
        if nxt is None:  # pragma: no cover - c < seg_end and text[seg_end - 1] is not space
            return spans
        s = nxt.start()


def _section_id(doc_key: str, path: tuple[str, ...], ordinal: int) -> str:
    raw = doc_key + "\x00" + "\x1f".join(path) + "\x00" + str(ordinal)
    return "s:" + hashlib.sha1(raw.encode("utf-8")).hexdigest()[:16]


def _page_of(page_starts: Sequence[int], offset: int) -> int:
    return max(1, bisect_right(page_starts, offset))


def _table_headers(text: str, ln: _Lines) -> list[int]:
    """Per line: the index of the header row of the Markdown table the line is a row of,
    or -1. A table is a run of ``|`` rows whose second line is a ``|---|`` rule."""
    out = [-1] * len(ln.starts)
    i, n = 0, len(ln.starts)
    while i < n:
        if ln.roles[i] != _NORMAL or not _TABLE_ROW.match(text, ln.starts[i], ln.ends[i]):
            i += 1
            continue
        j = i + 1
        while (
            j < n
            and ln.roles[j] == _NORMAL
            and _TABLE_ROW.match(text, ln.starts[j], ln.ends[j]) is not None
        ):
            j += 1
        header = text[ln.starts[i] : ln.ends[i]]
        if (
            j - i >= 2
            and _TABLE_RULE.fullmatch(text, ln.starts[i + 1], ln.ends[i + 1])
            and header.replace("|", "").strip()  # an empty header row names no column
        ):
            out[i:j] = [i] * (j - i)
        i = j
    return out


def _table_header_of(text: str, ln: _Lines, headers: list[int], start: int, end: int) -> str | None:
    """The header row of the first table row in ``[start, end)``, if any."""
    k = bisect_right(ln.starts, start) - 1
    while k < len(ln.starts) and ln.starts[k] < end:
        if headers[k] >= 0:
            h = headers[k]
            return text[ln.starts[h] : ln.ends[h]].strip()
        k += 1
    return None


def _trails(text: str, ln: _Lines, heads: list[int]) -> list[tuple[str, ...]]:
    """Per heading line in ``heads``: every enclosing heading's text, outermost first,
    ending with that heading (empty headings are skipped)."""
    stack: list[tuple[int, str]] = []
    out: list[tuple[str, ...]] = []
    for i in heads:
        level = ln.level[i]
        while stack and stack[-1][0] >= level:
            stack.pop()
        heading = _heading_text(text, ln.starts[i], ln.ends[i])
        if heading:
            stack.append((level, heading))
        out.append(tuple(h for _, h in stack))
    return out


def chunk_text(
    text: str,
    *,
    doc_key: str,
    max_size: int = 2000,
    page_starts: Sequence[int] | None = None,
) -> list[ChunkSpan]:
    """Cut canonical ``text`` into ordered, exact, non-overlapping spans of at most ``max_size``.

    Only whitespace lies between, before and after the spans; spans never start or end with
    whitespace. ``doc_key`` seeds the section ids. ``page_starts`` (ascending character
    offsets where pages 1, 2, ... begin) adds 1-based page numbers to each span; text before
    the first page start counts as page 1. Raises ``ValueError`` if ``max_size < 1``, the
    text contains a carriage return (not canonical) or ``page_starts`` is not sorted.
    """
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    if "\r" in text:
        raise ValueError("text is not canonical (contains '\\r'); call canonicalize() first")
    if page_starts is not None and any(a > b for a, b in pairwise(page_starts)):
        raise ValueError("page_starts must be sorted ascending")
    if not text or text.isspace():
        return []

    ln = _scan_lines(text)
    heads = [i for i, lv in enumerate(ln.level) if lv]
    # (first line, stop line, starts with a heading, heading_path, section_id, trail) per segment
    plan: list[tuple[int, int, bool, tuple[str, ...], str, tuple[str, ...]]]
    if not heads:
        section = "unstructured:" + hashlib.sha1(doc_key.encode("utf-8")).hexdigest()[:16]
        plan = [(0, len(ln.starts), False, (), section, ())]
    else:
        trails = _trails(text, ln, heads)
        h1 = next((i for i in heads if ln.level[i] == 1), None)
        title = "" if h1 is None else _heading_text(text, ln.starts[h1], ln.ends[h1])
        prefix: tuple[str, ...] = (title,) if title else ()
        ordinal = 0
        path = prefix
        section = _section_id(doc_key, path, ordinal)
        # Text before the first heading: the title's trail, like its heading path.
        plan = [(0, heads[0], False, path, section, path)] if heads[0] > 0 else []
        for n, i in enumerate(heads):
            if ln.level[i] <= 2:  # "#" and "##" open a new section; deeper headings do not
                ordinal += 1
                h2 = _heading_text(text, ln.starts[i], ln.ends[i]) if ln.level[i] == 2 else ""
                path = (*prefix, h2) if h2 else prefix
                section = _section_id(doc_key, path, ordinal)
            stop = heads[n + 1] if n + 1 < len(heads) else len(ln.starts)
            plan.append((i, stop, True, path, section, trails[n]))

    headers = _table_headers(text, ln)
    out: list[ChunkSpan] = []
    for lo, hi, has_heading, path, section, trail in plan:
        for start, end in _cut_segment(text, ln, lo, hi, has_heading, max_size):
            out.append(
                ChunkSpan(
                    start=start,
                    end=end,
                    text=text[start:end],
                    heading_path=path,
                    section_id=section,
                    position=len(out),
                    page_start=None if page_starts is None else _page_of(page_starts, start),
                    page_end=None if page_starts is None else _page_of(page_starts, end - 1),
                    heading_trail=trail,
                    table_header=_table_header_of(text, ln, headers, start, end),
                )
            )
    return out


def structure_at(
    text: str, spans: Sequence[tuple[int, int]]
) -> list[tuple[tuple[str, ...], str | None]]:
    """``(heading_trail, table_header)`` of chunks already cut from ``text`` at ``spans``,
    as :func:`chunk_text` gives them (for chunks stored before these fields existed)."""
    ln = _scan_lines(text)
    heads = [i for i, lv in enumerate(ln.level) if lv]
    trails = _trails(text, ln, heads)
    h1 = next((i for i in heads if ln.level[i] == 1), None)
    title = "" if h1 is None else _heading_text(text, ln.starts[h1], ln.ends[h1])
    before: tuple[str, ...] = (title,) if title else ()
    head_starts = [ln.starts[i] for i in heads]
    headers = _table_headers(text, ln)
    out: list[tuple[tuple[str, ...], str | None]] = []
    for start, end in spans:
        k = bisect_right(head_starts, start) - 1
        trail = trails[k] if k >= 0 else before
        out.append((trail, _table_header_of(text, ln, headers, start, end)))
    return out
