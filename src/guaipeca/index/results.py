"""From a fused candidate list to what :meth:`Index.search` returns: lexical and ToC
reranking, rows turned into hits with snippets, hits grouped and widened to sections or
documents; also the shapes shared with the reading calls (chunks, a document's ToC).

Every function takes the open corpora by name (``stores``); none keeps state.
"""

from __future__ import annotations

import dataclasses
import json
import math
from bisect import bisect_right
from collections.abc import Callable, Mapping
from typing import Any

from guaipeca.chunk import headings
from guaipeca.config import SearchSettings
from guaipeca.errors import InvalidArgumentError, RerankError
from guaipeca.search.rerank import Candidate, bm25_idf, lexical_rerank
from guaipeca.search.rerank_http import HttpReranker
from guaipeca.search.snippet import make_snippet
from guaipeca.store import ChunkRow, DocRow
from guaipeca.store.contract import CorpusStore
from guaipeca.types import Chunk, Hit, ScoreParts, location_of

# One candidate of a fused list: (score, corpus name, chunk key, where the score came from).
Scored = tuple[float, str, int, ScoreParts]


def score_parts(
    dense: list[tuple[int, float]], lexical: list[tuple[int, float]]
) -> dict[int, ScoreParts]:
    """Each retrieved chunk's score and rank in the dense and the lexical list."""
    d = {pk: (score, rank) for rank, (pk, score) in enumerate(dense, start=1)}
    lx = {pk: (score, rank) for rank, (pk, score) in enumerate(lexical, start=1)}
    out: dict[int, ScoreParts] = {}
    for pk in d.keys() | lx.keys():
        ds, dr = d.get(pk, (None, None))
        ls, lr = lx.get(pk, (None, None))
        out[pk] = ScoreParts(dense=ds, lexical=ls, dense_rank=dr, lexical_rank=lr)
    return out


def rerank(
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    weights: Mapping[str, float],
    settings: SearchSettings,
    query: str,
    before: int,
    *,
    lexical: bool,
    toc: bool,
) -> list[Scored]:
    """The fused list with its first ``before`` entries re-ordered by the lexical
    reranker (search/rerank.py); every score is normalised by the best fused one."""
    head, tail = scored[:before], scored[before:]
    pks_by_corpus: dict[str, list[int]] = {}
    for _, name, pk, _ in head:
        pks_by_corpus.setdefault(name, []).append(pk)
    rows: dict[tuple[str, int], ChunkRow] = {}
    terms: dict[str, list[str]] = {}
    idf: dict[str, dict[str, float]] = {}
    for name, pks in pks_by_corpus.items():
        store = stores[name]
        rows.update(((name, pk), row) for pk, row in store.rows(pks).items())
        terms[name] = store.analyzer.tokens(query)
        total, freqs = store.lexical.doc_freqs(terms[name])
        idf[name] = {t: bm25_idf(max(total, df), df) for t, df in freqs.items()}
    analyse = {name: stores[name].analyzer.tokens for name in pks_by_corpus}
    # Rerank on the fused scores before corpus weights, then weigh the result: a corpus
    # of weight 0 stays at 0 however well its chunks cover the query.
    weight = {name: weights.get(name, 1.0) for name in pks_by_corpus}
    candidates = []
    for score, name, pk, parts in head:
        row = rows.get((name, pk))
        candidates.append(
            Candidate(
                key=(name, pk, parts),
                score=score / weight[name] if weight[name] > 0 else 0.0,
                tokens=analyse[name](row.text) if row and lexical else (),
                idf=idf[name],
                heading_tokens=frozenset(analyse[name](" ".join(row.heading_path)))
                if row and toc
                else frozenset(),
            )
        )
    best = max(c.score for c in candidates)
    best = best if best > 0 else 1.0
    # One query may span corpora of different languages; the terms differ per corpus,
    # so rerank each candidate against its own corpus's analysed query.
    reranked: list[Scored] = []
    for name in pks_by_corpus:
        for (_, pk, parts), value in lexical_rerank(
            terms[name],
            [c for c in candidates if c.key[0] == name],
            coverage_weight=settings.rerank_coverage if lexical else 0.0,
            proximity_weight=settings.rerank_proximity if lexical else 0.0,
            heading_weight=settings.toc_boost if toc else 0.0,
            best=best,
        ):
            # value * best >= the unweighted fused score, so after weighting every
            # reranked score stays at or above the tail's (weighted, fused) scores.
            final = value * best * weight[name]
            reranked.append((final, name, pk, dataclasses.replace(parts, rerank=value)))
    reranked.sort(key=lambda t: (-t[0], t[1], t[2]))
    return reranked + tail


