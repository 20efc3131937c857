"""Plain text and Markdown sources (``.txt``, ``.md``, ``.markdown``).

The text is taken as it is -- no Markdown rewriting -- apart from its encoding and line
endings: the canonical text is UTF-8 with LF line ends, so chunk offsets refer to one form.

Encodings: a byte-order mark decides first (UTF-8, UTF-16 LE/BE); then strict UTF-8 (most
files, and the only reading of pure ASCII); then charset-normalizer chooses between
Windows-1252 and Latin-1, the two single-byte encodings of Western European archives. The
candidates are limited to those on purpose: left free, the detector reads short Portuguese
text as Central European cp1250 ("educaçăo"), and every chunk is cited as an exact span of
this text, so a wrong guess would be indexed, shown and quoted as if it were the document.
Bytes with NUL bytes and no mark may be UTF-16 without a BOM (Windows "Unicode" text): they
are read as UTF-16 LE or BE when that reading is clean text (no control character other than
whitespace, no unassigned or private-use code point; charset-normalizer chooses when both
are), and refused as binary otherwise, as is control-character noise.
"""

from __future__ import annotations

import unicodedata

from guaipeca.errors import ConversionError, NoTextError

__all__ = ["decode_text"]

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le", "utf-16"),
    (b"\xfe\xff", "utf-16-be", "utf-16"),
)
# charset-normalizer's codec names → the names recorded in a document's metadata.
_SINGLE_BYTE = {"cp1252": "cp1252", "latin_1": "latin-1"}


def _detect(data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` of BOM-less, NUL-free bytes that are not UTF-8."""
    from charset_normalizer import from_bytes

    best = from_bytes(data, cp_isolation=["cp1252", "latin_1"]).best()
    if best is None or best.encoding not in _SINGLE_BYTE:
        raise ConversionError(
            "not text in a known encoding (UTF-8, UTF-16 with a BOM, Windows-1252, Latin-1)"
        )
    return str(best), _SINGLE_BYTE[best.encoding]


# Control characters a text file holds: tab, LF, vertical tab, form feed, CR.
_TEXT_CONTROLS = frozenset("\t\n\v\f\r")
_NOT_TEXT = frozenset({"Cc", "Cn", "Co", "Cs"})
_UTF16 = {"utf_16_le": "utf-16-le", "utf_16_be": "utf-16-be"}


def _is_clean_text(text: str) -> bool:
    """No control character but whitespace, no unassigned or private-use code point: what a
    wrong UTF-16 byte order or binary bytes read as UTF-16 almost always break."""
    return all(c in _TEXT_CONTROLS or unicodedata.category(c) not in _NOT_TEXT for c in set(text))


def _utf16_without_bom(data: bytes) -> tuple[str, str] | None:
    """``(text, encoding)`` of BOM-less UTF-16 bytes, or None when neither byte order reads
    them as clean text (binary)."""
    readings: dict[str, str] = {}
    for codec in _UTF16.values():
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:  # odd length, a lone surrogate: not this byte order
            continue
        if _is_clean_text(text):
            readings[codec] = text
    if len(readings) > 1:  # ASCII letters read swapped are CJK: let the detector choose
        from charset_normalizer import from_bytes

        best = from_bytes(data, cp_isolation=list(_UTF16)).best()
        chosen = _UTF16.get(best.encoding) if best is not None else None
        readings = {chosen: readings[chosen]} if chosen else {}
    return next(((text, codec) for codec, text in readings.items()), None)


def _without_bom(data: bytes) -> tuple[str, str]:
    if b"\x00" in data:  # binary, or UTF-16 (its ASCII letters have a zero byte)
        utf16 = _utf16_without_bom(data)
        if utf16 is None:
            raise ConversionError("looks binary (NUL bytes), not text")
        return utf16
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return _detect(data)


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode a text file and normalise its line endings to LF: ``(text, encoding)``.

    ``encoding`` is what was detected: "utf-8", "utf-8-sig" (with a BOM), "utf-16" (with
    a BOM), "utf-16-le" or "utf-16-be" (without one), "cp1252" or "latin-1".

    Raises:
        ConversionError: the bytes are binary (NUL bytes that are not clean UTF-16 text, or
            noise no candidate encoding reads as text), a BOM'd text does not decode, or the
            file holds nothing but whitespace.
    """
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                raise ConversionError(
                    f"not valid {codec} text after its byte-order mark (offset {exc.start})"
                ) from None
            encoding = label
            break
    else:
        text, encoding = _without_bom(data)
    if "\x00" in text:
        raise ConversionError("looks binary (NUL characters), not text")
    if not text.strip():
        raise NoTextError("empty file")
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding
