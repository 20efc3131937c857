"""Source files → canonical Markdown text: the one public entry of the conversion layer.

``convert_file`` / ``convert_bytes`` dispatch on the file extension (case-insensitive) to
the text (Markdown, plain, reStructuredText, AsciiDoc), PDF, Office/HTML, spreadsheet and
image (OCR) converters, each imported only when needed. A ``.txt`` file whose content is
reStructuredText (``rst.looks_like_rst``) is converted as RST.
Every failure is a :class:`~guaipeca.errors.ConversionError` whose message is one line for
a user ("file is 52.4 MB; the limit is 50.0 MB", "not UTF-8 text (...); save it as UTF-8",
"DOCX expands to more than 200 MB (zip bomb?)"); it never holds a traceback nor any path
but the file's own name. The text is LF-only, so chunk offsets index it directly. Nothing
here touches the network.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guaipeca.config import SUPPORTED_EXTENSIONS
from guaipeca.convert._budget import DEFAULT_CONVERT_TIMEOUT_SECONDS, check_budget, time_budget
from guaipeca.convert._limits import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_IMAGE_PIXELS,
    FileLimits,
    check_image_file,
    first_line,
    format_size,
)
from guaipeca.convert.ocr import IMAGE_EXTENSIONS, OcrOptions
from guaipeca.errors import AbandonedError, ConversionError, NoTextError

__all__ = [
    "DEFAULT_CONVERT_TIMEOUT_SECONDS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_IMAGE_PIXELS",
    "IMAGE_EXTENSIONS",
    "NO_OCR_FOR_IMAGES",
    "SUPPORTED_EXTENSIONS",
    "Converted",
    "FileLimits",
    "OcrOptions",
    "convert_bytes",
    "convert_file",
]

#: Why an image cannot be read: it has no text but what OCR finds in it.
NO_OCR_FOR_IMAGES = (
    "an image is read with OCR, which is off or not installed "
    "(Debian: apt install tesseract-ocr tesseract-ocr-eng)"
)

_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".rst": "rst",
    ".adoc": "asciidoc",
    ".asciidoc": "asciidoc",
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
}


@dataclass(frozen=True, slots=True)
class Converted:
    """A converted document.

    ``text`` is Markdown (plain text for ``.txt`` that is not RST) with LF line ends only.
    ``page_starts`` holds the character offsets where pages 1, 2, ... begin (PDF pages, PPTX
    slides), or None. ``format`` is one of "markdown", "text", "rst", "asciidoc", "pdf",
    "docx", "pptx", "xlsx", "html", "image". ``warnings`` are one-line notes for the user
    (truncated sheets, scanned PDF pages, RST kept as plain text, ...). ``metadata`` goes
    into the document's metadata: ``encoding`` (text files: the detected encoding) and
    ``ocr_pages`` (the 1-based pages read with OCR).
    """

    text: str
    page_starts: tuple[int, ...] | None
    format: str
    warnings: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


def _normalise_extension(extension: str) -> str:
    ext = extension.strip().lower()
    if ext and not ext.startswith("."):
        ext = "." + ext
    if ext not in _FORMATS:
        shown = f"'{ext}'" if ext else "(no extension)"
        raise ConversionError(
            f"unsupported file type {shown}; supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    return ext


def _too_large(size: int, max_bytes: int) -> ConversionError:
    return ConversionError(f"file is {format_size(size)}; the limit is {format_size(max_bytes)}")


def convert_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, ocr: OcrOptions | None = None
) -> Converted:
    """Convert the file at ``path``, dispatching on its extension.

    ``ocr`` says how to read scanned pages and images (None: OCR "auto", in English).

    The size is checked with ``stat`` before anything is read, so an oversized file costs
    nothing. Raises:
        ConversionError: unsupported extension, missing or unreadable file, not a regular
            file, over ``max_bytes``, empty, or unconvertible content (see ``convert_bytes``).
    """
    p = Path(path)
    ext = _normalise_extension(p.suffix)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConversionError("file not found") from None
    except PermissionError:
        raise ConversionError("permission denied") from None
    except OSError as exc:
        raise ConversionError(
            f"cannot read the file: {exc.strerror or type(exc).__name__}"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise ConversionError("is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise ConversionError("not a regular file")
    if st.st_size > max_bytes:
        raise _too_large(st.st_size, max_bytes)
    if st.st_size == 0:
        raise NoTextError("empty file")
    try:
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except PermissionError:
        raise ConversionError("permission denied") from None
    except IsADirectoryError:
        raise ConversionError("is a directory, not a file") from None
    except OSError as exc:
        raise ConversionError(
            f"cannot read the file: {exc.strerror or type(exc).__name__}"
        ) from None
    if len(data) > max_bytes:
        raise ConversionError(f"file is larger than the limit of {format_size(max_bytes)}")
    return _convert(data, ext, p.name, ocr=ocr)


def convert_bytes(
    data: bytes,
    extension: str,
    *,
    name: str = "document",
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: FileLimits | None = None,
    ocr: OcrOptions | None = None,
    cancel: threading.Event | None = None,
) -> Converted:
    """Convert ``data`` as a file of type ``extension`` (".docx", "docx", ".PDF", ...).

    ``limits``: how many pages, cells and characters of a big file are read (the rest is
    skipped with a warning naming the limit), how many zip entries an Office file may hold
    and how many pixels an image may have (an image file over it is refused, from its
    header); default :class:`FileLimits`.

    ``name`` is the file name shown in messages of converters that use one (PDF). ``ocr``
    says how to read scanned pages and images (None: OCR "auto", in English). The
    conversion stops between pages, rows or slides once ``limits.convert_timeout_seconds``
    have passed or ``cancel`` is set (Tesseract gets at most the time left).
    Raises:
        ConversionTimeoutError: the time budget ran out (a ConversionError).
        AbandonedError: ``cancel`` was set.
        ConversionError: unsupported extension, over ``max_bytes``, empty, or content that
            cannot be converted: binary "text", a broken or bomb-like Office zip, an image
            over ``limits.max_image_pixels`` or without OCR,
            or any failure inside a third-party converter (wrapped as "could not convert:
            <ExceptionType>: <first line>").
    """
    ext = _normalise_extension(extension)
    if len(data) > max_bytes:
        raise _too_large(len(data), max_bytes)
    return _convert(bytes(data), ext, name, limits or FileLimits(), ocr, cancel)


def _convert(
    data: bytes,
    ext: str,
    name: str,
    limits: FileLimits | None = None,
    ocr: OcrOptions | None = None,
    cancel: threading.Event | None = None,
) -> Converted:
    if not data:
        raise NoTextError("empty file")
    limits = limits or FileLimits()
    try:
        with time_budget(limits.convert_timeout_seconds, cancel):
            converted = _dispatch(data, ext, name, limits, ocr or OcrOptions())
            check_budget()  # a converter with no step to stop at: late is still too late
        return _cut(converted, limits.max_chars)
    except (ConversionError, AbandonedError):
        raise
    except Exception as exc:
        detail = first_line(str(exc))
        reason = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        raise ConversionError(f"could not convert: {reason}") from exc


def _cut(converted: Converted, max_chars: int) -> Converted:
    """``converted`` cut at the last line end within ``max_chars`` characters, with a
    warning, when it is longer (pages that start beyond the cut are dropped)."""
    text = converted.text
    if len(text) <= max_chars:
        return converted
    end = text.rfind("\n", 0, max_chars + 1)
    end = end + 1 if end > 0 else max_chars
    pages = converted.page_starts
    if pages is not None:
        pages = tuple(p for p in pages if p < end) or (0,)
    warning = (
        f"cut at {end:,} of {len(text):,} characters: the limit is limits.max_chars ({max_chars:,})"
    )
    return Converted(
        text[:end], pages, converted.format, (*converted.warnings, warning), converted.metadata
    )


def _text_source(data: bytes, fmt: str) -> Converted:
    """A text file: Markdown and plain text as they are, RST (also in a ``.txt`` file whose
    content is RST) and AsciiDoc converted to Markdown."""
    from guaipeca.convert.text import decode_text

    text, encoding = decode_text(data)
    meta: dict[str, Any] = {"encoding": encoding}
    if fmt == "text":
        from guaipeca.convert.rst import looks_like_rst

        fmt = "rst" if looks_like_rst(text) else fmt
    if fmt == "rst":
        from guaipeca.convert.rst import convert_rst

        text, warnings = convert_rst(text)
        return Converted(text, None, "text" if warnings else fmt, warnings, meta)
    if fmt == "asciidoc":
        from guaipeca.convert.asciidoc import asciidoc_to_markdown

        text = asciidoc_to_markdown(text)
    return Converted(text, None, fmt, metadata=meta)


def _dispatch(data: bytes, ext: str, name: str, limits: FileLimits, ocr: OcrOptions) -> Converted:
    fmt = _FORMATS[ext]
    if fmt in ("markdown", "text", "rst", "asciidoc"):
        return _text_source(data, fmt)
    if fmt in ("pdf", "image"):
        from guaipeca.convert.pdf import convert_pdf

        if fmt == "image":
            from guaipeca.convert.ocr import image_to_pdf

            # From the header, before anything decodes it: a 2 MB PNG can hold 2 Gpixels.
            check_image_file(data, ext.lstrip(".").upper(), limits.max_image_pixels)
            if ocr.engine() is None:
                raise ConversionError(NO_OCR_FOR_IMAGES)
            data = image_to_pdf(data, ext)
        pdf = convert_pdf(
            data,
            name=os.path.basename(name) or "document.pdf",
            max_pages=limits.max_pages,
            ocr=ocr,
            max_image_pixels=limits.max_image_pixels,
        )
        meta: dict[str, Any] = {"ocr_pages": list(pdf.ocr_pages)} if pdf.ocr_pages else {}
        return Converted(pdf.text, pdf.page_starts, fmt, pdf.warnings, meta)
    from guaipeca.convert import office

    entries = limits.max_zip_entries
    if fmt == "xlsx":
        result = office.convert_xlsx(data, max_cells=limits.max_cells, max_zip_entries=entries)
    elif fmt == "docx":
        result = office.convert_docx(data, max_zip_entries=entries)
    elif fmt == "pptx":
        result = office.convert_pptx(data, max_zip_entries=entries)
    else:
        result = office.convert_html(data)
    return Converted(result.text, result.page_starts, fmt, result.warnings)
