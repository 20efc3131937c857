"""Dense nDCG@10 of static models on whole documents (no chunking), exact cosine: a cheap
first look at a distilled table before a full ``guaipeca eval``.

    python bench/static_dense.py [--sets scifact,nfcorpus] [--out JSON] MODEL...

MODEL is ``default`` (the shipped static model) or a model2vec folder, e.g. one written by
``scripts/distill_static.py --teacher bge-small [--cls] --out DIR``. Test queries only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

REPO = Path(__file__).resolve().parent.parent


def load(dataset: str) -> tuple[list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    from guaipeca.evaluate import beir_document

    root = quality.DATA / dataset
    ids, docs = [], []
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(str(d["_id"]))
            docs.append(beir_document(d.get("title", ""), d["text"]))
    qrels = quality.load_qrels(root)
    queries = {}
    for line in (root / "queries.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        if str(q["_id"]) in qrels:
            queries[str(q["_id"])] = q["text"]
    return ids, docs, queries, qrels


def main() -> int:
    from guaipeca.embed.static import StaticEmbedder
    from guaipeca.evaluate import ndcg_at_k

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--sets", default="scifact,nfcorpus")
    ap.add_argument("--out", default=str(REPO / "bench/results/static-dense-bge.json"))
    args = ap.parse_args()
    rows = []
    for dataset in args.sets.split(","):
        ids, docs, queries, qrels = load(dataset)
        for name in args.models:
            model = StaticEmbedder() if name == "default" else StaticEmbedder(Path(name))
            matrix = model.embed_passages(docs)
            scores = []
            for q, text in queries.items():
                top = np.argsort(-(matrix @ model.embed_query(text)))[:10]
                scores.append(ndcg_at_k([ids[i] for i in top], qrels[q], 10))
            rows.append(
                {
                    "set": dataset,
                    "model": name,
                    "dense_ndcg@10": round(float(np.mean(scores)), 4),
                    "queries": len(scores),
                    "documents": len(docs),
                }
            )
            print(rows[-1], file=sys.stderr, flush=True)
    out = {
        "command": "python bench/static_dense.py " + " ".join(sys.argv[1:]),
        "machine": quality.machine(),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
