"""Local enrichment (SPEC §8.1): keywords, named entities, dates and content types per chunk.

No model and no network: statistics and rules over the chunk's text, in English and
Portuguese (the language's stopword list drives keyword boundaries and entity edges; both
languages' month names are always recognised). Everything here is deterministic and fast
(well under a millisecond for a typical chunk), so it runs inside indexing.

- keywords: RAKE-style candidate phrases (runs of content words between stopwords and
  punctuation, at most three words), scored by word degree over frequency plus how often
  the phrase repeats; lower-cased.
- entities: acronyms (``NASA``, ``BRCA1``, ``IL-6``, ``COVID-19``) and runs of capitalised
  words joined by short connectors (``University of São Paulo``, ``Banco do Brasil``); a
  lone capitalised word at the start of a sentence counts only when it is also capitalised
  mid-sentence somewhere in the chunk (so "The" or "However" never qualify).
- dates: ISO (``2024-03-03``), ``3 March 2024``, ``March 3, 2024``, ``3 de março de 2024``,
  ``março de 2024``, ``March 2024``, ``03/03/2024`` (day first in Portuguese, month first
  in English unless the first number is over 12) and years after a preposition
  (``in 2019``, ``em 2019``); normalised to ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``.
- content types: ``table``, ``code``, ``list``, ``heading``, ``text``.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

from guaipeca.enrich.types import Enrichment
from guaipeca.text.normalize import strip_diacritics
from guaipeca.text.stopwords import stopwords

__all__ = [
    "detect_language",
    "enrich_text",
    "extract_content_types",
    "extract_dates",
    "extract_entities",
    "extract_keywords",
]

MAX_KEYWORDS: Final = 10
MAX_ENTITIES: Final = 20
MAX_DATES: Final = 20
_MAX_PHRASE_WORDS: Final = 3
_MAX_ENTITY_WORDS: Final = 6

_LANGUAGES: Final = ("english", "portuguese")


def _stopwords(language: str) -> frozenset[str]:
    """The shipped Snowball stopword list, empty for languages without one."""
    return stopwords(language) if language in _LANGUAGES else frozenset()


# Extra words that carry no topic on their own (numbers spelt out, reporting verbs...).
_FILLER: Final = frozenset(
    [
        "also",
        "however",
        "thus",
        "therefore",
        "may",
        "might",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "using",
        "used",
        "use",
        "based",
        "among",
        "within",
        "without",
        "whereas",
        "although",
        "via",
        "per",
        "including",
        "include",
        "includes",
        "respectively",
        "shown",
        "show",
        "shows",
        "found",
        "find",
        "finds",
        "well",
        "one",
        "two",
        "three",
        "four",
        "five",
        "first",
        "second",
        "new",
        "many",
        "much",
        "several",
        "various",
        "different",
        "important",
        "result",
        "results",
        "study",
        "studies",
        "também",
        "porém",
        "assim",
        "pode",
        "podem",
        "ser",
        "foi",
        "são",
        "sobre",
        "entre",
        "sem",
        "através",
        "cada",
        "dois",
        "duas",
        "três",
        "primeiro",
        "primeira",
        "outro",
        "outra",
        "outros",
        "outras",
    ]
)

# Lower-case words allowed inside a multi-word name ("Bank of America", "Banco do Brasil").
_CONNECTORS: Final = frozenset(
    [
        "of",
        "for",
        "the",
        "de",
        "da",
        "do",
        "das",
        "dos",
        "del",
        "la",
        "le",
        "van",
        "von",
        "der",
        "den",
        "du",
    ]
)
# Capitalised by spelling, not because they name something.
_NOT_NAMES: Final = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "janeiro",
        "fevereiro",
        "março",
        "marco",
        "abril",
        "maio",
        "junho",
        "julho",
        "agosto",
        "setembro",
        "outubro",
        "novembro",
        "dezembro",
        "i",
    ]
)
# Upper-case section labels of structured abstracts and reports.
_LABELS: Final = frozenset(
    [
        "abstract",
        "background",
        "objective",
        "objectives",
        "aim",
        "aims",
        "purpose",
        "introduction",
        "methods",
        "method",
        "design",
        "setting",
        "settings",
        "participants",
        "patients",
        "interventions",
        "measurements",
        "results",
        "findings",
        "conclusion",
        "conclusions",
        "discussion",
        "interpretation",
        "summary",
        "context",
        "importance",
        "significance",
        "limitations",
        "note",
        "notes",
        "resumo",
        "introdução",
        "métodos",
        "resultados",
        "conclusão",
        "conclusões",
        "objetivo",
        "objetivos",
    ]
)
_PLURAL_ACRONYM: Final = re.compile(r"^([A-Z][A-Z0-9-]*[A-Z0-9])s$")

_WORD: Final = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
# A token for entity scanning: a word, a number, or one punctuation character.
_TOKEN: Final = re.compile(r"[^\W_][\w'’.-]*[^\W_]|[^\W_]|[^\w\s]", re.UNICODE)
_ACRONYM: Final = re.compile(r"^(?=(?:[^a-z]*[A-Z]){2})[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*$")
_SENTENCE_END: Final = frozenset(".!?:;")
_BREAKS: Final = re.compile(r"[.,;:!?()\[\]{}\"“”|*#=<>/\\\n]+")


def detect_language(text: str, default: str = "english") -> str:
    """``english`` or ``portuguese`` by stopword counts; ``default`` when unclear."""
    words = [w.casefold() for w in _WORD.findall(text[:3000])]
    if not words:
        return default if default in _LANGUAGES else "english"
    en = sum(w in _stopwords("english") for w in words)
    pt = sum(w in _stopwords("portuguese") for w in words)
    if pt > en * 1.2 and pt >= 3:
        return "portuguese"
    if en > pt * 1.2 and en >= 3:
        return "english"
    return default if default in _LANGUAGES else "english"


# -- keywords -----------------------------------------------------------------------------
def _plain_lines(text: str) -> Iterable[str]:
    """Lines without Markdown markup that would glue words to symbols."""
    fence = False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            continue
        if not fence:
            yield stripped.lstrip("#>-*+ ").replace("|", " . ")


@functools.cache
def _keyword_stop(language: str) -> frozenset[str]:
    return _stopwords(language) | _stopwords("english") | _FILLER


@functools.cache
def _entity_stop(language: str) -> frozenset[str]:
    return _stopwords(language) | _stopwords("english") | _stopwords("portuguese")


def extract_keywords(text: str, language: str = "english", limit: int = MAX_KEYWORDS) -> list[str]:
    """The chunk's key phrases, best first (lower-case, at most ``limit``)."""
    stop = _keyword_stop(language)
    phrases: list[tuple[str, ...]] = []
    for line in _plain_lines(text):
        for piece in _BREAKS.split(line):
            current: list[str] = []
            for raw in piece.split():
                word = raw.strip("'’-").casefold()
                if (
                    len(word) < 3
                    or word in stop
                    or not _WORD.fullmatch(word)
                    or (not word.isascii() and strip_diacritics(word) in stop)
                ):
                    if current:
                        phrases.append(tuple(current))
                    current = []
                    continue
                current.append(word)
                if len(current) == _MAX_PHRASE_WORDS:
                    phrases.append(tuple(current))
                    current = []
            if current:
                phrases.append(tuple(current))
    if not phrases:
        return []
    freq: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for phrase in phrases:
        for w in phrase:
            freq[w] += 1
            degree[w] += len(phrase)
    repeats = Counter(phrases)
    scored: dict[str, float] = {}
    for phrase, count in repeats.items():
        score = sum(degree[w] / freq[w] for w in phrase) + sum(freq[w] - 1 for w in phrase)
        scored[" ".join(phrase)] = score * (1 + 0.5 * (count - 1))
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
    out: list[str] = []
    seen_words: set[str] = set()
    for phrase_text, _ in ranked:
        words = phrase_text.split()
        # A single word already inside a chosen phrase adds nothing.
        if len(words) == 1 and words[0] in seen_words:
            continue
        out.append(phrase_text)
        seen_words.update(words)
        if len(out) >= limit:
            break
    return out


