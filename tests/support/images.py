"""Decompression bombs: images that are a few MB on disk and gigabytes once decoded.

Built here, never read from disk: a deflate stream of zeros is made by compressing one
block, ending it with a full flush (which resets the compressor, so every further block of
zeros compresses to the same bytes) and repeating those bytes; the test's own memory stays
at a few MB whatever the declared size.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

BOMB_SIDE = 46_300
"""Width and height of the issue's bomb: 2,143,690,000 greyscale pixels, a 2 MB PNG."""

_BLOCK = 1 << 22


def zeros_deflated(total: int, *, raw: bool = False) -> bytes:
    """``total`` zero bytes as a zlib stream (``raw``: bare deflate, no header or checksum)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = deflate.compress(bytes(_BLOCK)) + deflate.flush(zlib.Z_FULL_FLUSH)
    full, rest = divmod(total, _BLOCK)
    tail = deflate.compress(bytes(rest)) + deflate.flush(zlib.Z_FINISH)
    body = piece * full + tail
    if raw:
        return body
    # Adler-32 of n zero bytes: the low sum stays 1, the high sum is n (mod 65521).
    adler = ((total % 65521) << 16) | 1
    return b"\x78\xda" + body + struct.pack(">I", adler)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def bomb_png(side: int = BOMB_SIDE) -> bytes:
    """A valid ``side`` x ``side`` 8-bit greyscale PNG of zeros (each row: filter byte 0)."""
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zeros_deflated((side + 1) * side))
        + _png_chunk(b"IEND", b"")
    )


def bomb_pdf(side: int = BOMB_SIDE, *, text_page: str | None = None, inline: bool = False) -> bytes:
    """A PDF whose (last) A4 page shows only a ``side`` x ``side`` greyscale image of zeros,
    Flate-compressed: a scanned page that OCR would render, decoding the image whole.
    ``text_page``: a first page with that line of text. ``inline``: the image is written
    inline in the page's content stream (``BI … ID … EI``), not as an XObject."""
    data = zeros_deflated(side * side)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    pages = ["5 0 R", "3 0 R"] if text_page is not None else ["3 0 R"]
    objects.append(f"<< /Type /Pages /Kids [{' '.join(pages)}] /Count {len(pages)} >>".encode())
    image_dict = f"/Width {side} /Height {side} /BitsPerComponent 8 /ColorSpace /DeviceGray"
    if inline:
        content = (
            f"q 595 0 0 842 0 0 cm BI /W {side} /H {side} /BPC 8 /CS /G /F /Fl ID\n".encode()
            + data
            + b"\nEI Q"
        )
        resources = b"<< >>"
        image = b"<< >>"  # unused
    else:
        content = b"q 595 0 0 842 0 0 cm /Im1 Do Q"
        resources = b"<< /XObject << /Im1 4 0 R >> >>"
        image = _stream(
            f"<< /Type /XObject /Subtype /Image {image_dict} /Filter /FlateDecode".encode(), data
        )
    objects.append(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources "
        + resources
        + b" /Contents 6 0 R >>"
    )
    objects.append(image)
    objects.append(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 "
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> /Contents 7 0 R >>"
    )
    objects.append(_stream(b"<<", content))
    line = (text_page or "").replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    objects.append(_stream(b"<<", f"BT /F1 12 Tf 72 760 Td ({line}) Tj ET".encode()))
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write(b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets))
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def _stream(head: bytes, data: bytes) -> bytes:
    """A stream object: ``head`` is its dictionary opened (``<<`` and any keys)."""
    return head + f" /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"


def with_entry(office: bytes, name: str, data: bytes) -> bytes:
    """The Office zip ``office`` with its entry ``name`` replaced by (or added as) ``data``."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(office)) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info, src.read(info))
        dst.writestr(name, data)
    return out.getvalue()


def speckle_pdf(pages: int, *, side: int = 600, seed: int = 1) -> bytes:
    """A scan with no text layer: ``pages`` A4 pages of random black-and-white speckle
    (the issue's 100-page attack PDF in small). Tesseract spends about 5 s a page on it at
    300 dpi, and finds only noise."""
    import random

    import pymupdf

    rng = random.Random(seed)
    black_or_white = bytes(0 if b < 128 else 255 for b in range(256))
    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=595, height=842)
        noise = rng.randbytes(side * side).translate(black_or_white)
        pixmap = pymupdf.Pixmap(pymupdf.csGRAY, side, side, noise, False)
        page.insert_image(page.rect, pixmap=pixmap)
    data: bytes = doc.tobytes(deflate=True)
    doc.close()
    return data
