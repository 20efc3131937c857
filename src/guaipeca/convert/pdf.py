"""PDF → Markdown with PyMuPDF: headings, stitched paragraphs, tables and page offsets.

PyMuPDF gives each text span with its font size and flags, which is what heading detection
needs; ``find_tables()`` finds ruled tables. The result is Markdown for the chunker
(``#``/``##`` headings, ``| … |`` tables kept atomic) plus the offset where each page begins,
so every chunk can cite its page(s).

How the text is rebuilt (tuned on the files in ``shared/data/docs``):

* **Running heads, stamps and page numbers are dropped**: a line in the top or bottom 12 %
  of the page, or a rotated line anywhere, whose text (digits ignored) recurs on at least
  half of the pages (3 or more); and bare page numbers ("12", "Page 3 of 9", "7-45", "B-12")
  in the margins.
* **Body size** is the font size carrying the most characters (running heads excluded). A
  line at least 1.15x that size is a heading; distinct heading sizes are levels, biggest
  first. The biggest becomes the ``#`` title only if it occurs once (one run of lines) on
  the first page with text; otherwise the sizes map to ``##``, ``###``, ...
* **Emphasis headings**: a run of 1-3 lines, all bold or all italic, about body size
  (>= 0.85x), at most 120 characters, starting a paragraph, not ending in ``.``, ``,`` or
  ``;`` (italic ones must start with a capital), whose emphasis does not run on into the
  next line, is a heading one level below the size-based ones (``##`` when there are none).
  Bold capitals ending in a colon are headings at any size, and as a run-in label ("SUMMARY:
  The FAA …") they become a heading followed by the paragraph. When most body text is bold
  (italic), bold (italic) marks nothing.
* **Paragraphs**: wrapped lines are joined with a space. A word split by a hyphen at a line
  end is joined without it when both sides are lowercase, unless the document writes that
  compound with a hyphen elsewhere (``non-normal``, ``work-hours``), the first part is a
  prefix usually hyphenated (``self-``, ``non-``) or it is part of an address. A dash ending
  a line after a non-space (``737–`` / ``9``), ``/`` and ``@`` (URLs) join without a space.
  A paragraph continues into the next block (the next column) when it has no final
  punctuation and the block starts in lowercase, or when it stopped on a comma, a dash or
  an open parenthesis. Blocks keep PyMuPDF's order, the content-stream order, which reads
  multi-column pages column by column (sorting by position would interleave the columns);
  footnotes (small text starting with a marker in the lower half) move to the page end.
* **Tables** (``find_tables``, run only when the page's vector graphics could form a grid):
  rows whose cells hold several aligned lines (records without rules between them) are split
  back into one row per line using the word positions; a line filling a single cell
  continues the row above. Empty columns are dropped, leading title rows are left to the
  running text, dot leaders are removed. The table's area is removed from the running text
  and the Markdown table is placed where its first line was (text drawn just above a table
  but streamed after it, such as its title, is moved before it).

Pages are joined with a blank line; ``page_starts[i]`` is where page ``i + 1`` begins (an
empty page begins where the next page with text does). Pages without text, or with only
running heads, that show images or drawings are scanned pages: with OCR on (``ocr``, see
``ocr.py``) they are read with Tesseract, up to a page budget per file, and rebuilt by the same
layout pass; otherwise, or past the budget, they are reported in ``warnings`` (blank pages are
not). A document with no text at all, even after OCR, is refused.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from guaipeca.convert._pdf_tables import Table, find_tables, may_have_table
from guaipeca.convert._pdf_text import SPACES, Vocab, clean, join, vocabulary
from guaipeca.convert.ocr import OcrOptions, ocr_page
from guaipeca.errors import ConversionError, InvalidArgumentError

__all__ = ["PdfResult", "convert_pdf"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PdfResult:
    """A converted PDF.

    ``text`` is Markdown with LF line ends only. ``page_starts[i]`` is the character offset in
    ``text`` where page ``i + 1`` begins (one entry per page, ascending, the first is 0).
    ``warnings`` are one-line notes for the user (pages without a text layer, repairs, …).
    ``ocr_pages`` are the 1-based pages whose text was read with OCR.
    """

    text: str
    page_starts: tuple[int, ...]
    warnings: tuple[str, ...]
    ocr_pages: tuple[int, ...] = ()


# --------------------------------------------------------------------------- tunables
_HEADING_RATIO = 1.15  # a line this much larger than the body text is a heading
_EMPH_MIN_RATIO = 0.85  # bold/italic headings may be a little smaller than the body
_MARGIN_BAND = 0.12  # top/bottom fraction of the page where running heads live
_MAX_SIZE_HEADING_CHARS = 200
_MAX_EMPH_HEADING_CHARS = 120
_MAX_HEADING_LINES = 3

# --------------------------------------------------------------------------- patterns
_BULLET_CHARS = "•●▪◦‣∙■□➢➤►\uf0b7\uf0a7\uf0d8\uf076"
_BULLET = re.compile(f"[{_BULLET_CHARS}]\\s*")
_BULLET_ONLY = re.compile(f"[{_BULLET_CHARS}]")
_ORDERED = re.compile(r"\d{1,3}[.)]\s")
_FOOTNOTE = re.compile(r"(?:\d{1,3}|[*†‡§¹²³⁴⁵⁶⁷⁸⁹])\s?[^\W\d_]")
_TERMINAL = re.compile(r"[.!?:;][\"'”’)\]]*$")
_PAGE_NUMBER = re.compile(
    r"(?:(?:page|p\.|pg\.?|seite|página|pagina|pag\.)\s*)?[-–—]?\s*"
    r"(?:\d{1,5}|[ivxlcdm]{1,8})\s*[-–—]?"
    r"(?:\s*(?:of|/|de|von|di)\s*\d{1,5})?",
    re.IGNORECASE,
)
_CHAPTER_PAGE = re.compile(r"[A-Z]?\d{1,3}[-–.]\d{1,4}|[A-Z]{1,2}[-–]\d{1,5}")
_RUN_IN_LABEL = re.compile(r"[A-Z][A-Z0-9 ,&/'’()\-–]{1,60}:")
_DIGITS = re.compile(r"\d+")
_LETTER = re.compile(r"[^\W\d_]")
_ESCAPE_START = re.compile(r"#|>|\||```|~~~")
_LEADER = re.compile(r"\s*(?:\.\s?){5,}\s*")  # table-of-contents dot leaders in prose

_BOLD_FONT = ("bold", "black", "heavy", "semibold", "demi")
_ITALIC_FONT = ("italic", "oblique")


# --------------------------------------------------------------------------- pymupdf
_FITZ: Any = None


def _pymupdf() -> Any:
    """Import PyMuPDF on first use and silence its console output.

    Typed as ``Any`` on purpose: PyMuPDF's annotations are partial and its calls would all
    need ignores under ``mypy --strict``; everything it returns is read defensively here.
    MuPDF prints errors about damaged files to stdout, which would corrupt the MCP stdio
    stream, and find_tables prints an advertisement once; both are switched off (process
    wide, as PyMuPDF only offers it that way). Its warnings remain in its own store.
    """
    global _FITZ
    if _FITZ is None:
        try:
            mod = importlib.import_module("pymupdf")
        except ImportError:
            raise ConversionError(
                "PDF support needs PyMuPDF, which is not installed (pip install pymupdf)"
            ) from None
        try:
            mod.TOOLS.mupdf_display_errors(False)
            mod.TOOLS.mupdf_display_warnings(False)
            if hasattr(mod, "no_recommend_layout"):
                mod.no_recommend_layout()
        except Exception:  # pragma: no cover - only cosmetic
            log.debug("could not silence PyMuPDF messages", exc_info=True)
        _FITZ = mod
    return _FITZ


# --------------------------------------------------------------------------- data model
@dataclass(slots=True)
class _Span:
    text: str
    size: float
    bold: bool
    italic: bool


@dataclass(slots=True)
class _Line:
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
class _Page:
    height: float
    width: float = 0.0
    items: list[list[_Line] | Table] = field(default_factory=list)
    state: str = "text"  # "text", "blank", "image" (no text layer) or "error"
    images: bool = False  # the page shows raster images
    ocr: bool = False  # the text was read with OCR
    over_budget: bool = False  # a scanned page left unread: over the OCR page budget


@dataclass(slots=True)
class _Unit:
    kind: str  # "h" heading, "p" paragraph, "li" list item, "table"
    text: str
    tier: float = 0.0  # headings: size tier, 0 for emphasis headings
    block_start: bool = False  # first unit of a text block: may continue the paragraph before
    no_merge: bool = False  # rotated text: never continues or is continued


@dataclass(frozen=True, slots=True)
class _Style:
    body: float  # the body text size
    bold: bool = True  # bold marks headings (False when most body text is bold)
    italic: bool = True


# --------------------------------------------------------------------------- public API
def convert_pdf(
    data: bytes,
    *,
    name: str = "document.pdf",
    max_pages: int = 5000,
    ocr: OcrOptions | None = None,
) -> PdfResult:
    """Convert PDF bytes to Markdown with page offsets.

    ``name`` is only used in log messages. ``ocr`` reads pages without a text layer with
    Tesseract (None: no OCR). Deterministic: the same bytes give the same result.

    Raises:
        ConversionError: not a PDF, damaged beyond repair, encrypted with a password, more
            no page has a text layer (scanned; no OCR). The
            message is one line meant for the user.
        InvalidArgumentError: ``max_pages`` is less than 1.
    """
    if max_pages < 1:
        raise InvalidArgumentError(f"max_pages must be at least 1, got {max_pages}")
    if b"%PDF" not in data[:1024]:
        raise ConversionError("not a PDF file (no %PDF header)")
    fitz = _pymupdf()
    with contextlib.suppress(Exception):  # diagnostics only
        fitz.TOOLS.reset_mupdf_warnings()
    try:
        doc = fitz.open(stream=data, filetype="pdf")
    except Exception:
        raise ConversionError("not a valid PDF: the file is damaged beyond repair") from None
    try:
        return _convert_document(fitz, doc, name, max_pages, ocr)
    finally:
        with contextlib.suppress(Exception):
            doc.close()
        try:
            mupdf_notes = fitz.TOOLS.mupdf_warnings(reset=True)
            if mupdf_notes:
                log.debug("MuPDF notes for %s: %s", name, mupdf_notes.replace("\n", "; "))
        except Exception:  # pragma: no cover
            pass


def _convert_document(
    fitz: Any, doc: Any, name: str, max_pages: int, ocr: OcrOptions | None
) -> PdfResult:
    if doc.needs_pass:
        raise ConversionError(
            "the PDF is encrypted with a password; save an unprotected copy to index it"
        )
    try:
        n_pages = int(doc.page_count)
    except Exception:
        raise ConversionError("not a valid PDF: the file is damaged beyond repair") from None
    if n_pages == 0:
        raise ConversionError("not a valid PDF: no readable pages (truncated or damaged file?)")
    warnings: list[str] = []
    if n_pages > max_pages:
        # A big PDF is read up to the limit (limits.max_pages), not refused.
        warnings.append(
            f"read the first {max_pages:,} of {n_pages:,} pages: the limit is "
            f"limits.max_pages ({max_pages:,})"
        )
        n_pages = max_pages
    if getattr(doc, "is_repaired", False):
        warnings.append("the PDF is damaged and was repaired; some text may be missing")

    sizes: Counter[float] = Counter()  # characters per font size (rounded to 0.5 pt)
    pages: list[_Page] = []
    table_failures: list[int] = []
    for pno in range(n_pages):
        try:
            page = doc.load_page(pno)
            pages.append(_extract_page(fitz, page, sizes, table_failures, pno + 1))
        except Exception:
            log.debug("%s: page %d could not be read", name, pno + 1, exc_info=True)
            pages.append(_Page(height=0.0, state="error"))

    _mark_running([p for p in pages if p.state == "text"])
    for p in pages:
        # Only running heads and page numbers around a picture: a scanned or figure page.
        if p.state == "text" and p.images and not _has_content(p):
            p.state = "image"
    ocr_pages = _ocr_pass(fitz, doc, pages, ocr, (sizes, table_failures), warnings)
    text_pages = [p for p in pages if p.state == "text"]
    failed = [i + 1 for i, p in enumerate(pages) if p.state == "error"]
    if not text_pages:
        if len(failed) == n_pages:
            raise ConversionError("not a valid PDF: no page could be read (damaged file?)")
        raise _no_text(n_pages, ocr)
    warnings += _page_warnings(pages, failed, table_failures, ocr)

    for p in text_pages:  # running heads and page numbers do not vote for the body size
        for item in p.items:
            if not isinstance(item, Table):
                for ln in item:
                    if not ln.running:
                        _count_sizes(ln, sizes)
    style = _doc_style(text_pages, _body_size(sizes))
    total = sum(sizes.values())
    undecoded = sum(
        ln.text.count("\ufffd")
        for p in text_pages
        for item in p.items
        if not isinstance(item, Table)
        for ln in item
    )
    if total and undecoded > 0.05 * total:
        warnings.append(
            "some text could not be decoded (fonts without a Unicode mapping); searches may miss it"
        )
    vocab = vocabulary(_texts(text_pages))
    page_units = [_page_units(p, style, vocab) for p in pages]
    _assign_levels(page_units)
    text, starts = _render(page_units)
    if not text.strip():  # nothing but running heads and page numbers
        raise _no_text(n_pages, ocr)
    return PdfResult(
        text=text, page_starts=starts, warnings=tuple(warnings), ocr_pages=tuple(ocr_pages)
    )


def _page_warnings(
    pages: list[_Page], failed: list[int], table_failures: list[int], ocr: OcrOptions | None
) -> list[str]:
    """What the report says about pages without text, unreadable pages and failed tables."""
    warnings: list[str] = []
    scanned = [i + 1 for i, p in enumerate(pages) if p.state == "image" and not p.over_budget]
    if scanned:
        many = len(scanned) > 1
        why = "OCR found no text" if ocr is not None and ocr.engine() else _NO_OCR
        warnings.append(
            f"{'pages' if many else 'page'} {_page_list(scanned)} "
            f"{'have' if many else 'has'} no text layer (scanned "
            f"{'images' if many else 'image'}?) and {why}; "
            f"{'they were' if many else 'it was'} not indexed"
        )
    if failed:
        many = len(failed) > 1
        warnings.append(
            f"{'pages' if many else 'page'} {_page_list(failed)} could not be read "
            f"(damaged?); {'they were' if many else 'it was'} skipped"
        )
    if table_failures:
        warnings.append(
            f"table detection failed on page{'s' if len(table_failures) > 1 else ''} "
            f"{_page_list(table_failures)}; tables there are kept as plain text"
        )
    return warnings


_NO_OCR = "OCR is off or Tesseract is not installed"


def _no_text(n_pages: int, ocr: OcrOptions | None) -> ConversionError:
    where = "on its only page" if n_pages == 1 else f"on any of its {n_pages} pages"
    why = "OCR found no text" if ocr is not None and ocr.engine() else _NO_OCR
    return ConversionError(f"no text layer {where} (a scanned document?) and {why}")


def _ocr_pass(
    fitz: Any,
    doc: Any,
    pages: list[_Page],
    ocr: OcrOptions | None,
    counters: tuple[Counter[float], list[int]],
    warnings: list[str],
) -> list[int]:
    """Read the scanned pages with OCR, up to the budget; returns the pages read."""
    language = ocr.engine() if ocr is not None else None
    scanned = [i for i, p in enumerate(pages) if p.state == "image"]
    if ocr is None or language is None or not scanned:
        return []
    done: list[int] = []
    for n, i in enumerate(scanned):
        if n >= ocr.max_pages:
            pages[i].over_budget = True
            continue
        try:
            read_doc = ocr_page(doc.load_page(i), language, ocr.dpi)
            try:
                read = _extract_page(fitz, read_doc.load_page(0), *counters, i + 1, ocr=True)
            finally:
                read_doc.close()
        except Exception:
            log.warning("page %d: OCR failed", i + 1, exc_info=True)
            continue
        if read.state == "text":
            read.ocr = True
            pages[i] = read
            done.append(i + 1)
    over = [i + 1 for i in scanned[ocr.max_pages :]]
    if over:
        many = len(over) > 1
        warnings.append(
            f"{'pages' if many else 'page'} {_page_list(over)} "
            f"{'were' if many else 'was'} not read with OCR: over the budget of "
            f"{ocr.max_pages} page{'s' if ocr.max_pages != 1 else ''} per file (ocr.max_pages)"
        )
    if done:
        _mark_running([p for p in pages if p.state == "text"])
    return done


def _page_list(numbers: Sequence[int]) -> str:
    """``[2, 3, 4, 7]`` → ``"2-4, 7"``."""
    parts: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        parts.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ", ".join(parts)


# --------------------------------------------------------------------------- extraction
def _make_line(raw: Any) -> _Line | None:
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
    return _Line(
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


def _extract_page(
    fitz: Any,
    page: Any,
    sizes: Counter[float],
    table_failures: list[int],
    pno: int,
    *,
    ocr: bool = False,
) -> _Page:
    if page.rotation:
        try:
            page.remove_rotation()  # one coordinate system for text and tables
        except Exception:
            log.debug("page %d: could not remove rotation", pno, exc_info=True)
    height, width = float(page.rect.height), float(page.rect.width)
    flags = fitz.TEXT_PRESERVE_WHITESPACE | fitz.TEXT_MEDIABOX_CLIP
    raw_blocks = page.get_text("dict", flags=flags).get("blocks", [])
    blocks: list[list[_Line]] = []
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
        return _Page(height=height, width=width, state="image" if has_ink else "blank")
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

    out = _Page(height=height, width=width, images=images)
    placed: set[int] = set()
    for lines in blocks:
        current: list[_Line] = []
        for ln in lines:
            t = _table_at(tables, ln) if tables else None
            if t is None:
                current.append(ln)
                continue
            _count_sizes(ln, sizes)  # text in tables counts for the body size too
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


def _titles_before_tables(items: list[list[_Line] | Table]) -> list[list[_Line] | Table]:
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


def _table_at(tables: Sequence[Table], ln: _Line) -> int | None:
    cx, cy = (ln.x0 + ln.x1) / 2, (ln.y0 + ln.y1) / 2
    for i, t in enumerate(tables):
        x0, y0, x1, y1 = t.rect
        if x0 - 1 <= cx <= x1 + 1 and y0 - 1 <= cy <= y1 + 1:
            return i
    return None


# --------------------------------------------------------------------------- document analysis
def _count_sizes(ln: _Line, sizes: Counter[float]) -> None:
    for s in ln.spans:
        n = len(s.text.strip())
        if n:
            sizes[round(s.size * 2) / 2] += n


def _body_size(sizes: Counter[float]) -> float:
    if not sizes:
        return 10.0
    return max(sizes.items(), key=lambda kv: (kv[1], -kv[0]))[0]


def _doc_style(pages: list[_Page], body: float) -> _Style:
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
    return _Style(body=body, bold=bold <= chars / 2, italic=italic <= chars / 2)


def _band(ln: _Line, height: float) -> str | None:
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


def _mark_running(pages: list[_Page]) -> None:
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


def _texts(pages: list[_Page]) -> Iterator[str]:
    """Every line's text and every table's Markdown, page by page."""
    for page in pages:
        for item in page.items:
            if isinstance(item, Table):
                yield item.markdown
            else:
                yield from (ln.text for ln in item)


def _has_content(page: _Page) -> bool:
    return any(isinstance(item, Table) or any(not ln.running for ln in item) for item in page.items)


# --------------------------------------------------------------------------- text rebuilding
def _starts_emph(ln: _Line, style: str) -> bool:
    for s in ln.spans:
        if s.text.strip():
            return s.bold if style == "b" else s.italic
    return False


def _letters(text: str) -> int:
    return len(_LETTER.findall(text))


def _heading_text(text: str) -> str:
    return text.strip().rstrip(":").strip()


def _is_footnote(block: list[_Line], body: float, height: float) -> bool:
    lines = [ln for ln in block if not ln.running]
    return (
        bool(lines)
        and not any(ln.vertical for ln in lines)
        and all(ln.size < body * 0.95 for ln in lines)
        and lines[0].y0 > height * 0.5
        and _FOOTNOTE.match(lines[0].text) is not None
    )


def _page_units(page: _Page, style: _Style, vocab: Vocab) -> list[_Unit]:
    # Footnotes are often streamed between two columns, splitting a paragraph: move them
    # to the end of the page.
    notes = [
        it
        for it in page.items
        if not isinstance(it, Table) and _is_footnote(it, style.body, page.height)
    ]
    items = [it for it in page.items if not any(it is n for n in notes)] + notes
    units: list[_Unit] = []
    for item in items:
        if isinstance(item, Table):
            units.append(_Unit("table", item.markdown))
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
    merged: list[_Unit] = []
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

    def __init__(self, lines: list[_Line], style: _Style) -> None:
        self.style = style
        self.body = style.body
        self.left = min(ln.x0 for ln in lines)
        self.right = max(ln.x1 for ln in lines)
        self.big = self.body * _HEADING_RATIO

    def tier(self, ln: _Line) -> float:
        return round(ln.size * 2) / 2 if ln.size >= self.big and _letters(ln.text) >= 2 else 0.0

    def emph(self, ln: _Line) -> str:
        if ln.size >= self.big:
            return ""
        if ln.size < self.body * _EMPH_MIN_RATIO:
            # Small bold capitals ending in a colon ("SUPPLEMENTARY INFORMATION:") still
            # label what follows.
            return "b" if ln.bold and _RUN_IN_LABEL.fullmatch(ln.text) else ""
        if ln.bold and self.style.bold:
            return "b"
        return "i" if ln.italic and self.style.italic else ""

    def breaks(self, prev: _Line, ln: _Line) -> bool:
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


def _block_units(lines: list[_Line], style: _Style, vocab: Vocab) -> list[_Unit]:
    if not lines:
        return []
    block = _Block(lines, style)
    tier, emph, breaks = block.tier, block.emph, block.breaks
    units: list[_Unit] = []
    cur: _Unit | None = None
    prev: _Line | None = None
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
                units.append(_Unit("h", _heading_text(text), tier=t))
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
                units.append(_Unit("h", _heading_text(text)))
                cur, prev, pending_bullet, i = None, lines[j - 1], False, j
                continue
        # 3. a run-in label in bold capitals: "SUMMARY: The FAA proposes …"
        if para_start and not pending_bullet:
            split = _run_in(ln)
            if split is not None:
                label, rest = split
                units.append(_Unit("h", _heading_text(label)))
                cur = _Unit("p", _escape(rest))
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
            cur = _Unit("li", "- " + body_text)
            units.append(cur)
            pending_bullet = False
        elif para_start or cur is None or (cur.kind == "li" and _ORDERED.match(ln.text)):
            ordered = _ORDERED.match(ln.text) is not None
            cur = _Unit("li" if ordered else "p", ln.text if ordered else _escape(ln.text))
            units.append(cur)
        else:
            cur.text = join(cur.text, ln.text, vocab)
        prev, i = ln, i + 1
    return units


def _run_in(ln: _Line) -> tuple[str, str] | None:
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


# --------------------------------------------------------------------------- levels, output
def _assign_levels(pages: list[list[_Unit]]) -> None:
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


def _render(pages: list[list[_Unit]]) -> tuple[str, tuple[int, ...]]:
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
