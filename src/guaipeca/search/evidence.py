"""Evidence within a character budget (SPEC 6.8): the best spans of the retrieved chunks.

A chunk is the unit a search retrieves; an agent's context is spent in characters. This
module scores the chunks' blocks (paragraphs, list items, tables, code blocks) one by one
against the query, then packs them, best first, into the budget: adjacent blocks merge into
one span, and the last block that does not fit is cut to the longest run of its whole
sentences around its best one (every cut at a sentence end; only a single sentence longer
than the budget is cut at a word break). Written by hand: packing is our edge, and no
library cuts exact spans this way.

Guarantees (tests/search/test_evidence.py): the spans fit the budget together, lie inside
the chunks they came from (so they are exact document ranges), never overlap, and a larger
budget keeps every whole block a smaller one returned, and the best sentence of the block
it cut (the blocks follow one order that does not depend on the budget).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "BLOCK_WEIGHT",
    "MIN_PIECE",
    "SENTENCE_WEIGHT",
    "Passage",
    "Span",
    "blocks",
    "pack",
    "sentences",
]

#: How much a block's own query-term score counts against its chunk's retrieval score
#: (both scaled to 0..1 over the candidates); picked on bench/context.py by the worst of
#: two held-out halves of the long squad-pt set (docs/benchmarks-quality.md).
BLOCK_WEIGHT = 0.7
#: A block's query-term score adds this much of its best sentence's: a question is most
#: often answered by one sentence that repeats its words (+0.01 within 1,000 characters).
SENTENCE_WEIGHT = 0.5
#: Below this many characters left, a cut block is not worth reading: packing stops.
MIN_PIECE = 40
# BM25's constants over blocks (Robertson & Zaragoza 2009): blocks vary less in length
# than documents and repeat a term less, so a lower k1 and a fuller length norm (measured).
_K1, _B = 0.8, 0.9

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s")
# A sentence ends at . ! ? or … (closing quotes and brackets after it kept), before
# whitespace and a character that does not start in lower case (a guard against "e.g. x").
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?=\s+[^\sa-z\u00df-\u00ff])")


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrieved chunk: where it lies in its document, its text and retrieval score."""

    doc: str  # one key per document (the caller's: corpus and document id)
    start: int
    text: str
    score: float
    position: int  # the chunk's number in its document (consecutive chunks touch)


@dataclass(frozen=True, slots=True)
class Span:
    """One piece of evidence: ``[start, end)`` of document ``doc``, from ``passages``
    (indices into the packed list), scored by its best block."""

    doc: str
    start: int
    end: int
    score: float
    passages: tuple[int, ...]
    #: A block in it was cut to fit the budget: the document goes on past ``end`` or
    #: before ``start`` with text the span's block holds.
    cut: bool = False


@dataclass(frozen=True, slots=True)
class _Block:
    passage: int
    start: int  # document offsets
    end: int
    score: float
    sentences: tuple[tuple[int, int], ...]  # document offsets, in order
    sentence_scores: tuple[float, ...]


