"""Opening a PDF and the document pass: ``convert_pdf``.

Every page is read (``_pages``), scanned pages are read with OCR (``_scanned``), the body size
and emphasis style are measured over the whole document, and the Markdown is written
(``_markdown``). The package docstring says how the text is rebuilt.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from guaipeca.convert._budget import check_budget
from guaipeca.convert._limits import DEFAULT_MAX_IMAGE_PIXELS
from guaipeca.convert.ocr import OcrOptions
from guaipeca.convert.pdf._images import inline_image_problem
from guaipeca.convert.pdf._markdown import assign_levels, body_size, doc_style, page_units, render
from guaipeca.convert.pdf._pages import (
    Page,
    count_sizes,
    extract_page,
    has_content,
    mark_running,
    page_texts,
)
from guaipeca.convert.pdf._repair import vocabulary
from guaipeca.convert.pdf._scanned import no_text, ocr_pass, page_warnings
from guaipeca.convert.pdf._tables import Table
from guaipeca.errors import ConversionError, InvalidArgumentError

__all__ = ["PdfResult", "convert_pdf"]

# The converter's one logger name, as before it was split into modules.
log = logging.getLogger("guaipeca.convert.pdf")


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


def convert_pdf(
    data: bytes,
    *,
    name: str = "document.pdf",
    max_pages: int = 5000,
    ocr: OcrOptions | None = None,
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
) -> PdfResult:
    """Convert PDF bytes to Markdown with page offsets.

    ``name`` is only used in log messages. ``ocr`` reads pages without a text layer with
    Tesseract (None: no OCR), each rendered within ``max_image_pixels`` pixels (a page
    showing a larger image is not read: a warning says so). Deterministic: the same bytes
    give the same result.

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
        return _convert_document(fitz, doc, name, (max_pages, max_image_pixels), ocr)
    finally:
        with contextlib.suppress(Exception):
            doc.close()
        try:
            mupdf_notes = fitz.TOOLS.mupdf_warnings(reset=True)
            if mupdf_notes:
                log.debug("MuPDF notes for %s: %s", name, mupdf_notes.replace("\n", "; "))
        except Exception:  # pragma: no cover
            pass


def _read_page(
    fitz: Any,
    doc: Any,
    where: tuple[str, int],
    max_image_pixels: int,
    counters: tuple[Counter[float], list[int]],
    warnings: list[str],
) -> Page:
    """Page ``where[1]`` (0-based) of the file ``where[0]``, read; a page showing an inline
    image over the pixel limit is skipped unread (interpreting it decodes the image)."""
    name, pno = where
    check_budget()  # the file's time budget, between pages
    try:
        page = doc.load_page(pno)
        problem = inline_image_problem(doc, page, max_image_pixels)
        if problem:
            skipped = f"page {pno + 1} was skipped: {problem}"
            warnings.append(skipped)
            return Page(height=0.0, state="error", too_large=skipped)
        return extract_page(fitz, page, *counters, pno + 1)
    except Exception:
        log.debug("%s: page %d could not be read", name, pno + 1, exc_info=True)
        return Page(height=0.0, state="error")


def _convert_document(
    fitz: Any, doc: Any, name: str, limits: tuple[int, int], ocr: OcrOptions | None
) -> PdfResult:
    max_pages, max_image_pixels = limits
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
    table_failures: list[int] = []
    pages = [
        _read_page(fitz, doc, (name, pno), max_image_pixels, (sizes, table_failures), warnings)
        for pno in range(n_pages)
    ]

    mark_running([p for p in pages if p.state == "text"])
    for p in pages:
        # Only running heads and page numbers around a picture: a scanned or figure page.
        if p.state == "text" and p.images and not has_content(p):
            p.state = "image"
    ocr_pages = ocr_pass(fitz, doc, pages, ocr, (sizes, table_failures), warnings, max_image_pixels)
    text_pages = [p for p in pages if p.state == "text"]
    failed = [i + 1 for i, p in enumerate(pages) if p.state == "error" and not p.too_large]
    if not text_pages:
        if len(failed) == n_pages:
            raise ConversionError("not a valid PDF: no page could be read (damaged file?)")
        raise no_text(n_pages, ocr, pages)
    warnings += page_warnings(pages, failed, table_failures, ocr)

    for p in text_pages:  # running heads and page numbers do not vote for the body size
        for item in p.items:
            if not isinstance(item, Table):
                for ln in item:
                    if not ln.running:
                        count_sizes(ln, sizes)
    style = doc_style(text_pages, body_size(sizes))
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
    vocab = vocabulary(page_texts(text_pages))
    units = [page_units(p, style, vocab) for p in pages]
    assign_levels(units)
    text, starts = render(units)
    if not text.strip():  # nothing but running heads and page numbers
        raise no_text(n_pages, ocr, pages)
    return PdfResult(
        text=text, page_starts=starts, warnings=tuple(warnings), ocr_pages=tuple(ocr_pages)
    )
