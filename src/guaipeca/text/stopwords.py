"""The stopword lists shipped in ``guaipeca/data/stopwords`` (Snowball's)."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from guaipeca.errors import ConfigError
from guaipeca.text.normalize import fold_case, strip_diacritics

__all__ = ["STOPWORD_LANGUAGES", "stopwords"]

# Languages whose stopword list ships in ``guaipeca/data/stopwords``. Named here rather than
# discovered, so a package built without the data files fails loudly instead of silently
# indexing stopwords.
STOPWORD_LANGUAGES: Final = frozenset({"english", "portuguese"})


@functools.cache
def stopwords(language: str) -> frozenset[str]:
    """The shipped stopword list for ``language`` (casefolded, plus unaccented spellings)."""
    if language not in STOPWORD_LANGUAGES:
        return frozenset()
    resource = resources.files("guaipeca") / "data" / "stopwords" / f"{language}.txt"
    try:
        text = resource.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"the {language} stopword list is missing from the installed package "
            f"(guaipeca/data/stopwords/{language}.txt); reinstall guaipeca"
        ) from exc
    words: set[str] = set()
    for line in text.splitlines():
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        word = fold_case(word)
        words.add(word)
        words.add(strip_diacritics(word))
    return frozenset(words)
