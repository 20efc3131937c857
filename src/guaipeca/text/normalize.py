"""Spelling normalisation shared by the lexical index and enrichment."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

__all__ = ["fold_case", "normalize_term", "strip_diacritics"]

# Generic combining diacritics (acute, tilde, cedilla, diaeresis...): used with Latin, Greek
# and Cyrillic letters, where people often type words without them. Marks of other scripts
# (viramas, matras, harakat, niqqud) are spelling and stay.
DIACRITICS_RE: Final = re.compile(
    "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
)


@functools.lru_cache(maxsize=65536)
def strip_diacritics(word: str) -> str:
    """Remove Latin/Greek/Cyrillic diacritics: "ação" -> "acao" (cached: words repeat)."""
    decomposed = unicodedata.normalize("NFKD", word)
    stripped = DIACRITICS_RE.sub("", decomposed)
    # Recompose so scripts that NFKD splits without diacritics (Hangul) keep their usual form.
    return unicodedata.normalize("NFC", stripped)


def fold_case(text: str) -> str:
    """NFKC + casefold: ligatures, full-width forms and case variants become one spelling."""
    return unicodedata.normalize("NFKC", text.casefold())


def normalize_term(term: str) -> str:
    """The matching key of a keyword or entity: casefolded, accents and extra spaces removed."""
    return " ".join(strip_diacritics(term.casefold()).split())
