"""Chunk size and budget packing on long documents (issue 36, item 3): keyword search only.

    .venv/bin/python bench/context_chunks.py                        # sizes 1000,1500,2000,3000
    .venv/bin/python bench/context_chunks.py --sizes 2000 --set search.x=y

Keyword search does not read vectors, so each size's index is built with the hashing
embedder (seconds, not an hour of the real model) and the rankings are those of the default
install in Portuguese (hybrid = keyword there: the bundled model knows no Portuguese). For
each ``chunking.max_size``: the budgeted search's coverage within 1,000 / 2,000 / 4,000
characters and hit@1, and a plain top-5 search's coverage within 1,000, on two held-out
halves of the long squad-pt set (even and odd articles): a setting is judged by its worse
half. Results: ``bench/results/context-chunks.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from context_data import Result, coverage, hit_at, load_long_set
from quality import DATA, machine

BUDGETS = (1000, 2000, 4000)
OUT = Path(__file__).resolve().parent / "results" / "context-chunks.json"


def run_size(long_set: Any, size: int, language: str) -> dict[str, Any]:
    from guaipeca import Index
    from guaipeca.config import EngineSettings
    from guaipeca.embed import HashingEmbedder

    settings = EngineSettings.model_validate({"chunking": {"max_size": size}})
    index = Index(None, language=language, embedder=HashingEmbedder(32), settings=settings)
    index.add_documents(long_set.files)
    files = sorted(long_set.files)
    half = {name: files.index(name) % 2 for name in files}
    rows: dict[str, list[list[float]]] = {}
    for qid, query in long_set.queries.items():
        answers = long_set.answers[qid]
        fold = half[answers[0].doc]
        for budget in BUDGETS:
            got = [Result(h.doc_id, h.start, h.end)
                   for h in index.search(query, mode="keyword", budget=budget)]  # fmt: skip
            rows.setdefault(f"within_{budget}", [[], []])[fold].append(
                coverage(got, answers, budget)
            )
            rows.setdefault(f"hit@1_{budget}", [[], []])[fold].append(
                float(hit_at(got, answers, 1))
            )
        plain = [Result(h.doc_id, h.start, h.end)
                 for h in index.search(query, mode="keyword", top_k=5)]  # fmt: skip
        rows.setdefault("plain_within_1000", [[], []])[fold].append(
            coverage(plain, answers, 1000)
        )
    chunks = index.stats().chunks
    index.close()
    return {
        "chunks": chunks,
        "halves": {k: [round(statistics.mean(v), 4) for v in halves] for k, halves in rows.items()},
        "worse_half": {k: round(min(statistics.mean(v) for v in halves), 4)
                       for k, halves in rows.items()},  # fmt: skip
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,1500,2000,3000")
    parser.add_argument("--beir-dir", type=Path, default=DATA / "squad-pt")
    parser.add_argument("--language", default="pt")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    long_set = load_long_set(args.beir_dir)
    out: dict[str, Any] = {
        "command": "python bench/context_chunks.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine(),
        "set": {"name": long_set.name, "files": len(long_set.files),
                "queries": len(long_set.queries)},  # fmt: skip
        "sizes": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        out["sizes"][size] = run_size(long_set, size, args.language)
        out["sizes"][size]["seconds"] = round(time.perf_counter() - started, 1)
        print(size, json.dumps(out["sizes"][size]["worse_half"]), file=sys.stderr, flush=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
