"""The Snowball analyzer: text to the exact tokens the BM25 index stores.

The analyzer turns text into the exact tokens the index stores, so index time and query
time can never tokenise differently: tantivy only splits our pre-analysed, space-joined
tokens on whitespace and does no analysis of its own.

Analysis, in order (why each step is where it is):

1. NFKC + casefold, so ligatures, full-width forms and case variants become one spelling.
2. Words are runs of letters (with any combining marks, so Devanagari or Tamil words are not
   cut at their vowel signs) or runs of digits: ``_``, punctuation and letter/digit
   boundaries split words, so "covid-19", "covid19" and "COVID 19" all give "covid", "19".
   Measured nDCG@10 with vs without the letter/digit split: SciFact 0.699 vs 0.687,
   NFCorpus 0.329 vs 0.329. Words longer than 64 characters (hashes, base64, run-on
   garbage) are dropped.
3. Stopwords (Snowball lists shipped for English and Portuguese; other languages have none)
   are compared casefolded, before accents are stripped, against each listed word and its
   unaccented spelling, so "não" and "nao" both go.
4. Latin/Greek/Cyrillic diacritics are stripped, *then* the word is stemmed. Stripping first
   makes the result fully accent-insensitive, while stemming first lets an accented and an
   unaccented spelling stem differently ("informação" -> "inform" but "informacao" ->
   "informaca"). On hand-made word families (kept in ``tests/lexical/test_lexical.py``), stripping
   first matched accent variants in 116/116 Portuguese words vs 98/116 and 53/53 French
   words vs 46/53, at the cost of one family less conflated in French and in Spanish. Only
   the generic combining-diacritics blocks are removed: Indic viramas and vowel signs,
   Arabic and Hebrew points are spelling there, and stay.
5. Portuguese only: the plural "-oes" (stripped "-ões") is folded to "-ao" before
   stemming, because Snowball leaves "ações"/"ação" apart when the word is short.
6. Snowball stemming (PyStemmer ``stemWords``, one call per batch of unseen words).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any, Final

import Stemmer

from guaipeca.errors import ConfigError, InvalidArgumentError
from guaipeca.text.languages import language_name
from guaipeca.text.normalize import strip_diacritics
from guaipeca.text.stopwords import stopwords

__all__ = ["MAX_TOKEN_CHARS", "Analyzer"]

MAX_TOKEN_CHARS: Final = 64
"""Words longer than this many characters (after casefolding) are not indexed."""

# Bounds the analyzer's word cache (~10 MB); SciFact's 5k abstracts have 36k distinct words.
_WORD_CACHE_MAX: Final = 50_000


# ASCII text has no combining marks, and this simpler pattern runs ~2x faster than the
# marks-aware one.
_ASCII_WORD_RE: Final = re.compile(r"[^\W\d_]+|\d+")
# Word runs for locating terms in non-ASCII text; each run is then analysed on its own.
_ANY_WORD_RE: Final = re.compile(r"\w+", re.UNICODE)
_NON_ASCII_STRETCH_RE: Final = re.compile(r"\w*[^\x00-\x7f]\w*", re.UNICODE)


@functools.cache
def _word_re() -> re.Pattern[str]:
    """Words of letters/digits that may carry combining marks (built once, ~20 ms).

    ``\\w`` alone would cut "हिन्दी" at its vowel signs, because marks are not alphanumeric.
    Marks are only tried after a letter run (not in the same class), which keeps the scan
    close to the speed of the ASCII pattern. Planes 2–13 and 15–16 hold no marks.
    """
    ranges: list[list[int]] = []
    for cp in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(cp))[0] == "M":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    marks = "".join(f"\\U{a:08x}-\\U{b:08x}" if a != b else f"\\U{a:08x}" for a, b in ranges)
    return re.compile(f"[^\\W\\d_]+(?:[{marks}]+[^\\W\\d_]*)*|\\d+")


def _fold_portuguese(word: str) -> str:
    # "acoes" -> "acao": Snowball only removes "-ções" inside its R2 region, so short words
    # keep singular and plural apart. Five letters or more spares "poes", "voes" and English
    # "does"/"goes" in mixed text.
    if len(word) >= 5 and word.endswith("oes"):
        return word[:-3] + "ao"
    return word


_PRE_STEM_FOLDS: Final[dict[str, Callable[[str], str]]] = {"portuguese": _fold_portuguese}


class Analyzer:
    """Turns text into index/query tokens: words, casefolded, stopwords out, stemmed.

    Thread-safe: PyStemmer objects are not, so each thread gets its own stemmer; the word
    cache is shared.

    ``language`` is a Snowball name or an ISO 639-1 code (``pt``, ``pt-BR``).

    Raises:
        ConfigError: ``language`` names no language with a Snowball stemmer.
    """

    def __init__(self, language: str = "english") -> None:
        try:
            language = language_name(language)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self._language = language
        self._stopwords = stopwords(language)
        self._fold = _PRE_STEM_FOLDS.get(language)
        self._local = threading.local()
        # word -> token ("" when the word is dropped). Text repeats words (Zipf), and one dict
        # lookup is ~3x cheaper than PyStemmer's own cache: stemming SciFact's 1.17M words
        # took 0.48 s this way instead of 1.4–1.7 s. Never cleared in place, only replaced,
        # so a thread holding the old dict still finds its words.
        self._cache: dict[str, str] = {}

    @property
    def language(self) -> str:
        """The Snowball language name, e.g. ``"english"`` or ``"portuguese"``."""
        return self._language

    def __repr__(self) -> str:
        return f"Analyzer({self._language!r})"

    def _stemmer(self) -> Any:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = Stemmer.Stemmer(self._language)
            stemmer.maxCacheSize = 0  # our word cache does this job, faster
            self._local.stemmer = stemmer
        return stemmer

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text``, in order, repeats kept (they are term frequencies).

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a string, not {type(text).__name__}")
        if text.isascii():
            # ASCII needs neither Unicode normalisation nor the marks-aware pattern.
            words = _ASCII_WORD_RE.findall(text.lower())
        else:
            # Built on first non-ASCII text (~50 ms): an English query never pays for it.
            words = _word_re().findall(unicodedata.normalize("NFKC", text.casefold()))
        if not words:
            return []
        cache = self._cache
        try:
            found = [cache[w] for w in words]
        except KeyError:
            found = self._analyse_new(words, cache)
        return [t for t in found if t]

    def term_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Each index term of ``text`` with the character span ``[start, end)`` it came from.

        The terms are those of :meth:`tokens`, in order; snippets use the spans to mark
        matches. ASCII text is scanned once (lower-casing keeps offsets); other text is
        analysed word by word, because normalisation can change its length.
        """
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a string, not {type(text).__name__}")
        if text.isascii():
            return self._ascii_spans(text, 0)
        # Accented text is mostly ASCII: only the stretches holding a non-ASCII character
        # (with the word runs around it) are analysed word by word; the rest in one pass.
        spans: list[tuple[int, int, str]] = []
        cursor = 0
        for stretch in _NON_ASCII_STRETCH_RE.finditer(text):
            spans.extend(self._ascii_spans(text[cursor : stretch.start()], cursor))
            for m in _ANY_WORD_RE.finditer(text, stretch.start(), stretch.end()):
                spans.extend((m.start(), m.end(), term) for term in self.tokens(m.group()))
            cursor = stretch.end()
        spans.extend(self._ascii_spans(text[cursor:], cursor))
        return spans

    def _ascii_spans(self, text: str, offset: int) -> list[tuple[int, int, str]]:
        matches = list(_ASCII_WORD_RE.finditer(text.lower()))
        if not matches:
            return []
        words = [m.group() for m in matches]
        cache = self._cache
        try:
            found = [cache[w] for w in words]
        except KeyError:
            found = self._analyse_new(words, cache)
        return [
            (offset + m.start(), offset + m.end(), t)
            for m, t in zip(matches, found, strict=True)
            if t
        ]

    def _analyse_new(self, words: list[str], cache: dict[str, str]) -> list[str]:
        new = [w for w in dict.fromkeys(words) if w not in cache]
        if len(cache) + len(new) > _WORD_CACHE_MAX:
            cache = {}
            self._cache = cache
            new = list(dict.fromkeys(words))
        kept = []
        for word in new:
            if len(word) > MAX_TOKEN_CHARS or word in self._stopwords:
                cache[word] = ""
            else:
                kept.append(word)
        # Stopwords were checked on the accented word (the lists hold both spellings).
        prepared = [w if w.isascii() else strip_diacritics(w) for w in kept]
        if self._fold is not None:
            prepared = [self._fold(w) for w in prepared]
        if prepared:
            for word, stem in zip(kept, self._stemmer().stemWords(prepared), strict=True):
                cache[word] = stem
        return [cache[w] for w in words]
