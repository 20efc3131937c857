"""Page lines → Markdown: body size, headings, paragraphs and lists, heading levels, and the
text with the offset where each page begins.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from guaipeca.convert.pdf._pages import Line, Page
from guaipeca.convert.pdf._repair import SPACES, Vocab, join
from guaipeca.convert.pdf._tables import Table

_HEADING_RATIO = 1.15  # a line this much larger than the body text is a heading
_EMPH_MIN_RATIO = 0.85  # bold/italic headings may be a little smaller than the body
_MAX_SIZE_HEADING_CHARS = 200
_MAX_EMPH_HEADING_CHARS = 120
_MAX_HEADING_LINES = 3

_BULLET_CHARS = "•●▪◦‣∙■□➢➤►\uf0b7\uf0a7\uf0d8\uf076"
_BULLET = re.compile(f"[{_BULLET_CHARS}]\\s*")
_BULLET_ONLY = re.compile(f"[{_BULLET_CHARS}]")
_ORDERED = re.compile(r"\d{1,3}[.)]\s")
_FOOTNOTE = re.compile(r"(?:\d{1,3}|[*†‡§¹²³⁴⁵⁶⁷⁸⁹])\s?[^\W\d_]")
_TERMINAL = re.compile(r"[.!?:;][\"'”’)\]]*$")
_RUN_IN_LABEL = re.compile(r"[A-Z][A-Z0-9 ,&/'’()\-–]{1,60}:")
_LETTER = re.compile(r"[^\W\d_]")
_ESCAPE_START = re.compile(r"#|>|\||```|~~~")


@dataclass(slots=True)
class Unit:
    kind: str  # "h" heading, "p" paragraph, "li" list item, "table"
    text: str
    tier: float = 0.0  # headings: size tier, 0 for emphasis headings
    block_start: bool = False  # first unit of a text block: may continue the paragraph before
    no_merge: bool = False  # rotated text: never continues or is continued


@dataclass(frozen=True, slots=True)
class Style:
    body: float  # the body text size
    bold: bool = True  # bold marks headings (False when most body text is bold)
    italic: bool = True


def body_size(sizes: Counter[float]) -> float:
    if not sizes:
        return 10.0
    return max(sizes.items(), key=lambda kv: (kv[1], -kv[0]))[0]


def doc_style(pages: list[Page], body: float) -> Style:
    """Bold (italic) only marks headings when most body-size text is not bold (italic)."""
    chars = bold = italic = 0
    for page in pages:
        for item in page.items:
            if isinstance(item, Table):
                continue
            for ln in item:
                for s in ln.spans:
                    n = len(s.text.strip())
                    if n and not ln.running and abs(s.size - body) < 0.5:
                        chars += n
                        bold += n if s.bold else 0
                        italic += n if s.italic else 0
    return Style(body=body, bold=bold <= chars / 2, italic=italic <= chars / 2)


def _starts_emph(ln: Line, style: str) -> bool:
    for s in ln.spans:
        if s.text.strip():
            return s.bold if style == "b" else s.italic
    return False


def _letters(text: str) -> int:
    return len(_LETTER.findall(text))


def _heading_text(text: str) -> str:
    return text.strip().rstrip(":").strip()


def _is_footnote(block: list[Line], body: float, height: float) -> bool:
    lines = [ln for ln in block if not ln.running]
    return (
        bool(lines)
        and not any(ln.vertical for ln in lines)
        and all(ln.size < body * 0.95 for ln in lines)
        and lines[0].y0 > height * 0.5
        and _FOOTNOTE.match(lines[0].text) is not None
    )


def page_units(page: Page, style: Style, vocab: Vocab) -> list[Unit]:
    # Footnotes are often streamed between two columns, splitting a paragraph: move them
    # to the end of the page.
    notes = [
        it
        for it in page.items
        if not isinstance(it, Table) and _is_footnote(it, style.body, page.height)
    ]
    items = [it for it in page.items if not any(it is n for n in notes)] + notes
    units: list[Unit] = []
    for item in items:
        if isinstance(item, Table):
            units.append(Unit("table", item.markdown))
            continue
        block = _block_units([ln for ln in item if not ln.running], style, vocab)
        if block:
            block[0].block_start = True
            if any(ln.vertical for ln in item):
                for u in block:
                    u.no_merge = True
            units.extend(block)
    # A paragraph cut by a column or block break continues in the next block when that
    # starts in lowercase and the paragraph had no final punctuation, or when the paragraph
    # stopped on a comma, a dash or an open parenthesis.
    merged: list[Unit] = []
    for u in units:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and u.block_start
            and u.kind == "p"
            and not (u.no_merge or prev.no_merge)
            and prev.kind in ("p", "li")
            and (
                (u.text[:1].islower() and not _TERMINAL.search(prev.text))
                or (prev.text[-1:] in (",", "–", "—", "-", "(", "/") and u.text[:1].isalnum())
            )
        ):
            prev.text = join(prev.text, u.text, vocab)
            continue
        merged.append(u)
    return merged


class _Block:
    """How one block's lines compare with the document's body text and the block's margins."""

    def __init__(self, lines: list[Line], style: Style) -> None:
        self.style = style
        self.body = style.body
        self.left = min(ln.x0 for ln in lines)
        self.right = max(ln.x1 for ln in lines)
        self.big = self.body * _HEADING_RATIO

    def tier(self, ln: Line) -> float:
        return round(ln.size * 2) / 2 if ln.size >= self.big and _letters(ln.text) >= 2 else 0.0

    def emph(self, ln: Line) -> str:
        if ln.size >= self.big:
            return ""
        if ln.size < self.body * _EMPH_MIN_RATIO:
            # Small bold capitals ending in a colon ("SUPPLEMENTARY INFORMATION:") still
            # label what follows.
            return "b" if ln.bold and _RUN_IN_LABEL.fullmatch(ln.text) else ""
        if ln.bold and self.style.bold:
            return "b"
        return "i" if ln.italic and self.style.italic else ""

    def breaks(self, prev: Line, ln: Line) -> bool:
        left, right = self.left, self.right
        height = max(prev.y1 - prev.y0, ln.y1 - ln.y0, 1.0)
        if ln.y0 < prev.y1 - 0.5 * height:  # side by side or back up: another column
            return True
        if ln.y0 - prev.y1 > 0.7 * height:  # vertical gap
            return True
        if _TERMINAL.search(prev.text):
            if ln.x0 - left > 0.6 * ln.size:  # indented first line
                return True
            if prev.x1 < right - 0.3 * (right - left):  # short last line
                return True
            if _ORDERED.match(ln.text):
                return True
        return False


