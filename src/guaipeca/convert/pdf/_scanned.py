"""Pages without a text layer: the OCR pass over scanned pages and the warnings about pages.

A page with no text, or only running heads, that shows images or drawings is a scanned page.
With OCR on, Tesseract reads it (``guaipeca.convert.ocr``), up to ``ocr.max_pages`` per file,
and the page it returns goes through the same extraction as a born-digital page. The
warnings name the pages left unread (no OCR, over the budget, damaged, failed table
detection) as ranges: "pages 2-4, 7".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from guaipeca.convert._budget import budget_left, check_budget
from guaipeca.convert.ocr import OcrOptions, ocr_page, render_dpi
from guaipeca.convert.pdf._images import image_problem
from guaipeca.convert.pdf._pages import Page, extract_page, mark_running
from guaipeca.errors import ConversionError, ConversionTimeoutError, NoTextError, TooLargeError

# The converter's one logger name, as before it was split into modules.
log = logging.getLogger("guaipeca.convert.pdf")


def page_warnings(
    pages: list[Page], failed: list[int], table_failures: list[int], ocr: OcrOptions | None
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


def no_text(n_pages: int, ocr: OcrOptions | None, pages: Sequence[Page] = ()) -> ConversionError:
    """Why a document has no text: the first page too large to OCR, if any, else no text
    layer and no OCR text."""
    too_large = next((p.too_large for p in pages if p.too_large), "")
    if too_large:
        return TooLargeError(too_large)
    where = "on its only page" if n_pages == 1 else f"on any of its {n_pages} pages"
    why = "OCR found no text" if ocr is not None and ocr.engine() else _NO_OCR
    return NoTextError(f"no text layer {where} (a scanned document?) and {why}")


def ocr_pass(
    fitz: Any,
    doc: Any,
    pages: list[Page],
    ocr: OcrOptions | None,
    counters: tuple[Counter[float], list[int]],
    warnings: list[str],
    max_pixels: int,
) -> list[int]:
    """Read the scanned pages with OCR, up to the budget, each rendered within
    ``max_pixels`` (limits.max_image_pixels; a page that cannot be is left unread with a
    warning); returns the pages read."""
    language = ocr.engine() if ocr is not None else None
    scanned = [i for i, p in enumerate(pages) if p.state == "image"]
    if ocr is None or language is None or not scanned:
        return []
    done: list[int] = []
    slow: list[int] = []
    for n, i in enumerate(scanned):
        if n >= ocr.max_pages:
            pages[i].over_budget = True
            continue
        check_budget()  # the file's time budget, between pages
        try:
            page = doc.load_page(i)
            problem = image_problem(page, max_pixels)
            dpi = ocr.dpi
            if problem is None:
                dpi, problem = render_dpi(page, ocr.dpi, max_pixels)
            if problem:
                pages[i].over_budget = True  # reported here, not as "OCR found no text"
                pages[i].too_large = f"page {i + 1} was not read with OCR: {problem}"
                warnings.append(pages[i].too_large)
                continue
            if dpi < ocr.dpi:
                log.debug("page %d: OCR at %d dpi (limits.max_image_pixels)", i + 1, dpi)
            read_doc = ocr_page(page, language, dpi, budget_left(ocr.page_timeout_seconds))
            try:
                read = extract_page(fitz, read_doc.load_page(0), *counters, i + 1, ocr=True)
            finally:
                read_doc.close()
        except RuntimeError as exc:
            if "timeout" not in str(exc).lower():
                log.warning("page %d: OCR failed", i + 1, exc_info=True)
                continue
            check_budget()  # the file's budget ran out while Tesseract read the page
            pages[i].over_budget = True  # reported below, not as "OCR found no text"
            slow.append(i + 1)
            continue
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
    if slow:
        many = len(slow) > 1
        why = (
            f"{'pages' if many else 'page'} {_page_list(slow)} "
            f"{'were' if many else 'was'} not read with OCR: Tesseract took longer than "
            f"ocr.page_timeout_seconds ({ocr.page_timeout_seconds:g} s)"
        )
        if not any(p.state == "text" for p in pages):
            raise ConversionTimeoutError(f"no text layer, and {why}")
        warnings.append(why)
    if done:
        mark_running([p for p in pages if p.state == "text"])
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
