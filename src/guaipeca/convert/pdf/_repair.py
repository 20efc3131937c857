"""Text repairs for PDF extraction: control characters and odd spaces, and the joining of
wrapped lines that undoes end-of-line hyphenation (see the package docstring's notes on
paragraphs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

_HYPHEN_PREFIXES = frozenset({"non", "self", "well", "all", "ex", "half", "quasi", "cross"})
_HYPHENATED = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")
_WORD = re.compile(r"[^\W\d_]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u200b\ufeff]")
SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u3000]+")
_CJK = re.compile(r"[\u2e80-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


@dataclass(slots=True)
class Vocab:
    """The words of one document, to tell a line-end hyphen from a real one."""

    # Compounds written with a hyphen mid-line: "non-normal" → hyphenated["non"] = {"normal"}
    hyphenated: dict[str, set[str]] = field(default_factory=dict)
    words: set[str] = field(default_factory=set)


def clean(text: str) -> str:
    """Control characters and zero-width marks to spaces, every kind of space to one."""
    text = _CONTROL.sub(" ", text)
    return SPACES.sub(" ", text)


def vocabulary(texts: Iterable[str]) -> Vocab:
    """The words and hyphenated compounds of a document's texts."""
    vocab = Vocab()
    for text in texts:
        low = text.lower()
        for m in _HYPHENATED.finditer(low):
            parts = m.group(0).split("-")
            for a, b in pairwise(parts):
                vocab.hyphenated.setdefault(a, set()).add(b)
        vocab.words.update(_WORD.findall(low))
    return vocab


def join(a: str, b: str, vocab: Vocab) -> str:
    """Join two wrapped lines of one paragraph, undoing end-of-line hyphenation."""
    if not a:
        return b
    if not b:
        return a
    last = a[-1]
    if last == "\u00ad":  # soft hyphen: always a line-break hyphenation
        return a[:-1] + b
    if len(a) >= 2 and not a[-2].isspace():
        if last == "-" and a[-2].isalpha() and b[0].isalpha():
            token = a.rsplit(" ", 1)[-1]
            head = _WORD.findall(token)
            tail = _WORD.match(b)
            if (
                a[-2].islower()
                and b[0].islower()
                and head
                and tail is not None
                and not _is_address(token)
                and not _keep_hyphen(head[-1].lower(), tail.group(0).lower(), vocab)
            ):
                return a[:-1] + b
            return a + b
        if last in "–—/@":
            return a + b
    if _CJK.match(last) and _CJK.match(b[0]):  # no spaces between Chinese/Japanese words
        return a + b
    return a + " " + b


def _is_address(token: str) -> bool:
    return "@" in token or "://" in token or token.lower().startswith("www.")


def _keep_hyphen(head: str, tail: str, vocab: Vocab) -> bool:
    joined = head + tail
    # "work-" / "hour" is kept when the text has "work-hours" (or "work-hour") elsewhere.
    tails = vocab.hyphenated.get(head, set())
    if joined not in vocab.words and any(
        t == tail or (min(len(t), len(tail)) >= 3 and (t.startswith(tail) or tail.startswith(t)))
        for t in tails
    ):
        return True
    return head in _HYPHEN_PREFIXES and joined not in vocab.words
