"""Snippets: the window of a chunk with the most query terms, the terms marked **like this**."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["make_snippet"]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def make_snippet(
    text: str,
    query_terms: set[str],
    term_spans: Callable[[str], Sequence[tuple[int, int, str]]],
    *,
    width: int = 240,
) -> str:
    """Pick the ``width``-character window holding the most distinct query terms.

    ``term_spans`` maps a text to its index terms (stemmed, stopwords dropped) with their
    character spans — the lexical index's own analysis (``Analyzer.term_spans``), so
    "running" in the text matches "runs" in the query. A match is marked as the whole word
    around it. Without matches the snippet is the chunk's opening.
    """
    flat = " ".join(text.split())
    if not flat:
        return ""
    matches: list[tuple[int, int, str]] = []
    if query_terms:
        last_end = -1
        for start, end, term in term_spans(flat):
            if term not in query_terms or start < last_end:
                continue  # not asked for, or inside a word already marked
            # Grow to the whole word: "covid" matched inside "covid19" marks "covid19".
            while start > 0 and _is_word_char(flat[start - 1]):
                start -= 1
            while end < len(flat) and _is_word_char(flat[end]):
                end += 1
            if start < last_end:
                continue
            matches.append((start, end, term))
            last_end = end
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
