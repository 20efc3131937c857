"""Plain text and Markdown sources (``.txt``, ``.md``, ``.markdown``).

The text is taken as it is -- no Markdown rewriting -- apart from line endings: CRLF and
lone CR become LF, so chunk offsets refer to one canonical form. Only strict UTF-8 is
accepted (a leading UTF-8 byte-order mark is allowed and dropped). Anything else is an
error rather than a guess: a guessed encoding can silently turn a few characters into the
wrong ones, and every chunk is cited as an exact span of this text, so a wrong guess would
be indexed, shown and quoted as if it were the document. The message says how to fix it.
"""

from __future__ import annotations

from guaipeca.errors import ConversionError

__all__ = ["decode_text"]

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_text(data: bytes) -> str:
    """Decode a text file as strict UTF-8 and normalise its line endings to LF.

    Raises:
        ConversionError: the bytes hold NUL bytes (binary, or UTF-16), are not UTF-8, or
            hold nothing but whitespace.
    """
    skip = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    data = data[skip:]
    if b"\x00" in data:
        if data.startswith(_UTF16_BOMS):
            raise ConversionError("UTF-16 text, not UTF-8; save it as UTF-8")
        raise ConversionError("looks binary (NUL bytes), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start + skip}); "
            "save it as UTF-8"
        ) from None
    if not text.strip():
        raise ConversionError("empty file")
    return text.replace("\r\n", "\n").replace("\r", "\n")
