"""Embedding cost of bge-small (cut 512 and 256) against the bundled MiniLM, in one run.

    nice -n 10 .venv/bin/python bench/bge_speed.py [--docs 200] [--rounds 2]
        [--out bench/results/bge-speed.json]

The first ``--docs`` SciFact documents (title + abstract, as ``guaipeca eval`` indexes them;
most are one chunk) are embedded as passages by each model in turn, one ONNX thread each,
``--rounds`` times interleaved, and the first 100 test queries one by one. On a machine
shared with other jobs wall-clock time swings with the load, so the figure compared is CPU
time (``time.process_time``): passages per CPU-second and CPU ms per query; wall-clock is
recorded beside it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

REPO = Path(__file__).resolve().parent.parent


def load(n_docs: int) -> tuple[list[str], list[str]]:
    from guaipeca.evaluate import beir_document

    root = quality.DATA / "scifact"
    docs: list[str] = []
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            docs.append(beir_document(row.get("title", ""), row["text"]))
            if len(docs) >= n_docs:
                break
    queries = [json.loads(line)["text"] for line in (root / "queries.jsonl").open()][:100]
    return docs, queries


def models() -> dict[str, Any]:
    from guaipeca.embed import default_embedder
    from guaipeca.embed.bge import BgeSmallEmbedder

    return {
        "bundled": default_embedder(threads=1),
        "bge-small": BgeSmallEmbedder(threads=1),
        "bge-small-256": BgeSmallEmbedder(threads=1, max_tokens=256),
    }


def timed(call: Any) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench/results/bge-speed.json"))
    args = ap.parse_args()
    docs, queries = load(args.docs)
    loaded = models()
    rows: dict[str, dict[str, float]] = {m: {"cpu": 0.0, "wall": 0.0} for m in loaded}
    for _ in range(args.rounds):
        for name, model in loaded.items():
            cpu, wall = timed(lambda m=model: m.embed_passages(docs))
            rows[name]["cpu"] += cpu
            rows[name]["wall"] += wall
            print(f"{name}: {len(docs)} passages in {cpu:.1f} CPU s ({wall:.1f} s wall)",
                  file=sys.stderr, flush=True)
    result: dict[str, Any] = {
        "command": "python bench/bge_speed.py " + " ".join(sys.argv[1:]),
        "machine": quality.machine(),
        "passages": len(docs),
        "rounds": args.rounds,
        "models": {},
    }
    for name, model in loaded.items():
        q_cpu, q_wall = timed(lambda m=model: [m.embed_query(q) for q in queries])
        n = len(docs) * args.rounds
        result["models"][name] = {
            "passages_per_cpu_second": round(n / rows[name]["cpu"], 2),
            "passages_per_wall_second": round(n / rows[name]["wall"], 2),
            "query_cpu_ms": round(1000 * q_cpu / len(queries), 2),
            "query_wall_ms": round(1000 * q_wall / len(queries), 2),
        }
    base = result["models"]["bundled"]["passages_per_cpu_second"]
    for row in result["models"].values():
        row["cpu_cost_vs_bundled"] = round(base / row["passages_per_cpu_second"], 2)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["models"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