def http_rerank(
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    reranker: HttpReranker,
    query: str,
    before: int,
    threshold: float | None,
) -> tuple[list[Scored], str | None]:
    """The best ``before`` candidates re-ordered by an HTTP reranker's scores (which become
    the hits' scores), those below ``threshold`` and those the server did not score left
    out; the candidates past ``before`` are not returned. When the call fails: the fused
    list unchanged, and why (one line)."""
    head: list[Scored] = []
    texts: list[str] = []
    by_corpus: dict[str, list[int]] = {}
    for _, name, pk, _ in scored[:before]:
        by_corpus.setdefault(name, []).append(pk)
    rows = {name: stores[name].rows(pks) for name, pks in by_corpus.items()}
    for item in scored[:before]:
        row = rows[item[1]].get(item[2])
        if row is not None:  # deleted since retrieval
            head.append(item)
            texts.append(row.text)
    try:
        values = reranker.scores(query, texts)
    except RerankError as exc:
        return scored, str(exc)
    kept = [
        (value, name, pk, dataclasses.replace(parts, rerank=value))
        for (_, name, pk, parts), value in zip(head, values, strict=True)
        if math.isfinite(value) and (threshold is None or value >= threshold)
    ]
    # Equal reranker scores keep the fused order (a stable sort).
    kept.sort(key=lambda t: -t[0])
    return kept, None


def _never() -> None:
    pass


def hits(
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    query: str,
    snippet_chars: int,
    *,
    snippets: bool = True,
    check: Callable[[], None] = _never,
) -> list[Hit]:
    """The candidates as hits, in order; chunks deleted since retrieval are left out.
    ``check`` is called between corpora and between snippets, and may raise to stop."""
    by_corpus: dict[str, list[int]] = {}
    for _, name, pk, _ in scored:
        by_corpus.setdefault(name, []).append(pk)
    rows = {}
    for name, pks in by_corpus.items():
        check()
        rows[name] = stores[name].rows(pks)
    out: list[Hit] = []
    for score, name, pk, parts in scored:
        row = rows[name].get(pk)
        if row is None:  # deleted between retrieval and fetch
            continue
        out.append(hit_from_row(name, row, score, parts, ""))
    return with_snippets(out, stores, query, snippet_chars, check) if snippets else out


def with_snippets(
    found: list[Hit],
    stores: Mapping[str, CorpusStore],
    query: str,
    width: int,
    check: Callable[[], None] = _never,
) -> list[Hit]:
    """The hits with their snippets: the query terms of each hit's own corpus in context
    (``check`` is called before each snippet and may raise to stop)."""
    terms: dict[str, set[str]] = {}
    out = []
    for h in found:
        check()
        analyzer = stores[h.corpus].analyzer
        if h.corpus not in terms:
            terms[h.corpus] = set(analyzer.tokens(query))
        snip = make_snippet(h.text, terms[h.corpus], analyzer.term_spans, width=width)
        out.append(dataclasses.replace(h, snippet=snip.text, highlights=snip.highlights))
    return out


class _Budget:
    """Characters of text left for widened hits (None: no limit)."""

    def __init__(self, chars: int | None) -> None:
        self.left = chars

    def cut(self, hit: Hit) -> Hit:
        """``hit`` with its text cut to what is left (``end`` moved with it)."""
        if self.left is None:
            return hit
        keep = min(len(hit.text), self.left)
        self.left -= keep
        if keep == len(hit.text):
            return hit
        return dataclasses.replace(hit, text=hit.text[:keep], end=hit.start + keep, truncated=True)


