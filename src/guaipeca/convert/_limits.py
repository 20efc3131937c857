"""Limits shared by the converters, and the helpers that turn breaches into user messages.

Private to ``guaipeca.convert``. Every limit exists to keep one hostile or broken file from
taking the memory or the time of a whole indexing run.
"""

from __future__ import annotations

import io
import threading
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from guaipeca.convert._budget import DEFAULT_CONVERT_TIMEOUT_SECONDS
from guaipeca.errors import ConversionError, TooLargeError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_IMAGE_PIXELS",
    "MAX_MESSAGE_CHARS",
    "ZIP_MAX_ENTRIES",
    "FileLimits",
    "captured_warnings",
    "check_image_file",
    "check_office_zip",
    "conversion_slot",
    "first_line",
    "format_size",
]

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
"""Largest source file accepted, checked with ``stat`` before a byte is read."""

ZIP_MAX_ENTRIES = 50_000
"""Default of ``limits.max_zip_entries``: room for a 5,000-slide deck (about 10,000
entries), far below a zip bomb's millions of empty entries."""

DEFAULT_MAX_IMAGE_PIXELS = 25_000_000
"""Pixels of one image decoded or rendered (``limits.max_image_pixels``). At this size one
OCR conversion (the render, Tesseract's copy) peaks near 300 MB (docs/reliability.md); an
A3 page at 300 dpi (17.4 MP) and a 24 MP photo fit."""


@dataclass(frozen=True, slots=True)
class FileLimits:
    """How much of one big file is read (config section ``limits``): the rest is skipped
    with a warning that names the limit, and what was read is indexed."""

    max_pages: int = 5000
    """PDF pages read."""
    max_cells: int = 5_000_000
    """Spreadsheet cells read (empty ones included)."""
    max_chars: int = 20_000_000
    """Characters kept of the converted text (cut at a line end)."""
    max_zip_entries: int = ZIP_MAX_ENTRIES
    """Entries of an Office zip (DOCX, PPTX, XLSX): more is refused, not cut."""

    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    """Pixels of one image: an image file's frame or an image on a page OCR reads is
    refused above it (checked from the header, before decoding); a page rendered for OCR is
    rendered at a lower dpi to stay under it."""

    convert_timeout_seconds: float = DEFAULT_CONVERT_TIMEOUT_SECONDS
    """Seconds one file's conversion may take (OCR included): a file not converted by then
    is refused, naming the setting."""


MAX_MESSAGE_CHARS = 120
"""Longest piece of a third-party message quoted in a ConversionError or a warning."""

# Office files are zips. What they may expand to: at most 100x their compressed size, but
# never refused below ZIP_EXPAND_FLOOR (a small, very regular workbook can exceed 100x) and
# never more than ZIP_EXPAND_CEILING, whatever the ratio. Checked on the central directory,
# then by inflating every entry in bounded steps, before any library opens the zip: a
# header may lie about the size, and zipfile inflates a whole entry in one call (up to
# 2 GiB) before it cuts it to the declared size and fails the CRC.
ZIP_EXPAND_RATIO = 100
ZIP_EXPAND_FLOOR = 25 * 1024 * 1024
ZIP_EXPAND_CEILING = 200 * 1024 * 1024

# The folder that marks each Office Open XML kind inside its zip.
_OOXML_FOLDERS = {"DOCX": "word/", "PPTX": "ppt/", "XLSX": "xl/"}

# Office converters running at once in this process (uploads and indexing alike): each may
# hold a few hundred MB (the zip, its XML trees, the Markdown), and the service unit has
# MemoryMax=2G.
MAX_CONCURRENT_OFFICE = 2
_office_slots = threading.BoundedSemaphore(MAX_CONCURRENT_OFFICE)
_INFLATE_STEP = 1 << 16
_LOCAL_HEADER = b"PK\x03\x04"
_LOCAL_HEADER_SIZE = 30

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # CFB: .doc/.ppt/.xls, or encrypted OOXML
_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_MAX_WARNINGS = 20


def format_size(n: int) -> str:
    """``52.4 MB``, ``3.0 KB`` or ``12 bytes`` (binary units, as file managers show them)."""
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"