def _block_units(lines: list[Line], style: Style, vocab: Vocab) -> list[Unit]:
    if not lines:
        return []
    block = _Block(lines, style)
    tier, emph, breaks = block.tier, block.emph, block.breaks
    units: list[Unit] = []
    cur: Unit | None = None
    prev: Line | None = None
    pending_bullet = False
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        para_start = cur is None or prev is None or breaks(prev, ln)
        # 1. larger than the body text: a heading (possibly on several lines)
        t = tier(ln)
        if t:
            j = i + 1
            while j < n and j - i < _MAX_HEADING_LINES + 1 and tier(lines[j]) == t:
                j += 1
            text = " ".join(x.text for x in lines[i:j])
            if len(text) <= _MAX_SIZE_HEADING_CHARS:
                units.append(Unit("h", _heading_text(text), tier=t))
                cur, prev, pending_bullet, i = None, lines[j - 1], False, j
                continue
        # 2. a bold or italic line (or a few) on its own
        kind = emph(ln)
        if kind and (para_start or (prev is not None and _TERMINAL.search(prev.text))):
            j = i + 1
            while j < n and j - i <= _MAX_HEADING_LINES and emph(lines[j]) == kind:
                j += 1
            text = " ".join(x.text for x in lines[i:j])
            if (
                j - i <= _MAX_HEADING_LINES
                and len(text) <= _MAX_EMPH_HEADING_CHARS
                and _letters(text) >= 2
                and text[-1] not in ".,;"
                and (j == n or not _starts_emph(lines[j], kind))
                and (kind == "b" or text[0].isupper())
            ):
                units.append(Unit("h", _heading_text(text)))
                cur, prev, pending_bullet, i = None, lines[j - 1], False, j
                continue
        # 3. a run-in label in bold capitals: "SUMMARY: The FAA proposes …"
        if para_start and not pending_bullet:
            split = _run_in(ln)
            if split is not None:
                label, rest = split
                units.append(Unit("h", _heading_text(label)))
                cur = Unit("p", _escape(rest))
                units.append(cur)
                prev, i = ln, i + 1
                continue
        # 4. lists and paragraphs
        if _BULLET_ONLY.fullmatch(ln.text):
            cur, pending_bullet, prev, i = None, True, ln, i + 1
            continue
        bullet = _BULLET.match(ln.text)
        if pending_bullet or bullet:
            body_text = ln.text[bullet.end() :] if bullet else ln.text
            cur = Unit("li", "- " + body_text)
            units.append(cur)
            pending_bullet = False
        elif para_start or cur is None or (cur.kind == "li" and _ORDERED.match(ln.text)):
            ordered = _ORDERED.match(ln.text) is not None
            cur = Unit("li" if ordered else "p", ln.text if ordered else _escape(ln.text))
            units.append(cur)
        else:
            cur.text = join(cur.text, ln.text, vocab)
        prev, i = ln, i + 1
    return units