def grouped(
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    settings: SearchSettings,
    query: str,
    top_k: int,
    return_mode: str,
    section_mode: bool,
    *,
    max_chars: int | None = None,
    check: Callable[[], None] = _never,
) -> list[Hit]:
    """One hit per section or per document, ranked by its best chunk.

    ``return_mode``: ``documents`` widens each hit to its document; ``auto`` returns the
    chunks (sections under ``section_mode``) while their text together stays under
    ``settings.max_chars``, else the documents (the seed Guaipeca's auto);
    ``documents_if_fit`` returns the documents when they fit in ``settings.max_chars``
    together, else the chunks (what ``auto`` did before issue 38).

    ``max_chars`` caps the text of all the widened hits together: past it, a hit's text
    stops early (``truncated``), down to none at all. ``check`` is called between
    documents and may raise to stop the search.
    """
    width = settings.snippet_chars
    budget = _Budget(max_chars)
    # Group on the rows first and make snippets only for the hits returned: a snippet
    # costs far more than a row, and the candidate list can be hundreds long.
    found = hits(scored, stores, query, width, snippets=False, check=check)
    if return_mode == "documents":
        # One document in memory at a time, cut to the budget before the next is read:
        # a hundred long documents read first held them all at once (+354 MB for eight
        # such searches, docs/reliability.md "All at once").
        out = []
        for h in _documents(found, stores, query, width, top_k, check):
            check()
            row = stores[h.corpus].catalog.document(h.doc_id)
            out.append(budget.cut(_widen_to_document(stores[h.corpus], h, row)))
        return out
    if return_mode == "documents_if_fit":
        best = _documents(found, stores, query, width, top_k, check)
        rows = []
        for h in best:
            check()
            rows.append(stores[h.corpus].catalog.document(h.doc_id))
        if sum(len(row.text) for row in rows if row) <= settings.max_chars:
            out = []
            for h, row in zip(best, rows, strict=True):
                check()
                out.append(budget.cut(_widen_to_document(stores[h.corpus], h, row)))
            return out
    if section_mode:
        widened = _sections(found, stores, query, width, top_k, check)
        over = sum(len(h.text) for h in widened) >= settings.max_chars
    else:
        widened = found[:top_k]
        over = sum(len(h.text) for h in widened) >= settings.max_chars
    if return_mode == "auto" and over:
        return grouped(
            scored, stores, settings, query, top_k, "documents", False,
            max_chars=max_chars, check=check,
        )  # fmt: skip
    if not section_mode:
        return with_snippets(widened, stores, query, width, check)
    return [budget.cut(h) for h in widened]


def _documents(
    found: list[Hit],
    stores: Mapping[str, CorpusStore],
    query: str,
    width: int,
    top_k: int,
    check: Callable[[], None],
) -> list[Hit]:
    """The best hit of each of the first ``top_k`` documents, with its snippet."""
    docs: dict[tuple[str, str], Hit] = {}
    for h in found:
        docs.setdefault((h.corpus, h.doc_id), h)
    return with_snippets(list(docs.values())[:top_k], stores, query, width, check)


def _sections(
    found: list[Hit],
    stores: Mapping[str, CorpusStore],
    query: str,
    width: int,
    top_k: int,
    check: Callable[[], None],
) -> list[Hit]:
    """The best hit of each of the first ``top_k`` sections, widened to its section."""
    sections: dict[tuple[str, str, str], Hit] = {}
    for h in found:
        sections.setdefault((h.corpus, h.doc_id, h.section_id), h)
    chosen = with_snippets(list(sections.values())[:top_k], stores, query, width, check)
    widened = []
    for h in chosen:
        check()
        widened.append(_widen_to_section(stores[h.corpus], h))
    return widened


def _page_span(rows: list[ChunkRow]) -> tuple[int | None, int | None]:
    pages = [p for r in rows for p in (r.page_start, r.page_end) if p is not None]
    return (min(pages), max(pages)) if pages else (None, None)


def _widen_to_document(store: CorpusStore, hit: Hit, doc: DocRow | None) -> Hit:
    text = doc.text if doc else hit.text
    page_start, page_end = store.catalog.page_span(hit.doc_id)
    return dataclasses.replace(
        hit,
        start=0,
        end=len(text),
        text=text,
        heading_path=hit.heading_path[:1],
        heading_trail=hit.heading_trail[:1],
        table_header=None,
        page_start=page_start,
        page_end=page_end,
    )


def _widen_to_section(store: CorpusStore, hit: Hit) -> Hit:
    rows = [r for r in store.catalog.document_chunks(hit.doc_id) if r.section_id == hit.section_id]
    if not rows:
        return hit
    doc = store.catalog.document(hit.doc_id)
    start, end = rows[0].start, rows[-1].end
    page_start, page_end = _page_span(rows)
    return dataclasses.replace(
        hit,
        start=start,
        end=end,
        text=doc.text[start:end] if doc else hit.text,
        heading_path=rows[0].heading_path,
        heading_trail=rows[0].heading_trail[: len(rows[0].heading_path)],
        table_header=None,
        page_start=page_start,
        page_end=page_end,
    )