def blocks(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each block of ``text``: runs of non-blank lines, a fenced
    code block kept whole across its blank lines, heading-only blocks left out (a span's
    heading trail names them), surrounding whitespace trimmed."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    fenced = False
    pos = 0
    for line in text.splitlines(keepends=True):
        blank = not line.strip()
        if _FENCE.match(line):
            fenced = not fenced
        if blank and not fenced:
            if start is not None:
                out.append((start, pos))
                start = None
        elif start is None:
            start = pos
        pos += len(line)
    if start is not None:
        out.append((start, pos))
    trimmed = []
    for lo, hi in out:
        piece = text[lo:hi]
        lo += len(piece) - len(piece.lstrip())
        hi -= len(piece) - len(piece.rstrip())
        if hi > lo and not all(_HEADING.match(ln) for ln in text[lo:hi].splitlines()):
            trimmed.append((lo, hi))
    return trimmed


def sentences(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """The sentences of ``text[lo:hi]`` as ``[start, end)``: cut after a sentence end and at
    line breaks (list items, table rows, code lines), whitespace between them left out."""
    out = []
    for m in re.finditer(r"[^\n]+", text[lo:hi]):
        line_lo = lo + m.start()
        cut = line_lo
        for end in _SENTENCE_END.finditer(text, line_lo, lo + m.end()):
            out.append((cut, end.end()))
            cut = end.end()
        out.append((cut, lo + m.end()))
    spans = []
    for s, e in out:
        piece = text[s:e]
        s += len(piece) - len(piece.lstrip())
        e -= len(piece) - len(piece.rstrip())
        if e > s:
            spans.append((s, e))
    return spans


#: A stretch of text as BM25 sees it: its length in terms, and its query terms' counts.
_Counts = tuple[int, dict[str, int]]


def _counts(tokens: list[str], weights: dict[str, float]) -> _Counts:
    found: dict[str, int] = {}
    for t in tokens:
        if t in weights:
            found[t] = found.get(t, 0) + 1
    return len(tokens), found


def _joined(parts: Sequence[_Counts]) -> _Counts:
    found: dict[str, int] = {}
    for _, part in parts:
        for t, n in part.items():
            found[t] = found.get(t, 0) + n
    return sum(n for n, _ in parts), found


def _bm25(counts: _Counts, weights: dict[str, float], avg_len: float) -> float:
    """BM25 of one block or sentence (Robertson & Zaragoza 2009, eq. 3.15), ``weights``
    the query terms' idf."""
    length, found = counts
    if not found:
        return 0.0
    norm = _K1 * (1 - _B + _B * length / avg_len)
    return sum(weights[t] * tf * (_K1 + 1) / (tf + norm) for t, tf in found.items())


def idf_weights(query_tokens: Sequence[str], total: int, freqs: dict[str, int]) -> dict[str, float]:
    """Each distinct query term's BM25 idf from the corpus's chunk statistics (Lucene's
    non-negative form), repeated query terms counted once per repeat."""
    out: dict[str, float] = {}
    for t in query_tokens:
        df = min(freqs.get(t, 0), total)
        out[t] = out.get(t, 0.0) + math.log(1 + (total - df + 0.5) / (df + 0.5))
    return out


def _scaled(values: Sequence[float]) -> list[float]:
    top = max(values, default=0.0)
    low = min(values, default=0.0)
    if top <= low:
        return [1.0 if top > 0 else 0.0 for _ in values]
    return [(v - low) / (top - low) for v in values]


def _candidate_blocks(
    passages: Sequence[Passage],
    tokenize: Callable[[int, str], list[str]],
    weights: Callable[[int], dict[str, float]],
) -> list[_Block]:
    """Every block of every passage, scored: ``BLOCK_WEIGHT`` x its query-term score (its
    BM25 plus ``SENTENCE_WEIGHT`` x its best sentence's, scaled over all blocks) plus the
    rest x its chunk's retrieval score (scaled over the passages)."""
    prior = _scaled([p.score for p in passages])
    raw: list[tuple[int, int, int, list[tuple[int, int]], list[_Counts]]] = []
    for i, p in enumerate(passages):
        w = weights(i)
        for lo, hi in blocks(p.text):
            sents = sentences(p.text, lo, hi)
            raw.append((i, lo, hi, sents, [_counts(tokenize(i, p.text[a:b]), w) for a, b in sents]))
    lengths = [sum(n for n, _ in parts) for *_, parts in raw]
    avg = max(1.0, sum(lengths) / len(lengths)) if lengths else 1.0
    lexical, per_sentence = [], []
    for i, *_, parts in raw:
        scores = tuple(_bm25(c, weights(i), avg) for c in parts)
        per_sentence.append(scores)
        whole = _bm25(_joined(parts), weights(i), avg)
        lexical.append(whole + SENTENCE_WEIGHT * max(scores, default=0.0))
    scaled = _scaled(lexical)
    out = []
    for (i, lo, hi, sents, _), lex, scores in zip(raw, scaled, per_sentence, strict=True):
        base = passages[i].start
        out.append(
            _Block(
                passage=i,
                start=base + lo,
                end=base + hi,
                score=BLOCK_WEIGHT * lex + (1 - BLOCK_WEIGHT) * prior[i],
                sentences=tuple((base + a, base + b) for a, b in sents),
                sentence_scores=scores,
            )
        )
    # Best first; ties keep retrieval order, then document order (deterministic).
    out.sort(key=lambda b: (-b.score, b.passage, b.start))
    return out


class _Layout:
    """Which document characters are known to be blank between two pieces: the passages'
    own whitespace, and the gap between two consecutive chunks of one document (only
    whitespace lies between chunks: SPEC 3.2)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self._by_doc: dict[str, list[Passage]] = {}
        for p in passages:
            self._by_doc.setdefault(p.doc, []).append(p)
        for ps in self._by_doc.values():
            ps.sort(key=lambda p: p.start)

    def blank(self, doc: str, lo: int, hi: int) -> bool:
        """Whether ``[lo, hi)`` of ``doc`` is known to hold only whitespace."""
        if lo >= hi:
            return True
        covered, previous = lo, None
        for p in self._by_doc.get(doc, []):
            p_end = p.start + len(p.text)
            if p_end <= covered:
                previous = p
                continue
            if p.start > covered and not _consecutive(previous, p):
                return False  # an unread stretch between chunks that are not neighbours
            if p.start >= hi:
                return True  # the rest lies between two neighbouring chunks
            if p.text[max(covered, p.start) - p.start : min(hi, p_end) - p.start].strip():
                return False
            covered, previous = p_end, p
            if covered >= hi:
                return True
        return False  # it runs past the last chunk read


def _consecutive(a: Passage | None, b: Passage) -> bool:
    return a is not None and a.position + 1 == b.position


class _Selection:
    """The pieces packed so far, per document, and what they cost with the blank gaps that
    merging them adds."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout
        self.pieces: dict[str, list[tuple[int, int, float, int]]] = {}
        self.cut: tuple[str, int] | None = None  # the piece cut from a larger block

    def cost(self, doc: str, lo: int, hi: int) -> int:
        """Characters that adding ``[lo, hi)`` adds: itself and the blank gaps that join it
        to the pieces around it."""
        extra = hi - lo
        for s, e, *_ in self.pieces.get(doc, []):
            if e <= lo and self.layout.blank(doc, e, lo):
                extra += lo - e
            elif s >= hi and self.layout.blank(doc, hi, s):
                extra += s - hi
        return extra

    def fits(self, doc: str, left: int, lo: int, hi: int) -> bool:
        """Whether adding ``[lo, hi)`` costs at most ``left`` characters."""
        return self.cost(doc, lo, hi) <= left

    def add(self, doc: str, lo: int, hi: int, score: float, passage: int) -> None:
        self.pieces.setdefault(doc, []).append((lo, hi, score, passage))

    def spans(self) -> list[Span]:
        """The pieces with blank gaps between them merged, best first."""
        out = []
        for doc, pieces in self.pieces.items():
            pieces.sort()
            run = [pieces[0]]
            for piece in pieces[1:]:
                if self.layout.blank(doc, run[-1][1], piece[0]):
                    run.append(piece)
                    continue
                out.append(self._span(doc, run))
                run = [piece]
            out.append(self._span(doc, run))
        out.sort(key=lambda s: (-s.score, s.doc, s.start))
        return out

    def _span(self, doc: str, run: list[tuple[int, int, float, int]]) -> Span:
        passages = tuple(sorted({p for *_, p in run}))
        cut = any(self.cut == (doc, lo) for lo, *_ in run)
        return Span(doc, run[0][0], run[-1][1], max(s for _, _, s, _ in run), passages, cut)


def _grown(block: _Block, room: Callable[[int, int], bool]) -> tuple[int, int] | None:
    """The longest run of ``block``'s whole sentences around its best one that ``room``
    accepts (the most of the budget spent, every cut at a sentence end); among runs of
    equal length, the one whose sentences score best."""
    sents, scores = block.sentences, block.sentence_scores
    if not sents:
        return None
    best = max(range(len(sents)), key=lambda k: (scores[k], -k))
    if not room(*sents[best]):
        return None
    chosen, key = (best, best), (0, 0.0)
    for lo in range(best, -1, -1):
        if not room(sents[lo][0], sents[best][1]):
            break
        total = sum(scores[lo:best])  # the run's score, grown with it
        for hi in range(best, len(sents)):
            if not room(sents[lo][0], sents[hi][1]):
                break
            total += scores[hi]
            candidate = (sents[hi][1] - sents[lo][0], total)
            if candidate > key:
                chosen, key = (lo, hi), candidate
    return sents[chosen[0]][0], sents[chosen[1]][1]


def pack(
    passages: Sequence[Passage],
    budget: int,
    tokenize: Callable[[int, str], list[str]],
    weights: Callable[[int], dict[str, float]],
) -> list[Span]:
    """The best evidence from ``passages`` (retrieved chunks, best first) that fits in
    ``budget`` characters, as merged spans, best first.

    ``tokenize(i, text)`` gives the index terms of text from passage ``i``, ``weights(i)``
    the query terms' idf for passage ``i``'s corpus. Blocks are taken whole, best first,
    while they fit; the first that does not is cut to its best sentences, and packing
    stops there (so every budget packs a prefix of one order).
    """
    layout = _Layout(passages)
    chosen = _Selection(layout)
    left = budget
    for block in _candidate_blocks(passages, tokenize, weights):
        doc = passages[block.passage].doc
        if left < MIN_PIECE:
            break
        need = chosen.cost(doc, block.start, block.end)
        if need <= left:
            chosen.add(doc, block.start, block.end, block.score, block.passage)
            left -= need
            continue
        window = _grown(block, functools.partial(chosen.fits, doc, left))
        if window is None:
            window = _first_words(passages[block.passage], block, left, chosen)
        if window is not None:
            chosen.add(doc, window[0], window[1], block.score, block.passage)
            chosen.cut = (doc, window[0])
        break
    return chosen.spans() if chosen.pieces else []


def _first_words(
    passage: Passage, block: _Block, left: int, chosen: _Selection
) -> tuple[int, int] | None:
    """The start of ``block``'s best sentence, cut at the last whitespace that fits in
    ``left`` characters with its joining gaps (a sentence longer than what is left: a
    24,000-character line)."""
    best = max(range(len(block.sentences)), key=lambda k: (block.sentence_scores[k], -k))
    lo, hi = block.sentences[best]
    text = passage.text[lo - passage.start : hi - passage.start]
    room = left
    while room > 0:
        cut = text.rfind(" ", 0, room + 1)
        if cut <= 0:
            cut = room  # no word break at all: cut at the room itself
        piece = text[:cut].rstrip()
        if not piece:
            return None
        over = chosen.cost(passage.doc, lo, lo + len(piece)) - left
        if over <= 0:
            return lo, lo + len(piece)
        room = len(piece) - over
    return None
