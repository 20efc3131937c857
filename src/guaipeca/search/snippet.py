"""Snippets: the window of a chunk with the most query terms, the terms marked **like this**."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["make_snippet"]

_WORD = re.compile(r"\w+", re.UNICODE)


def make_snippet(
    text: str,
    query_terms: set[str],
    analyze: Callable[[str], Sequence[str]],
    *,
    width: int = 240,
) -> str:
    """Pick the ``width``-character window holding the most distinct query terms.

    ``analyze`` maps one word to its index terms (stemmed, stopwords dropped), the same
    function the lexical index uses, so "running" in the text matches "runs" in the query.
    Without matches the snippet is the chunk's opening.
    """
    flat = " ".join(text.split())
    if not flat:
        return ""
    matches: list[tuple[int, int, str]] = []
    if query_terms:
        seen: dict[str, Sequence[str]] = {}  # words repeat: analyse each distinct one once
        for m in _WORD.finditer(flat):
            word = m.group()
            terms = seen.get(word)
            if terms is None:
                terms = seen[word] = analyze(word)
            for term in terms:
                if term in query_terms:
                    matches.append((m.start(), m.end(), term))
                    break
    if not matches:
        return flat[:width] + ("…" if len(flat) > width else "")
    # Slide over the matches: the window starting at each match, scored by distinct terms.
    best_start, best_score = matches[0][0], -1
    j = 0
    for i, (start, _, _) in enumerate(matches):
        j = max(j, i)
        while j + 1 < len(matches) and matches[j + 1][1] - start <= width:
            j += 1
        score = len({t for _, _, t in matches[i : j + 1]})
        if score > best_score:
            best_start, best_score = start, score
    # Start a little before the first match, at a word boundary, so it reads naturally.
    lo = max(0, best_start - width // 6)
    if lo > 0:
        space = flat.rfind(" ", 0, lo + 1)
        lo = space + 1 if space >= 0 else lo
    hi = min(len(flat), lo + width)
    if hi < len(flat):
        space = flat.rfind(" ", lo, hi)
        hi = space if space > best_start else hi
    pieces: list[str] = []
    cursor = lo
    for start, end, _ in matches:
        if start < lo or end > hi:
            continue
        pieces.append(flat[cursor:start])
        pieces.append(f"**{flat[start:end]}**")
        cursor = end
    pieces.append(flat[cursor:hi])
    return ("…" if lo > 0 else "") + "".join(pieces) + ("…" if hi < len(flat) else "")