# -- entities -----------------------------------------------------------------------------
def _is_capitalised(token: str) -> bool:
    return (token[:1].isupper() and not token.isupper()) or (len(token) == 1 and token.isupper())


def _is_acronym(token: str) -> bool:
    return bool(_ACRONYM.match(token)) and len(token) <= 15


def extract_entities(text: str, language: str = "english", limit: int = MAX_ENTITIES) -> list[str]:
    """Names in the chunk (acronyms and capitalised multi-word spans), most frequent first."""
    scan = _EntityScan(_entity_stop(language))
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped and not stripped.startswith(("```", "~~~")):
            scan.line(stripped)
    return scan.ranked(limit)


class _EntityScan:
    """The names found so far in one chunk, line by line."""

    def __init__(self, stop: frozenset[str] | set[str]) -> None:
        self.stop = stop
        self.found: Counter[str] = Counter()
        self.first_seen: dict[str, int] = {}
        self.mid_capitalised: set[str] = set()
        self.singles_at_start: list[str] = []

    def add(self, name: str) -> None:
        self.found[name] += 1
        self.first_seen.setdefault(name, len(self.first_seen))

    def ranked(self, limit: int) -> list[str]:
        for name in self.singles_at_start:
            if name in self.mid_capitalised:
                self.add(name)
        ranked = sorted(self.found, key=lambda n: (-self.found[n], self.first_seen[n]))
        return ranked[:limit]

    def line(self, stripped: str) -> None:
        stop = self.stop
        heading = stripped.startswith("#")
        tokens = _TOKEN.findall(stripped.lstrip("#>-*+ "))
        # Title-case lines (headings, slide titles) capitalise everything: acronyms only.
        words = [t for t in tokens if t[:1].isalpha()]
        title_case = heading or (
            len(words) >= 3 and sum(_is_capitalised(w) for w in words) >= 0.7 * len(words)
        )
        at_start = True
        span: list[str] = []
        span_starts_sentence = False
        for tok in tokens:
            if not tok[:1].isalnum():  # punctuation ends a name
                if span:
                    self.close(span, span_starts_sentence)
                    span = []
                at_start = tok in _SENTENCE_END
                continue
            possessive = tok.endswith(("'s", "’s"))
            if possessive:
                tok = tok[:-2]
            if title_case:
                if _is_acronym(tok) and tok.casefold() not in stop:
                    self.add(tok)
            elif tok.casefold() in _LABELS and tok.isupper():
                # "RESULTS We found…": a section label, then a new sentence.
                self.close(span, span_starts_sentence)
                span = []
                at_start = True
                continue
            elif (_is_acronym(tok) and tok.casefold() not in stop) or (
                tok[:1].isalpha() and _is_capitalised(tok)
            ):
                if not span:
                    span_starts_sentence = at_start
                span.append(tok)
                if possessive:  # "Cole's LMS method": the name ends at the 's
                    self.close(span, span_starts_sentence)
                    span = []
            elif span and tok in _CONNECTORS:
                span.append(tok)
            elif span:
                self.close(span, span_starts_sentence)
                span = []
            at_start = False
        self.close(span, span_starts_sentence)

    def close(self, span: list[str], starts_sentence: bool) -> None:
        """A finished run of capitalised words: trimmed, then counted as a name (or not)."""
        stop = self.stop
        span = list(span)
        while span and span[-1] in _CONNECTORS:
            span.pop()
        if starts_sentence and len(span) > 2 and span[1] in _CONNECTORS:
            # "Analysis of the PBMC": the first word is capitalised only by position.
            span = span[1:]
            while span and span[0] in _CONNECTORS:
                span.pop(0)
        while starts_sentence and span and span[0].casefold() in stop and not _is_acronym(span[0]):
            span.pop(0)
            starts_sentence = False  # "Na Bahia": what follows is capitalised on purpose
        span = [_PLURAL_ACRONYM.sub(r"\1", w) for w in span]
        if len(span) == 1 and span[0].casefold() in _NOT_NAMES:
            span = []
        if not span:
            return
        name = " ".join(span)
        if len(span) == 1:
            if _is_acronym(span[0]):
                self.add(name)
            elif starts_sentence:
                self.singles_at_start.append(name)
            elif len(name) > 2 and name.casefold() not in stop | _FILLER:
                self.mid_capitalised.add(name)
                self.add(name)
        elif len(span) <= _MAX_ENTITY_WORDS:
            self.add(name)