def first_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def pixel_problem(width: int, height: int, max_pixels: int, what: str) -> str | None:
    """Why an image of ``width`` x ``height`` cannot be decoded (``what`` names it: "image",
    "frame 3"), or None when it is within ``max_pixels``."""
    if width * height <= max_pixels:
        return None
    return (
        f"{what} is {width:,} x {height:,} pixels ({width * height:,}); the limit is "
        f"limits.max_image_pixels ({max_pixels:,})"
    )


# The formats an image file may hold, by Pillow's names (content is sniffed, not the name).
_IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "GIF", "WEBP", "BMP")


def check_image_file(data: bytes, kind: str, max_pixels: int) -> None:
    """Refuse an image file any of whose frames has more than ``max_pixels`` pixels,
    reading the sizes from its headers only (Pillow opens lazily: nothing is decoded).

    Pillow's own registry is used instead of ``Image.open`` so that the size of a frame
    past Pillow's global bomb limit is still read and named in the message. Raises:
        ConversionError: not an image Pillow can read the header of.
        TooLargeError: a frame over the limit.
    """
    from PIL import Image

    Image.init()
    for fmt in _IMAGE_FORMATS:
        factory, accept = Image.OPEN.get(fmt, (None, None))
        if factory is None or (accept is not None and accept(data[:16]) is not True):
            continue
        try:
            with factory(io.BytesIO(data), "") as img:
                frames = int(getattr(img, "n_frames", 1))
                for n in range(frames):
                    if n:
                        img.seek(n)  # reads the next frame's header, not its pixels
                    what = "image" if frames == 1 else f"frame {n + 1} of the image"
                    problem = pixel_problem(img.size[0], img.size[1], max_pixels, what)
                    if problem:
                        raise TooLargeError(problem)
            return
        except ConversionError:
            raise
        except Exception:
            break
    raise ConversionError(f"not a readable {kind} image")


def _zip_entry_count(data: bytes) -> int | None:
    """Entry count from the end-of-central-directory record, or None if there is none.

    Read before ``zipfile`` parses the directory, so a zip claiming millions of entries is
    refused without building millions of ``ZipInfo`` objects.
    """
    pos = data.rfind(_EOCD, max(0, len(data) - 65_557))  # 22-byte record + 64 KB comment
    if pos < 0 or pos + 22 > len(data):
        return None
    count = int.from_bytes(data[pos + 10 : pos + 12], "little")
    if count == 0xFFFF:  # ZIP64: the real count is in the ZIP64 end record
        loc = pos - 20
        if loc >= 0 and data[loc : loc + 4] == _ZIP64_LOCATOR:
            off = int.from_bytes(data[loc + 8 : loc + 16], "little")
            if data[off : off + 4] == _ZIP64_EOCD:
                count = int.from_bytes(data[off + 32 : off + 40], "little")
    return count


def check_office_zip(data: bytes, kind: str, *, max_entries: int) -> None:
    """Refuse what is not a sane Office Open XML zip of ``kind`` ("DOCX", "PPTX", "XLSX").

    ``max_entries`` (``limits.max_zip_entries``): a 5,000-slide deck has about 10,000
    entries (each slide a part and its relations), a zip bomb made of empty entries
    millions; each entry costs a ``ZipInfo`` and a check, so the count is bounded.

    Bounded work: reads the central directory only. Raises:
        ConversionError: not a zip, an old binary or encrypted Office file, another Office
            kind, too many entries, or entries that expand beyond the limit (zip bomb).
    """
    if data.startswith(_OLE_MAGIC):
        raise ConversionError(
            f"not a valid {kind}: it is password-protected or in the old binary Office "
            f"format; save it unprotected as .{kind.lower()}"
        )
    if data.startswith(b"%PDF-"):
        raise ConversionError(f"not a valid {kind}: the file is a PDF; rename it to .pdf")
    count = _zip_entry_count(data)
    if count is None:
        raise ConversionError(f"not a valid {kind} (bad zip)")
    if count > max_entries:
        raise _too_many_entries(kind, count, max_entries)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError):
        raise ConversionError(f"not a valid {kind} (bad zip)") from None
    if len(infos) > max_entries:
        raise _too_many_entries(kind, len(infos), max_entries)
    cap = max(ZIP_EXPAND_FLOOR, min(ZIP_EXPAND_CEILING, ZIP_EXPAND_RATIO * len(data)))
    total = 0
    for info in infos:
        total += info.file_size
        if total > cap:
            raise ConversionError(
                f"{kind} expands to more than {cap // (1024 * 1024)} MB (zip bomb?)"
            )
    for info in infos:
        _check_entry(data, info, kind)
    names = {info.filename for info in infos}
    if "[Content_Types].xml" not in names:
        raise ConversionError(f"not a valid {kind}: a zip file, but not an Office document")
    folder = _OOXML_FOLDERS[kind]
    if not any(name.startswith(folder) for name in names):
        for other, other_folder in _OOXML_FOLDERS.items():
            if any(name.startswith(other_folder) for name in names):
                raise ConversionError(
                    f"not a valid {kind}: it is an {other} file; rename it to .{other.lower()}"
                )
        raise ConversionError(f"not a valid {kind}: no {folder} part in the zip")


