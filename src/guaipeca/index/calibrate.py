"""A corpus measures its own dense side (search/calibration.py): sample its documents, cut a
pseudo-query from one chunk of each, and see where each retriever ranks the source document.

The sample is seeded by the corpus's name and size, so a calibration is repeatable, and the
same corpus gives the same weight in memory and on disk.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from guaipeca.search.calibration import (
    CALIBRATION_QUERIES,
    Calibration,
    pseudo_query,
    reciprocal_rank,
)
from guaipeca.store.contract import CorpusStore

__all__ = ["calibrate", "pseudo_queries"]

#: How deep each retriever's list is read for the source document.
CALIBRATION_DEPTH = 100


def pseudo_queries(
    store: CorpusStore, count: int = CALIBRATION_QUERIES, *, drop: float = 0.0
) -> list[tuple[str, str]]:
    """Up to ``count`` ``(doc_id, query)`` pairs: a sentence cut from one chunk of each of
    ``count`` documents drawn at random (a seeded draw: the same corpus, the same pairs).
    Documents with no sentence of 6 to 40 words are passed over."""
    documents = store.stats().documents
    if documents == 0:
        return []
    rng = random.Random(f"{store.name}:{documents}")
    out: list[tuple[str, str]] = []
    # Each document at most once; a few more draws than needed make up for passed-over ones.
    for offset in rng.sample(range(documents), min(documents, 3 * count)):
        if len(out) == count:
            break
        rows = store.catalog.list_documents(where=None, corpus=store.name, limit=1, offset=offset)
        if not rows:
            continue
        chunks = store.catalog.document_chunks(rows[0][0])
        if not chunks:
            continue
        chunk = chunks[rng.randrange(len(chunks))]
        query = pseudo_query(chunk.text, rng, drop=drop)
        if query is not None:
            out.append((chunk.doc_id, query))
    return out


def calibrate(
    store: CorpusStore,
    embed_query: Callable[[str], npt.NDArray[np.float32]],
    queries: list[tuple[str, str]] | None = None,
) -> Calibration:
    """Each retriever's mean reciprocal rank of the source document of ``queries`` (default:
    :func:`pseudo_queries` of ``store``), reading the first 100 results of each."""
    pairs = pseudo_queries(store) if queries is None else queries
    dense = keyword = 0.0
    for doc_id, query in pairs:
        keyword += reciprocal_rank(_doc_ids(store, store.keyword(query, CALIBRATION_DEPTH)), doc_id)
        hits = store.dense(embed_query(query), CALIBRATION_DEPTH, scan="exact")
        dense += reciprocal_rank(_doc_ids(store, hits), doc_id)
    n = len(pairs)
    return Calibration(n, dense / n if n else 0.0, keyword / n if n else 0.0)


def _doc_ids(store: CorpusStore, hits: list[tuple[int, float]]) -> list[str]:
    rows = store.rows([pk for pk, _ in hits])
    return [rows[pk].doc_id for pk, _ in hits if pk in rows]