# -- dates --------------------------------------------------------------------------------
_MONTHS: Final = {
    **{
        m: i + 1
        for i, m in enumerate(
            [
                "january",
                "february",
                "march",
                "april",
                "may",
                "june",
                "july",
                "august",
                "september",
                "october",
                "november",
                "december",
            ]
        )
    },
    **{
        m: i + 1
        for i, m in enumerate(
            [
                "janeiro",
                "fevereiro",
                "março",
                "abril",
                "maio",
                "junho",
                "julho",
                "agosto",
                "setembro",
                "outubro",
                "novembro",
                "dezembro",
            ]
        )
    },
    **{
        m: i + 1
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        )
        if m != "may"
    },
    "sept": 9,
    "marco": 3,
    "fev": 2,
    "abr": 4,
    "mai": 5,
    "ago": 8,
    "set": 9,
    "out": 10,
    "dez": 12,
}
_MONTH_RE: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR: Final = r"(1[5-9]\d\d|20\d\d|2100)"
_DATE_PATTERNS: Final = (
    # 2024-03-03
    ("ymd", re.compile(rf"\b{_YEAR}-(\d{{1,2}})-(\d{{1,2}})\b")),
    # 3 March 2024, 3rd of March 2024, 3 de março de 2024, 3. März...
    (
        "dmy",
        re.compile(
            rf"\b(\d{{1,2}})(?:st|nd|rd|th|º|°)?\.?\s+(?:of\s+|de\s+)?({_MONTH_RE})\.?,?\s+"
            rf"(?:de\s+|of\s+)?{_YEAR}\b",
            re.IGNORECASE,
        ),
    ),
    # March 3, 2024
    (
        "mdy",
        re.compile(
            rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}\b", re.IGNORECASE
        ),
    ),
    # 03/03/2024 or 03.03.2024
    ("numeric", re.compile(rf"\b(\d{{1,2}})[/.](\d{{1,2}})[/.]{_YEAR}\b")),
    # March 2024, março de 2024
    ("my", re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:de\s+|of\s+)?{_YEAR}\b", re.IGNORECASE)),
    # in 2019, since 2019, em 2019, desde 2019
    (
        "y",
        re.compile(
            r"\b(?:in|since|during|until|till|from|by|to|before|after|em|desde|até|ate|após|"
            rf"apos|antes\s+de|de|of)\s+{_YEAR}\b(?![-/.]\d)",
            re.IGNORECASE,
        ),
    ),
)