def _run_in(ln: Line) -> tuple[str, str] | None:
    cut = next((k for k, s in enumerate(ln.spans) if s.text.strip() and not s.bold), None)
    if not cut:  # no bold lead-in, or the whole line is bold
        return None
    label = SPACES.sub(" ", "".join(s.text for s in ln.spans[:cut])).strip()
    if not _RUN_IN_LABEL.fullmatch(label) or _letters(label) < 2:
        return None
    rest = SPACES.sub(" ", "".join(s.text for s in ln.spans[cut:])).strip()
    if not rest:
        return None
    return label, rest


def _escape(text: str) -> str:
    """Keep a paragraph from being read as Markdown structure (heading, quote, table, fence)."""
    return "\\" + text if _ESCAPE_START.match(text) else text


def assign_levels(pages: list[list[Unit]]) -> None:
    flat = [(p, u) for p, units in enumerate(pages) for u in units]
    tiers = sorted({u.tier for _, u in flat if u.kind == "h" and u.tier > 0}, reverse=True)
    levels: dict[float, int] = {}
    if tiers:
        top = [k for k, (_, u) in enumerate(flat) if u.kind == "h" and u.tier == tiers[0]]
        first_text_page = next(p for p, units in enumerate(pages) if units)
        is_title = top == list(range(top[0], top[-1] + 1)) and all(
            flat[k][0] == first_text_page for k in top
        )
        rest = tiers
        if is_title:
            levels[tiers[0]] = 1
            rest = tiers[1:]
            title = flat[top[0]][1]
            for k in top[1:]:  # a title set on several lines or blocks is one heading
                title.text += " " + flat[k][1].text
                flat[k][1].kind = "drop"
        for n, t in enumerate(rest):
            levels[t] = min(6, 2 + n)
        emph_level = min(6, 2 + len(rest))
    else:
        emph_level = 2
    for units in pages:
        for u in units:
            if u.kind == "h":
                level = levels.get(u.tier, emph_level) if u.tier > 0 else emph_level
                u.text = "#" * level + " " + u.text
        units[:] = [u for u in units if u.kind != "drop"]


def render(pages: list[list[Unit]]) -> tuple[str, tuple[int, ...]]:
    parts: list[str] = []
    length = 0
    starts: list[int] = []
    for units in pages:
        chunks: list[str] = []
        for k, u in enumerate(units):
            if k:
                tight = u.kind == "li" and units[k - 1].kind == "li"
                chunks.append("\n" if tight else "\n\n")
            chunks.append(u.text)
        page_text = "".join(chunks)
        if not page_text:
            starts.append(-1)  # an empty page begins where the next page with text begins
            continue
        if parts:
            parts.append("\n\n")
            length += 2
        starts.append(length)
        parts.append(page_text)
        length += len(page_text)
    following = length
    for i in range(len(starts) - 1, -1, -1):
        if starts[i] < 0:
            starts[i] = following
        following = starts[i]
    if parts:
        parts.append("\n")
    text = "".join(parts)
    if starts:
        starts[0] = 0
    return text, tuple(starts)
