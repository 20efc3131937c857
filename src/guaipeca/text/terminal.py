"""Text made safe to print on a terminal: the characters a terminal obeys instead of showing
are shown escaped.

A file name, heading or snippet comes from the documents, not from us. Printed raw, an ESC
sequence in it can clear the screen or recolour what follows, a newline or carriage return
can forge an output line, and a bidi override (U+202E) can show ``cod.exe`` as ``exe.doc``.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE_CHARACTERS", "visible"]

#: What a terminal acts on instead of showing: C0 controls, DEL and C1 controls (ESC, CSI and
#: the rest), the bidi embeddings/overrides/isolates and marks (U+202A-U+202E,
#: U+2066-U+2069, U+200E, U+200F, U+061C), the line and paragraph separators (U+2028,
#: U+2029) and lone surrogates (a file name that is not UTF-8 holds them, and they cannot be
#: written to a UTF-8 terminal at all).
UNSAFE_CHARACTERS: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

_SHORT: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def visible(text: str) -> str:
    r"""``text`` with every character of :data:`UNSAFE_CHARACTERS` written as an escape:
    ``\x1b``, ``\x9b``, ``\n``, ``\t``, ``\u202e``. Everything else, backslashes included,
    is left as it is, so printable text comes out unchanged."""
    return UNSAFE_CHARACTERS.sub(_escape, text)
