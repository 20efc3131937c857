"""A budgeted search's hits: the retrieved chunks packed into spans (search/evidence.py).

Each span becomes a :class:`~guaipeca.types.Hit` of the chunk it starts in (its id, so
``read_chunk``/``read_neighbors`` widen it), with the span's exact range and text, the
pages of every chunk it covers, and the score of its best block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from guaipeca.errors import InvalidArgumentError
from guaipeca.index.results import with_snippets
from guaipeca.search.evidence import Passage, Span, idf_weights, pack
from guaipeca.store.contract import CorpusStore
from guaipeca.types import Hit

__all__ = ["BUDGET_CANDIDATES", "MAX_BUDGET", "budgeted", "check_budget"]

#: Chunks retrieved for a budgeted search, whatever the budget: the same candidates for
#: every budget are what makes a larger budget keep every span of a smaller one. 10, 15
#: and 20 scored alike on bench/context.py.
BUDGET_CANDIDATES = 10
#: The largest budget a search takes, in characters: what the candidates hold at the
#: default chunk size (2,000); read_neighbors and read_document widen from there.
MAX_BUDGET = 20_000


def check_budget(budget: object, return_mode: str, section_mode: bool) -> int:
    """``budget`` as a checked character count.

    Raises:
        InvalidArgumentError: not an integer in 1..MAX_BUDGET, or asked with another
            return mode or ``section_mode`` (a budget already chooses what to return).
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or not 0 < budget <= MAX_BUDGET:
        raise InvalidArgumentError(
            f"budget must be an integer number of characters in 1..{MAX_BUDGET}, not {budget!r:.30}"
        )
    if return_mode != "chunks" or section_mode:
        raise InvalidArgumentError(
            "budget picks the spans to return itself: use it with return_mode 'chunks' "
            "and without section_mode"
        )
    return budget


def budgeted(
    found: list[Hit],
    stores: Mapping[str, CorpusStore],
    query: str,
    budget: int,
    snippet_chars: int,
    check: Callable[[], None],
) -> list[Hit]:
    """The best evidence of ``found`` (chunk hits, best first) within ``budget``
    characters, as hits with snippets, best first."""
    passages = [
        Passage(f"{h.corpus}\x00{h.doc_id}", h.start, h.text, h.score, h.position) for h in found
    ]
    weights: dict[str, dict[str, float]] = {}
    for name in {h.corpus for h in found}:
        store = stores[name]
        terms = store.analyzer.tokens(query)
        total, freqs = store.lexical.doc_freqs(terms)
        weights[name] = idf_weights(terms, total, freqs)
    check()

    def tokenize(i: int, text: str) -> list[str]:
        return stores[found[i].corpus].analyzer.tokens(text)

    spans = pack(passages, budget, tokenize, lambda i: weights[found[i].corpus])
    check()
    hits = [_hit(span, found, stores) for span in spans]
    return with_snippets(hits, stores, query, snippet_chars, check)


def _hit(span: Span, found: list[Hit], stores: Mapping[str, CorpusStore]) -> Hit:
    covered = [found[i] for i in span.passages]
    covered.sort(key=lambda h: h.start)
    first = next(h for h in covered if h.start <= span.start < h.end)
    if span.end <= first.end:
        text = first.text[span.start - first.start : span.end - first.start]
    else:  # merged across chunks: the blank gap between them is read from the document
        part = stores[first.corpus].catalog.document_part(
            first.doc_id, span.start, span.end - span.start
        )
        text = part[0].text if part else ""
    pages = [p for h in covered for p in (h.page_start, h.page_end) if p is not None]
    return dataclasses.replace(
        first,
        start=span.start,
        end=span.start + len(text),
        text=text,
        score=span.score,
        page_start=min(pages) if pages else None,
        page_end=max(pages) if pages else None,
        truncated=span.cut,
        snippet="",
        highlights=(),
    )
