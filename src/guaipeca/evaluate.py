"""Retrieval quality on a BEIR-format folder: nDCG@10, Recall@100 and MRR@10 (SPEC §9.4, §10).

A BEIR folder holds ``corpus.jsonl`` (or ``corpus.jsonl.gz``) with lines
``{"_id", "title", "text"}``, ``queries.jsonl`` with lines ``{"_id", "text"}`` and
``qrels/<split>.tsv`` with a header line and ``query-id<TAB>corpus-id<TAB>score`` lines
(graded relevance, integers).

The metrics match ``pytrec_eval`` (trec_eval 9) exactly, which ``tests/test_evaluate.py``
checks on random runs:

- a document is relevant when its judgment is > 0; unjudged documents count as 0;
- nDCG uses the judgment itself as the gain (``rel``, not ``2**rel - 1``; negative
  judgments give gain 0) with a ``log2(rank + 1)`` discount, like trec_eval's ``ndcg_cut``;
- the mean is over the queries that have at least one relevant document in the qrels (the
  queries BEIR evaluates); such a query without results scores 0.

Ties: :func:`evaluate_run` orders each query's results by score, highest first, and keeps
the order in which the run lists documents of equal score (a stable sort) — for
:func:`evaluate_index` that is the engine's own ranking. trec_eval instead breaks ties by
document id, descending; the two agree whenever a run has no ties.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guaipeca.errors import InvalidArgumentError
from guaipeca.index import MAX_TOP_K, Index
from guaipeca.types import SEARCH_MODES, AddReport, Hit, NewDocument, SearchMode

__all__ = [
    "BeirSet",
    "EvalResult",
    "evaluate_index",
    "evaluate_query",
    "evaluate_run",
    "index_beir",
    "load_beir",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[tuple[str, float]]]

NDCG_K, RECALL_K, MRR_K = 10, 100, 10
LATENCY_K = 10  # the depth of the timed search: what a user asks for
METRICS = (f"nDCG@{NDCG_K}", f"Recall@{RECALL_K}", f"MRR@{MRR_K}")


# -- data ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BeirSet:
    """A BEIR data set, as loaded by :func:`load_beir`.

    ``corpus`` maps doc ids to ``(title, text)`` in file order (with ``limit_docs``: the
    documents judged for the chosen queries, then the others in file order, up to that
    many). ``queries`` maps the ids of the queries to evaluate (those with at least one
    relevant judgment in the split, in qrels order, at most ``limit_queries``) to their
    text; ``qrels`` holds those queries' judgments ``{query_id: {doc_id: relevance}}``.
    """

    folder: Path
    split: str
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(
    folder: str | Path,
    *,
    split: str = "test",
    limit_queries: int | None = None,
    limit_docs: int | None = None,
) -> BeirSet:
    """Read a BEIR folder; ``limit_queries`` and ``limit_docs`` make a quick, smaller run
    (the judged documents of the chosen queries are always kept, so scores stay meaningful,
    though higher than on the whole corpus).

    Raises:
        InvalidArgumentError: the folder or one of its files is missing (the message names
            it), or a line is malformed (the message names the file and line number).
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise InvalidArgumentError(f"{root} is not a folder (expected a BEIR data set)")
    for name, limit in (("limit_queries", limit_queries), ("limit_docs", limit_docs)):
        if limit is not None and (isinstance(limit, bool) or limit < 1):
            raise InvalidArgumentError(f"{name} must be a positive integer")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        found = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        available = f" (splits here: {', '.join(found)})" if found else ""
        raise InvalidArgumentError(f"{qrels_path} is missing{available}")
    all_qrels = _read_qrels(qrels_path)
    wanted = [q for q, judged in all_qrels.items() if any(r > 0 for r in judged.values())]
    if limit_queries is not None:
        wanted = wanted[:limit_queries]

    queries_path = root / "queries.jsonl"
    if not queries_path.is_file():
        raise InvalidArgumentError(f"{queries_path} is missing")
    wanted_set = set(wanted)
    texts: dict[str, str] = {}
    for where, row in _jsonl(queries_path):
        qid = _field(row, "_id", where)
        if qid in wanted_set:
            texts[qid] = _field(row, "text", where)
    missing = [q for q in wanted if q not in texts]
    if missing:
        raise InvalidArgumentError(
            f"{queries_path} has no query {missing[0]!r:.60} named in {qrels_path}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )

    corpus_path = root / "corpus.jsonl"
    if not corpus_path.is_file():
        corpus_path = root / "corpus.jsonl.gz"
    if not corpus_path.is_file():
        raise InvalidArgumentError(f"{root} has no corpus.jsonl or corpus.jsonl.gz")
    corpus: dict[str, tuple[str, str]] = {}
    for where, row in _jsonl(corpus_path):
        doc_id = _field(row, "_id", where)
        if doc_id in corpus:
            raise InvalidArgumentError(f"{where}: document id {doc_id!r:.60} appears twice")
        title = row.get("title") or ""
        if not isinstance(title, str):
            raise InvalidArgumentError(f"{where}: 'title' must be a string")
        corpus[doc_id] = (title, _field(row, "text", where, empty_ok=True))
    if limit_docs is not None:
        corpus = _fewer_docs(corpus, {d for q in wanted for d in all_qrels[q]}, limit_docs)
    return BeirSet(
        folder=root,
        split=split,
        corpus=corpus,
        queries={q: texts[q] for q in wanted},
        qrels={q: all_qrels[q] for q in wanted},
    )


def _fewer_docs(
    corpus: dict[str, tuple[str, str]], judged: set[str], limit: int
) -> dict[str, tuple[str, str]]:
    """The judged documents, then others in file order, up to ``limit`` (file order kept)."""
    keep = {d for d in corpus if d in judged}
    for doc_id in corpus:
        if len(keep) >= limit:
            break
        keep.add(doc_id)
    return {d: v for d, v in corpus.items() if d in keep}


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id<TAB>corpus-id<TAB>score`` lines after a header; TREC ``q 0 d rel`` lines
    are accepted too. A later judgment of the same pair replaces an earlier one."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for number, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t") if "\t" in line else line.split()
            if len(parts) == 4:  # TREC: query-id iteration doc-id relevance
                parts = [parts[0], parts[2], parts[3]]
            score = _int(parts[2]) if len(parts) == 3 else None
            if number == 1 and score is None and len(parts) == 3:
                continue  # the header
            if score is None or not parts[0].strip() or not parts[1].strip():
                raise InvalidArgumentError(
                    f"{path} line {number}: expected 'query-id<TAB>corpus-id<TAB>score' with an "
                    f"integer score, got {line!r:.80}"
                )
            qrels.setdefault(parts[0].strip(), {})[parts[1].strip()] = score
    return qrels


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{path} line {number}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidArgumentError(f"{where}: not JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise InvalidArgumentError(f"{where}: expected a JSON object")
                yield where, row
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"{path} cannot be read: {exc}") from None


