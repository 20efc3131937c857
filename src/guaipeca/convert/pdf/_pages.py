"""The page model read from PyMuPDF: text lines with their fonts and places, tables, and the
running heads, stamps and page numbers that are not content.

Each page becomes a list of items in content-stream order: a text block (its lines) or a
:class:`~guaipeca.convert.pdf._tables.Table` placed where its first line was. Lines keep
their spans' sizes and bold/italic flags for heading detection (``_markdown``).
PyMuPDF objects are typed ``Any`` (see ``_document._pymupdf``).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from guaipeca.convert.pdf._repair import SPACES, clean
from guaipeca.convert.pdf._tables import Table, find_tables, may_have_table

# The converter's one logger name, as before it was split into modules.
log = logging.getLogger("guaipeca.convert.pdf")

_MARGIN_BAND = 0.12  # top/bottom fraction of the page where running heads live

_PAGE_NUMBER = re.compile(
    r"(?:(?:page|p\.|pg\.?|seite|página|pagina|pag\.)\s*)?[-–—]?\s*"
    r"(?:\d{1,5}|[ivxlcdm]{1,8})\s*[-–—]?"
    r"(?:\s*(?:of|/|de|von|di)\s*\d{1,5})?",
    re.IGNORECASE,
)
_CHAPTER_PAGE = re.compile(r"[A-Z]?\d{1,3}[-–.]\d{1,4}|[A-Z]{1,2}[-–]\d{1,5}")
_DIGITS = re.compile(r"\d+")
_LEADER = re.compile(r"\s*(?:\.\s?){5,}\s*")  # table-of-contents dot leaders in prose

_BOLD_FONT = ("bold", "black", "heavy", "semibold", "demi")
_ITALIC_FONT = ("italic", "oblique")


@dataclass(slots=True)
class _Span:
    text: str
    size: float
    bold: bool
    italic: bool


@dataclass(slots=True)
class Line:
    spans: list[_Span]
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float  # size carrying most of the line's characters
    bold: bool  # every visible character bold
    italic: bool  # every visible character italic
    vertical: bool = False  # rotated text (margin stamps, axis labels): never joined
    running: bool = False  # running head/foot or page number: dropped


@dataclass(slots=True)
class Page:
    height: float
    width: float = 0.0
    items: list[list[Line] | Table] = field(default_factory=list)
    state: str = "text"  # "text", "blank", "image" (no text layer) or "error"
    images: bool = False  # the page shows raster images
    ocr: bool = False  # the text was read with OCR
    over_budget: bool = False  # a scanned page left unread: over the OCR page budget
    too_large: str = ""  # why OCR could not render it within limits.max_image_pixels


def _make_line(raw: Any) -> Line | None:
    spans: list[_Span] = []
    for s in raw.get("spans", ()):
        t = clean(str(s.get("text", "")))
        if not t:
            continue
        font = str(s.get("font", "")).lower()
        flags = int(s.get("flags", 0))
        spans.append(
            _Span(
                text=t,
                size=float(s.get("size", 0.0)),
                bold=bool(flags & 16) or any(k in font for k in _BOLD_FONT),
                italic=bool(flags & 2) or any(k in font for k in _ITALIC_FONT),
            )
        )
    text = SPACES.sub(" ", _LEADER.sub(" ", "".join(s.text for s in spans))).strip()
    if not text:
        return None
    weight: Counter[float] = Counter()
    visible = [s for s in spans if s.text.strip()]
    for s in visible:
        weight[s.size] += len(s.text.strip())
    size = max(weight.items(), key=lambda kv: (kv[1], kv[0]))[0]
    x0, y0, x1, y1 = (float(v) for v in raw.get("bbox", (0.0, 0.0, 0.0, 0.0)))
    direction = raw.get("dir", (1.0, 0.0))
    return Line(
        spans=spans,
        text=text,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        size=size,
        bold=all(s.bold for s in visible),
        italic=all(s.italic for s in visible),
        vertical=abs(float(direction[1])) > 0.1,
    )


def extract_page(
    fitz: Any,
    page: Any,
    sizes: Counter[float],
    table_failures: list[int],
    pno: int,
    *,
    ocr: bool = False,
) -> Page:
    if page.rotation:
        try:
            page.remove_rotation()  # one coordinate system for text and tables
        except Exception:
            log.debug("page %d: could not remove rotation", pno, exc_info=True)
    height, width = float(page.rect.height), float(page.rect.width)
    flags = fitz.TEXT_PRESERVE_WHITESPACE | fitz.TEXT_MEDIABOX_CLIP
    raw_blocks = page.get_text("dict", flags=flags).get("blocks", [])
    blocks: list[list[Line]] = []
    for b in raw_blocks:
        if b.get("type", 0) != 0:
            continue
        lines = [ln for ln in (_make_line(r) for r in b.get("lines", ())) if ln is not None]
        # Rotated lines (margin stamps, axis labels) stand alone: they never join prose.
        flat = [ln for ln in lines if not ln.vertical]
        if flat:
            blocks.append(flat)
        blocks.extend([ln] for ln in lines if ln.vertical)
    images = bool(page.get_images(full=True))
    if not blocks:
        has_ink = images or bool(page.get_cdrawings())
        return Page(height=height, width=width, state="image" if has_ink else "blank")
    tables: list[Table] = []
    try:
        if not ocr and may_have_table(page):
            tables = find_tables(page, flags)
    except Exception as exc:  # PyMuPDF's table finder is heuristic code: never fatal
        log.warning(
            "page %d: table detection failed (%s); keeping its text", pno, type(exc).__name__
        )
        log.debug("table detection failure on page %d", pno, exc_info=True)
        table_failures.append(pno)
        tables = []

    out = Page(height=height, width=width, images=images)
    placed: set[int] = set()
    for lines in blocks:
        current: list[Line] = []
        for ln in lines:
            t = _table_at(tables, ln) if tables else None
            if t is None:
                current.append(ln)
                continue
            count_sizes(ln, sizes)  # text in tables counts for the body size too
            if t not in placed:
                if current:
                    out.items.append(current)
                    current = []
                out.items.append(tables[t])
                placed.add(t)
        if current:
            out.items.append(current)
    for t, table in enumerate(tables):
        if t not in placed:  # pragma: no cover - a table always holds some of the page text
            out.items.append(table)
    if tables:
        out.items = _titles_before_tables(out.items)
    return out


def _titles_before_tables(items: list[list[Line] | Table]) -> list[list[Line] | Table]:
    """Move text blocks drawn right above a table, but streamed after it, before it.

    Table titles are often written last into the content stream; read in stream order they
    would land after the table they name.
    """
    out = list(items)
    for table in [it for it in items if isinstance(it, Table)]:
        at = out.index(table)
        x0, y0, x1, _ = table.rect
        above = [
            it
            for it in out[at + 1 :]
            if not isinstance(it, Table)
            and max(ln.y1 for ln in it) <= y0 + 1
            and min(ln.x0 for ln in it) < x1
            and max(ln.x1 for ln in it) > x0
            and not any(ln.vertical for ln in it)
        ]
        if above:
            rest = [it for it in out[at + 1 :] if not any(it is a for a in above)]
            out = out[:at] + above + [table] + rest
    return out


def _table_at(tables: Sequence[Table], ln: Line) -> int | None:
    cx, cy = (ln.x0 + ln.x1) / 2, (ln.y0 + ln.y1) / 2
    for i, t in enumerate(tables):
        x0, y0, x1, y1 = t.rect
        if x0 - 1 <= cx <= x1 + 1 and y0 - 1 <= cy <= y1 + 1:
            return i
    return None


def count_sizes(ln: Line, sizes: Counter[float]) -> None:
    for s in ln.spans:
        n = len(s.text.strip())
        if n:
            sizes[round(s.size * 2) / 2] += n


def _band(ln: Line, height: float) -> str | None:
    if ln.vertical:
        return "side"
    if height <= 0:
        return None
    if ln.y1 <= height * _MARGIN_BAND:
        return "top"
    if ln.y0 >= height * (1 - _MARGIN_BAND):
        return "bottom"
    return None


def _is_page_number(text: str) -> bool:
    t = text.strip()
    return bool(_PAGE_NUMBER.fullmatch(t) or _CHAPTER_PAGE.fullmatch(t))


def mark_running(pages: list[Page]) -> None:
    """Flag running heads/feet (recurring margin lines) and bare page numbers."""
    seen: Counter[tuple[str, str]] = Counter()
    for page in pages:
        keys: set[tuple[str, str]] = set()
        for item in page.items:
            if isinstance(item, Table):
                continue
            for ln in item:
                band = _band(ln, page.height)
                if band is not None:
                    keys.add((band, _DIGITS.sub("#", ln.text.lower())))
        seen.update(keys)
    threshold = max(3, math.ceil(len(pages) / 2))
    for page in pages:
        for item in page.items:
            if isinstance(item, Table):
                continue
            for ln in item:
                band = _band(ln, page.height)
                if band is None:
                    continue
                key = (band, _DIGITS.sub("#", ln.text.lower()))
                in_margin = band != "side" or (
                    page.width > 0
                    and (
                        ln.x1 <= page.width * _MARGIN_BAND
                        or ln.x0 >= page.width * (1 - _MARGIN_BAND)
                    )
                )
                if (in_margin and _is_page_number(ln.text)) or (
                    len(pages) >= 3 and seen[key] >= threshold
                ):
                    ln.running = True


def page_texts(pages: list[Page]) -> Iterator[str]:
    """Every line's text and every table's Markdown, page by page."""
    for page in pages:
        for item in page.items:
            if isinstance(item, Table):
                yield item.markdown
            else:
                yield from (ln.text for ln in item)


def has_content(page: Page) -> bool:
    return any(isinstance(item, Table) or any(not ln.running for ln in item) for item in page.items)