def section_filter_where(
    where: Mapping[str, Any] | None, section_filter: str | None
) -> Mapping[str, Any] | None:
    """``where`` narrowed to one section id, to a heading path prefix ``"A > B"``, or to
    the same headings right under any document title (``"Financial Statements"`` finds
    ``Annual report > Financial Statements``, as the seed Guaipeca's filter did). A prefix
    of the full ``heading_trail`` works too (``"Duck > Behaviour > Feeding"``).

    Raises:
        InvalidArgumentError: an empty or non-string ``section_filter``.
    """
    if section_filter is None:
        return where
    if not isinstance(section_filter, str) or not section_filter.strip():
        raise InvalidArgumentError("section_filter must be a section id or 'Title > Section'")
    if section_filter.startswith(("s:", "unstructured:")):
        extra: dict[str, Any] = {"section_id": section_filter}
    else:
        parts = [p.strip() for p in section_filter.split(">") if p.strip()]
        # Both are stored as JSON text: a path prefix is a prefix of that text.
        prefix = json.dumps(parts, ensure_ascii=False)[:-1]
        under_title = ", " + prefix[1:]  # the same parts after a first (title) element
        extra = {
            "$or": [
                {"heading_path": prefix + "]"},
                {"heading_path": {"$startswith": prefix + ","}},
                {"heading_path": {"$contains": under_title + "]"}},
                {"heading_path": {"$contains": under_title + ","}},
                {"heading_trail": prefix + "]"},
                {"heading_trail": {"$startswith": prefix + ","}},
            ]
        }
    return {"$and": [dict(where), extra]} if where else extra


def toc(store: CorpusStore, doc_id: str) -> dict[str, Any]:
    """A stored document's headings as a tree, with chunk counts (see :meth:`Index.toc`).

    The headings are read from the whole document text, as the chunker reads them, and not
    chunk by chunk: a chunk cut from the middle of a code block does not show its fence, so
    a ``# comment`` at its start would pass for a heading.
    """
    rows = store.catalog.document_chunks(doc_id)
    doc = store.catalog.document(doc_id)
    found = headings(doc.text) if doc else []
    starts = [row.start for row in rows]
    by_row: dict[int, list[tuple[int, str]]] = {}
    for offset, level, title in found:
        k = max(0, bisect_right(starts, offset) - 1)
        by_row.setdefault(k, []).append((level, title))
    root: dict[str, Any] = {"children": [], "level": 0}
    stack = [root]
    for k, row in enumerate(rows):
        for level, title in by_row.get(k, ()):
            node = {
                "title": title,
                "level": level,
                "section_id": row.section_id,
                "chunk_id": f"{store.name}:{row.chunk_pk}",
                "chunks": 0,
                "children": [],
            }
            while stack[-1]["level"] >= level:
                stack.pop()
            stack[-1]["children"].append(node)
            stack.append(node)
        if len(stack) > 1:
            stack[-1]["chunks"] += 1
    return {
        "doc_id": doc_id,
        "corpus": store.name,
        "structured": bool(root["children"]),
        "chunks": len(rows),
        "headings": root["children"],
    }


def _row_fields(corpus: str, row: ChunkRow) -> dict[str, Any]:
    """The fields a stored chunk and a hit share."""
    return {
        **location_of(row),
        "chunk_id": f"{corpus}:{row.chunk_pk}",
        "corpus": corpus,
        "doc_id": row.doc_id,
        "source_path": row.source_path,
        "metadata": row.metadata,
        "ocr": _read_with_ocr(row),
    }


def _read_with_ocr(row: ChunkRow) -> bool:
    """Whether the chunk lies on a page its converter read with OCR (metadata ocr_pages)."""
    pages = row.metadata.get("ocr_pages")
    if not pages or not isinstance(pages, list) or row.page_start is None:
        return False
    last = row.page_end if row.page_end is not None else row.page_start
    return any(isinstance(p, int) and row.page_start <= p <= last for p in pages)


def chunk_from_row(corpus: str, row: ChunkRow) -> Chunk:
    return Chunk(**_row_fields(corpus, row))


def hit_from_row(corpus: str, row: ChunkRow, score: float, parts: ScoreParts, snippet: str) -> Hit:
    return Hit(
        **_row_fields(corpus, row),
        score=score,
        scores=parts,
        snippet=snippet,
        embedded=row.embedded,
    )