def _field(row: Mapping[str, Any], name: str, where: str, *, empty_ok: bool = False) -> str:
    value = row.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and name == "_id":
        value = str(value)
    if not isinstance(value, str) or (not empty_ok and not value):
        raise InvalidArgumentError(f"{where}: {name!r} must be a non-empty string")
    return value


# -- metrics ---------------------------------------------------------------------------
def ndcg_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain at ``k`` (Järvelin & Kekäläinen, 2002).

    ``DCG@k = sum_{i=1..k} gain(d_i) / log2(i + 1)`` with ``gain = max(rel, 0)`` (the
    judgment itself, as trec_eval's ``ndcg_cut``; unjudged = 0), divided by the DCG@k of the
    ideal ranking (all judgments sorted descending). 0 when no document is relevant.
    """
    gains = [max(qrels_for_query.get(d, 0), 0) for d in ranked_ids[:k]]
    ideal = sorted((max(r, 0) for r in qrels_for_query.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    if idcg <= 0:
        return 0.0
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains)) / idcg


def recall_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int) -> float:
    """Recall at ``k``: relevant documents (rel > 0) in the top ``k`` over all relevant
    documents of the query (trec_eval ``recall_k``). 0 when no document is relevant."""
    relevant = {d for d, r in qrels_for_query.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked_ids[:k])) / len(relevant)


def mrr_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int) -> float:
    """Reciprocal rank at ``k``: ``1 / rank`` of the first document with rel > 0 within the
    top ``k``, else 0 (trec_eval ``recip_rank`` of the run cut at ``k``); its mean over
    queries is MRR@k."""
    for rank, doc_id in enumerate(ranked_ids[:k], start=1):
        if qrels_for_query.get(doc_id, 0) > 0:
            return 1.0 / rank
    return 0.0


def ranked(results: Sequence[tuple[str, float]]) -> list[str]:
    """Doc ids by score, highest first; equal scores keep the given order (stable sort); a
    repeated doc id keeps its best-placed occurrence."""
    order = sorted(range(len(results)), key=lambda i: -results[i][1])
    return list(dict.fromkeys(results[i][0] for i in order))


def evaluate_query(
    results: Sequence[tuple[str, float]], qrels_for_query: Mapping[str, int]
) -> dict[str, float]:
    """nDCG@10, Recall@100 and MRR@10 of one query's ``(doc_id, score)`` results."""
    ids = ranked(results)
    return {
        METRICS[0]: ndcg_at_k(ids, qrels_for_query, NDCG_K),
        METRICS[1]: recall_at_k(ids, qrels_for_query, RECALL_K),
        METRICS[2]: mrr_at_k(ids, qrels_for_query, MRR_K),
    }


def evaluate_run(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 of ``run`` (``{query_id: [(doc_id, score)]}``).

    Averaged over the queries of ``qrels`` with at least one relevant document (rel > 0); such
    a query missing from ``run`` scores 0, and run queries not in ``qrels`` are ignored. Ties
    are ordered as :func:`ranked` says. Empty qrels give 0 for every metric.
    """
    return _mean(_per_query(run, qrels))


def _per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    return {
        qid: evaluate_query(run.get(qid, ()), judged)
        for qid, judged in qrels.items()
        if any(r > 0 for r in judged.values())
    }


def _mean(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    n = len(per_query)
    return {m: (sum(v[m] for v in per_query.values()) / n if n else 0.0) for m in METRICS}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks
    (numpy's default); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# -- running against an index ----------------------------------------------------------
@dataclass
class EvalResult:
    """What :func:`evaluate_index` measured.

    ``metrics`` holds the means (keys ``"nDCG@10"``, ``"Recall@100"``, ``"MRR@10"``),
    ``per_query`` the same per query, ``run`` the ranked documents of each query with their
    scores. Latencies are wall-clock per ``Index.search`` call, in milliseconds.
    """

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    run: dict[str, list[tuple[str, float]]]
    queries: int
    documents: int
    mode: str
    query_p50_ms: float
    query_p95_ms: float
    search_seconds: float
    index_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no per-query data)."""
        data: dict[str, Any] = {m: round(v, 6) for m, v in self.metrics.items()}
        data.update(
            queries=self.queries,
            documents=self.documents,
            mode=self.mode,
            query_p50_ms=round(self.query_p50_ms, 3),
            query_p95_ms=round(self.query_p95_ms, 3),
            search_seconds=round(self.search_seconds, 3),
            index_seconds=None if self.index_seconds is None else round(self.index_seconds, 3),
        )
        data.update(self.extra)
        return data


def evaluate_index(
    index: Index,
    beir: BeirSet,
    *,
    corpus: str = "beir",
    mode: SearchMode = "hybrid",
    top_k: int = 100,
    progress: Callable[[int, int], None] | None = None,
    **search_kwargs: Any,
) -> EvalResult:
    """Search every query of ``beir`` in ``corpus`` and score the ranked documents.

    Chunk hits become documents: a document's score is its best chunk's and only its first
    (best) hit counts, so one BEIR document split into several chunks is retrieved once. The
    top of the ranking is fused from lists of the configured depth, as a user's search is;
    enough chunks are asked for to fill ``top_k`` documents (up to 1000 chunks), then the
    ranking is cut at ``top_k`` documents (Recall@100 therefore needs ``top_k >= 100``).
    ``search_kwargs`` go to :meth:`Index.search` (``candidates``, ``rrf_k``,
    ``dense_weight``, ``bm25_weight``, ``where``). ``progress(done, total)`` is called after
    each query.

    Latency: each query is first searched as a user would, ``top_k=10`` chunks with cold
    query-embedding cache, and that call is timed (``query_p50_ms``/``query_p95_ms``); the
    deep search that feeds the metrics is not timed, as building hundreds of hits with
    snippets costs far more than a user's query does.
    """
    if mode not in SEARCH_MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(SEARCH_MODES)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgumentError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    run: dict[str, list[tuple[str, float]]] = {}
    latencies: list[float] = []
    total = len(beir.queries)
    started = time.perf_counter()
    for done, (qid, text) in enumerate(beir.queries.items(), start=1):
        t0 = time.perf_counter()
        index.search(text, top_k=LATENCY_K, mode=mode, corpora=[corpus], **search_kwargs)
        latencies.append((time.perf_counter() - t0) * 1000)
        run[qid] = _document_ranking(index, text, corpus, mode, top_k, search_kwargs)
        if progress is not None:
            progress(done, total)
    search_seconds = time.perf_counter() - started
    per_query = _per_query(run, beir.qrels)
    stats = next((c for c in index.stats().corpora if c.name == corpus), None)
    return EvalResult(
        metrics=_mean(per_query),
        per_query=per_query,
        run=run,
        queries=len(per_query),
        documents=stats.documents if stats else 0,
        mode=mode,
        query_p50_ms=percentile(latencies, 50),
        query_p95_ms=percentile(latencies, 95),
        search_seconds=search_seconds,
    )


def _document_ranking(
    index: Index,
    query: str,
    corpus: str,
    mode: SearchMode,
    top_k: int,
    search_kwargs: Mapping[str, Any],
) -> list[tuple[str, float]]:
    """The top ``top_k`` documents, each scored by its best chunk.

    The head is what a user's search gives: its lists are fetched at the configured depth
    (``search.candidates``), as any search of up to that many hits fetches them; a deeper
    search fuses longer lists, and min-max or rank fusion then orders the top differently.
    When the head holds fewer than ``top_k`` documents, the tail comes from deeper searches
    (up to 1000 chunks), its documents placed after the head's, in their own order."""
    depth = int(search_kwargs.get("candidates") or index.settings.search.candidates)
    head_kwargs = {**search_kwargs, "candidates": depth}
    head = _best_chunks(
        index.search(
            query, top_k=min(MAX_TOP_K, 2 * depth), mode=mode, corpora=[corpus], **head_kwargs
        )
    )
    if len(head) >= top_k:
        return list(head.items())[:top_k]
    chunk_k = min(MAX_TOP_K, 2 * top_k)
    while True:
        hits = index.search(query, top_k=chunk_k, mode=mode, corpora=[corpus], **search_kwargs)
        deep = _best_chunks(hits)
        if len(deep) >= top_k or len(hits) < chunk_k or chunk_k >= MAX_TOP_K:
            break
        chunk_k = min(MAX_TOP_K, 4 * chunk_k)
    ranking = list(head.items())
    # below the head's lowest score, in the deep search's order (scores only order a run)
    floor = min(head.values(), default=0.0)
    tail = [d for d in deep if d not in head][: top_k - len(ranking)]
    ranking += [(d, floor - (i + 1) * 1e-6) for i, d in enumerate(tail)]
    return ranking


def _best_chunks(hits: Sequence[Hit]) -> dict[str, float]:
    """Each document's best (first) chunk score, in ranking order."""
    best: dict[str, float] = {}
    for h in hits:
        best.setdefault(h.doc_id, h.score)
    return best


def beir_document(title: str, text: str) -> str:
    """The Markdown text indexed for a BEIR document: the title as a heading, then the
    text; just the text when there is no title."""
    title = " ".join(title.split())
    return f"# {title}\n\n{text}" if title else text


def index_beir(
    index: Index,
    beir: BeirSet,
    *,
    corpus: str = "beir",
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> AddReport:
    """Add the corpus of ``beir`` to ``corpus`` of ``index`` (doc ids = BEIR ids), ``batch``
    documents per :meth:`Index.add_documents` call; ``progress(done, total)`` after each.
    Returns the summed reports."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidArgumentError("batch must be a positive integer")
    items = [NewDocument(doc_id, beir_document(t, x)) for doc_id, (t, x) in beir.corpus.items()]
    index.create_corpus(corpus)
    totals = dict.fromkeys((f.name for f in dataclasses.fields(AddReport)), 0)
    for start in range(0, len(items), batch):
        report = index.add_documents(items[start : start + batch], corpus=corpus)
        for key in totals:
            totals[key] += getattr(report, key)
        if progress is not None:
            progress(min(start + batch, len(items)), len(items))
    return AddReport(**totals)