def _too_many_entries(kind: str, count: int, limit: int) -> ConversionError:
    return ConversionError(
        f"{kind} has {count:,} zip entries; the limit is limits.max_zip_entries ({limit:,}) "
        "(zip bomb?)"
    )


def _check_entry(data: bytes, info: zipfile.ZipInfo, kind: str) -> None:
    """Inflate one entry in bounded steps and refuse it if it yields more than its
    declared size (a lying header), is encrypted, or uses a method Office never writes
    (zipfile inflates bzip2 and LZMA entries in one unbounded call). Memory: one step."""
    bomb = ConversionError(f"{kind} has a zip entry larger than it declares (zip bomb?)")
    if info.flag_bits & 0x1:
        raise ConversionError(f"not a valid {kind}: an encrypted zip entry")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ConversionError(f"not a valid {kind}: an unsupported zip compression method")
    start = info.header_offset
    header = data[start : start + _LOCAL_HEADER_SIZE]
    if len(header) < _LOCAL_HEADER_SIZE or not header.startswith(_LOCAL_HEADER):
        raise ConversionError(f"not a valid {kind} (bad zip)")
    start += _LOCAL_HEADER_SIZE + int.from_bytes(header[26:28], "little")
    start += int.from_bytes(header[28:30], "little")
    raw = memoryview(data)[start : start + info.compress_size]
    if info.compress_type == zipfile.ZIP_STORED:
        return  # zipfile reads min(compressed, declared) bytes: nothing to inflate
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    budget = info.file_size  # declared; one byte more proves the header lies
    try:
        for pos in range(0, len(raw), _INFLATE_STEP):
            pending = bytes(raw[pos : pos + _INFLATE_STEP])
            while pending:
                out = inflater.decompress(pending, _INFLATE_STEP)
                budget -= len(out)
                if budget < 0:
                    raise bomb
                pending = inflater.unconsumed_tail
            if inflater.eof:
                return
        if len(inflater.flush(_INFLATE_STEP)) > budget:
            raise bomb
    except zlib.error:
        raise ConversionError(f"not a valid {kind} (bad zip)") from None


@contextmanager
def conversion_slot() -> Iterator[None]:
    """Hold one of the :data:`MAX_CONCURRENT_OFFICE` Office conversion slots (blocks)."""
    with _office_slots:
        yield


@contextmanager
def captured_warnings(sink: list[str]) -> Iterator[None]:
    """Collect Python warnings raised by third-party converters as one-line strings.

    Libraries warn about things a user should see next to the document (unsupported
    features, fallbacks), and must not print to stderr or, under ``-W error``, abort the
    conversion. Note: ``warnings.catch_warnings`` swaps process-global state, so converting
    from several threads at once may misroute warnings between documents (never lose them
    into an exception, though).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        line = f"{w.category.__name__}: {first_line(str(w.message))}"
        if line not in sink and len(sink) < _MAX_WARNINGS:
            sink.append(line)
