"""Language names: the Snowball stemmers PyStemmer knows, and the ISO 639-1 codes (with or
without a region, ``pt-BR``) that name the same languages.

Users write ``language: pt`` or ``language: portuguese`` alike (SPEC §4.1d); everything below
the edges (the lexical index's metadata, the catalog) keeps the Snowball name, so an index
built before codes were accepted opens unchanged.
"""

from __future__ import annotations

import functools
import re
from typing import Final

import Stemmer

__all__ = ["iso_code", "language_name", "snowball_languages"]

# The ISO 639-1 code of each Snowball language. Hand-written: it is a fixed fact about the
# stemmers PyStemmer ships (``porter`` and ``dutch_porter`` are older stemmers of English and
# Dutch and keep their Snowball names only); a language-tag library would bring a database of
# thousands of languages to map these 34.
_ISO_639_1: Final[dict[str, str]] = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german",
    "el": "greek", "en": "english", "eo": "esperanto", "es": "spanish", "et": "estonian",
    "eu": "basque", "fa": "persian", "fi": "finnish", "fr": "french", "ga": "irish",
    "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "lt": "lithuanian", "nb": "norwegian", "ne": "nepali", "nl": "dutch", "nn": "norwegian",
    "no": "norwegian", "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "st": "sesotho", "sv": "swedish", "ta": "tamil", "tr": "turkish",
    "yi": "yiddish",
}  # fmt: skip
# One code per language for the way back (Norwegian Bokmål's ``nb`` and Nynorsk's ``nn``
# both stem as ``norwegian``, whose code is ``no``).
_CODE_OF: Final[dict[str, str]] = {
    name: code for code, name in _ISO_639_1.items() if code not in ("nb", "nn")
}
# A BCP 47 tag: the language subtag, then script/region/variant subtags (``pt-BR``,
# ``sr-Latn-RS``); ``_`` is accepted too (``pt_BR``, as in POSIX locales).
_TAG: Final = re.compile(r"([a-z]{2,3})(?:[-_][a-z0-9]{1,8})*")


@functools.cache
def snowball_languages() -> list[str]:
    """Every language with a Snowball stemmer, sorted (``english``, ``portuguese``, …)."""
    return sorted(Stemmer.algorithms())


def language_name(value: str) -> str:
    """The Snowball name of ``value``: a Snowball name (``Portuguese``) or an ISO 639-1
    code, alone or with subtags (``pt``, ``pt-BR``, ``en_US``); case is ignored.

    Raises:
        ValueError: neither (the message lists what is accepted).
    """
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in snowball_languages():
        return text
    tag = _TAG.fullmatch(text)
    if tag and tag.group(1) in _ISO_639_1:
        return _ISO_639_1[tag.group(1)]
    shown = value.strip()[:40] if isinstance(value, str) else type(value).__name__
    raise ValueError(
        f"unknown language {shown!r}: use an ISO 639-1 code such as pt, pt-BR, en, es, or a "
        f"Snowball name ({', '.join(snowball_languages())})"
    )


def iso_code(name: str) -> str | None:
    """The ISO 639-1 code of a Snowball language name (``portuguese`` → ``pt``; the older
    ``porter`` and ``dutch_porter`` stemmers → ``en``, ``nl``); None for an unknown name."""
    if name == "porter":
        return "en"
    if name == "dutch_porter":
        return "nl"
    return _CODE_OF.get(name)
