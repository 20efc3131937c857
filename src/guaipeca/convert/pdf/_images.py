"""The declared sizes of the images a page shows, read without decoding them.

Rendering a page for OCR decodes each image it shows whole, at its declared size, and
MuPDF decodes an inline image (``BI … ID … EI`` in a content stream) as soon as the page is
interpreted at all, for its text too. A PDF of 2 MB can declare a 46,300 x 46,300 image
(2 GB decoded), so both kinds are measured against ``limits.max_image_pixels`` first:
image objects from the page's resources (``get_images``: their dictionaries only), inline
images by reading the ``/W`` and ``/H`` of each ``BI`` dictionary in the page's content
stream and its form XObjects' streams (not in patterns, Type 3 glyphs or annotations).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from guaipeca.convert._limits import pixel_problem

log = logging.getLogger("guaipeca.convert.pdf")

# An inline image's dictionary: BI, keys and values, ID (bounded: real ones are short).
_INLINE = re.compile(rb"(?<![^\s\[\]()<>{}/%])BI\s(.{0,4000}?)\sID[\s\x00]", re.DOTALL)
_WIDTH = re.compile(rb"/(?:W|Width)\s+(\d{1,12})(?![\d.])")
_HEIGHT = re.compile(rb"/(?:H|Height)\s+(\d{1,12})(?![\d.])")


def _inline_sizes(content: bytes) -> Iterator[tuple[int, int]]:
    for match in _INLINE.finditer(content):
        head = match.group(1)
        width, height = _WIDTH.search(head), _HEIGHT.search(head)
        if width and height:
            yield int(width.group(1)), int(height.group(1))


def _contents(doc: Any, page: Any) -> Iterator[bytes]:
    """The page's content stream, then each of its form XObjects' streams."""
    yield bytes(page.read_contents() or b"")
    for xobject in page.get_xobjects():
        try:
            yield bytes(doc.xref_stream(xobject[0]) or b"")
        except Exception:
            log.debug("form xobject %s unreadable", xobject[0], exc_info=True)


def inline_image_problem(doc: Any, page: Any, max_pixels: int) -> str | None:
    """Why the page cannot be interpreted at all: an inline image it shows declares more
    than ``max_pixels`` (MuPDF would decode it whole), or None."""
    for content in _contents(doc, page):
        if b"BI" not in content:
            continue
        for width, height in _inline_sizes(content):
            problem = pixel_problem(width, height, max_pixels, "an inline image on the page")
            if problem:
                return problem
    return None


def image_problem(page: Any, max_pixels: int) -> str | None:
    """Why the page cannot be rendered: an image object it shows declares more than
    ``max_pixels``, or None (inline images: :func:`inline_image_problem`)."""
    for image in page.get_images(full=True):
        problem = pixel_problem(int(image[2]), int(image[3]), max_pixels, "an image on the page")
        if problem:
            return problem
    return None