_ANY_YEAR: Final = re.compile(r"(?<!\d)(?:1[5-9]\d\d|20\d\d|2100)(?!\d)")
_LETTERS: Final = re.compile(r"[^\W\d_]+")
_MONTH_SET: Final = frozenset(_MONTHS)
_NEEDS_MONTH: Final = frozenset({"dmy", "mdy", "my"})


def _iso(year: int, month: int | None = None, day: int | None = None) -> str | None:
    if month is None:
        return f"{year:04d}"
    if not 1 <= month <= 12:
        return None
    if day is None:
        return f"{year:04d}-{month:02d}"
    days = [31, 29 if year % 4 == 0 and (year % 100 or year % 400 == 0) else 28, 31, 30, 31,
            30, 31, 31, 30, 31, 30, 31]  # fmt: skip
    if not 1 <= day <= days[month - 1]:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}"


def extract_dates(text: str, language: str = "english", limit: int = MAX_DATES) -> list[str]:
    """Dates mentioned in the chunk, normalised (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``),
    in order of first mention. Spans already read as a fuller date are not read again."""
    if not _ANY_YEAR.search(text):  # every pattern needs a year: most chunks stop here
        return []
    has_month = not _MONTH_SET.isdisjoint(_LETTERS.findall(text.casefold()))
    taken: list[tuple[int, int]] = []
    out: dict[str, int] = {}

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    for kind, pattern in _DATE_PATTERNS:
        if kind in _NEEDS_MONTH and not has_month:
            continue
        for m in pattern.finditer(text):
            if not free(m.start(), m.end()):
                continue
            g = m.groups()
            value: str | None
            if kind == "ymd":
                value = _iso(int(g[0]), int(g[1]), int(g[2]))
            elif kind == "dmy":
                value = _iso(int(g[2]), _MONTHS[g[1].casefold()], int(g[0]))
            elif kind == "mdy":
                value = _iso(int(g[2]), _MONTHS[g[0].casefold()], int(g[1]))
            elif kind == "numeric":
                a, b = int(g[0]), int(g[1])
                day_first = language == "portuguese" or a > 12
                value = _iso(int(g[2]), b, a) if day_first else _iso(int(g[2]), a, b)
            elif kind == "my":
                value = _iso(int(g[1]), _MONTHS[g[0].casefold()])
            else:
                value = _iso(int(g[0]))
            if kind in ("ymd", "dmy", "mdy", "numeric"):
                taken.append((m.start(), m.end()))  # an impossible day is no date at all
            if value is None:
                continue
            taken.append((m.start(), m.end()))
            out.setdefault(value, m.start())
    return sorted(out, key=lambda v: out[v])[:limit]


# -- content types ------------------------------------------------------------------------
_LIST_ITEM: Final = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")


def extract_content_types(text: str) -> list[str]:
    """Which kinds of content the chunk holds: table, code, list, heading, text."""
    kinds: set[str] = set()
    fence = False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            kinds.add("code")
            fence = not fence
            continue
        if fence or not stripped:
            continue
        if stripped.startswith("|") and stripped.count("|") >= 2:
            kinds.add("table")
        elif stripped.startswith("#"):
            kinds.add("heading")
        elif _LIST_ITEM.match(line):
            kinds.add("list")
        else:
            kinds.add("text")
    order = ("table", "code", "list", "heading", "text")
    return [k for k in order if k in kinds]


def enrich_text(text: str, language: str = "english") -> Enrichment:
    """Keywords, entities, dates and content types of one chunk (no LLM)."""
    lang = detect_language(text, language)
    return Enrichment(
        keywords=tuple(extract_keywords(text, lang)),
        entities=tuple(extract_entities(text, lang)),
        dates=tuple(extract_dates(text, lang)),
        content_types=tuple(extract_content_types(text)),
        language=lang,
    )
