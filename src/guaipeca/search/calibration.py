"""A corpus calibrates its own fusion: pseudo-queries cut from its chunks, and the dense share
that follows from how well each retriever finds their source.

No labels are needed, and nothing depends on the model or the language: the index samples a
few chunks, cuts a sentence out of each as a query (a known-item search, as in Azzopardi, de
Rijke & Balog, "Building simulated queries for known-item topics", SIGIR 2007), and asks both
retrievers for it. A sentence shares every word with its source, so keyword search finds it
almost always; what varies is how often the *dense* side does. A model that does not know the
corpus's language, or a weak (static) one, misses its own chunks, and its share in the fusion
falls with that. Measured by bench/fusion.py ``transfer`` against labelled sets, it did not
hold (a sentence is as easy for a static model as for a good one), so search does not use it.

Pure functions: the index (index/calibrate.py) samples the chunks and runs the searches.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CALIBRATION_QUERIES",
    "Calibration",
    "calibrated_share",
    "pseudo_query",
    "reciprocal_rank",
]

#: Pseudo-queries per calibration: enough that the dense hit rate's standard error is below
#: 0.05, few enough that a calibration costs about as much as embedding one small document.
CALIBRATION_QUERIES = 64

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_WORDS, _MAX_WORDS = 6, 40


@dataclass(frozen=True, slots=True)
class Calibration:
    """How well each retriever found the source of a corpus's pseudo-queries: mean
    reciprocal rank of the source document within the first ``depth`` results (0 when
    missing), over ``queries`` pseudo-queries."""

    queries: int
    dense_mrr: float
    keyword_mrr: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "queries": self.queries,
            "dense_mrr": self.dense_mrr,
            "keyword_mrr": self.keyword_mrr,
        }


def pseudo_query(text: str, rng: random.Random, *, drop: float = 0.0) -> str | None:
    """One sentence of ``text`` with 6 to 40 words (headings, tables and code left out),
    chosen by ``rng``; with ``drop`` > 0 each word is left out with that probability (the
    sentence's first word always stays). None when the text has no such sentence."""
    lines = [
        line for line in _prose_lines(text) if not line.lstrip().startswith(("#", "|", ">", "<!--"))
    ]
    sentences = [
        s.strip()
        for line in lines
        for s in _SENTENCE_END.split(line)
        if _MIN_WORDS <= len(_WORD.findall(s)) <= _MAX_WORDS
    ]
    if not sentences:
        return None
    sentence = sentences[rng.randrange(len(sentences))]
    if drop <= 0:
        return sentence
    words = sentence.split()
    kept = [w for n, w in enumerate(words) if n == 0 or rng.random() >= drop]
    return " ".join(kept)


def _prose_lines(text: str) -> list[str]:
    """``text``'s lines outside fenced code blocks."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced and line.strip():
            out.append(line)
    return out


def reciprocal_rank(ranked: Sequence[str], target: str) -> float:
    """``1 / rank`` of the first occurrence of ``target`` in ``ranked`` (0 when absent)."""
    for rank, item in enumerate(ranked, start=1):
        if item == target:
            return 1.0 / rank
    return 0.0


def calibrated_share(calibration: Calibration, floor: float, ceiling: float) -> float:
    """The dense list's share of the fusion for a corpus with ``calibration``: ``ceiling``
    when the dense side finds its own chunks as well as keyword search does, falling linearly
    to 0 as its MRR falls to ``floor`` times keyword's.

    A candidate of bench/fusion.py ``transfer``, which grids the two constants; it is not the
    product's default: on the shared sets the ratio did not tell a good dense side from a
    weak one (docs/benchmarks-quality.md, "Fusion that transfers").
    """
    if calibration.queries == 0 or calibration.keyword_mrr <= 0:
        return ceiling
    ratio = min(1.0, calibration.dense_mrr / calibration.keyword_mrr)
    if ratio <= floor:
        return 0.0
    return ceiling * (ratio - floor) / (1.0 - floor)
