"""Plain text and Markdown sources (``.txt``, ``.md``, ``.markdown``).

The text is taken as it is -- no Markdown rewriting -- apart from its encoding and line
endings: the canonical text is UTF-8 with LF line ends, so chunk offsets refer to one form.

Encodings: a byte-order mark decides first (UTF-8, UTF-16 LE/BE); then strict UTF-8 (most
files, and the only reading of pure ASCII); then charset-normalizer chooses between
Windows-1252 and Latin-1, the two single-byte encodings of Western European archives. The
candidates are limited to those on purpose: left free, the detector reads short Portuguese
text as Central European cp1250 ("educaçăo"), and every chunk is cited as an exact span of
this text, so a wrong guess would be indexed, shown and quoted as if it were the document.
Bytes that no candidate reads as text (NUL bytes without a UTF-16 mark, control-character
noise) are refused as binary.
"""

from __future__ import annotations

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


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode a text file and normalise its line endings to LF: ``(text, encoding)``.

    ``encoding`` is what was detected: "utf-8", "utf-8-sig" (with a BOM), "utf-16",
    "cp1252" or "latin-1".

    Raises:
        ConversionError: the bytes are binary (NUL bytes without a UTF-16 BOM, or noise no
            candidate encoding reads as text), a BOM'd text does not decode, or the file
            holds nothing but whitespace.
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
        if b"\x00" in data:
            raise ConversionError("looks binary (NUL bytes), not text")
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = _detect(data)
    if "\x00" in text:
        raise ConversionError("looks binary (NUL characters), not text")
    if not text.strip():
        raise NoTextError("empty file")
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding
