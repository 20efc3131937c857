"""Indexing throughput with local enrichment on vs off (SPEC §8.1: at most 20% slower).

Real data (SciFact abstracts from ../shared/data, title as a heading), the bundled ONNX
model, a fresh in-memory index per run; runs alternate off/on so machine noise hits both.
Wall time and this process's CPU time are both recorded (on a shared machine the CPU time
is the steadier figure). Also times the enrichment alone over the same texts. Writes
bench/results/enrich.json.

Usage: .venv/bin/python bench/enrich.py [DOCS=500] [ROUNDS=3]
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from guaipeca import Index, __version__
from guaipeca.config import EngineSettings, EnrichSettings
from guaipeca.embed import OnnxEmbedder
from guaipeca.enrich import enrich_text

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("GUAIPECA_SHARED_DATA", REPO.parent / "shared" / "data"))


def load(limit: int) -> dict[str, str]:
    docs: dict[str, str] = {}
    with gzip.open(DATA / "beir" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[d["_id"]] = f"# {d['title']}\n\n{d['text']}"
            if len(docs) >= limit:
                break
    return docs


def run(docs: dict[str, str], embedder: OnnxEmbedder, local: bool) -> tuple[float, float, int]:
    """``(wall seconds, CPU seconds of this process, chunks)`` to index ``docs``."""
    settings = EngineSettings(
        enrich=EnrichSettings(local=local),
        embedding={"cache_max_entries": 0},
    )
    with Index(embedder=embedder, settings=settings) as idx:
        start, cpu = time.perf_counter(), time.process_time()
        report = idx.add_documents(docs)
        return time.perf_counter() - start, time.process_time() - cpu, report.chunks


def main() -> None:
    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    docs = load(n_docs)
    embedder = OnnxEmbedder()
    embedder.embed_passages(["warm-up"])
    times: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    chunks = 0
    for _ in range(rounds):
        for name in ("off", "on"):
            seconds, used, chunks = run(docs, embedder, local=name == "on")
            times[name].append(seconds)
            cpu[name].append(used)
            print(f"enrichment {name}: {seconds:.2f} s wall, {used:.2f} s CPU", file=sys.stderr)
    # The enrichment alone, over the same texts (CPU time: the machine may be shared).
    texts = list(docs.values())
    start = time.process_time()
    for t in texts:
        enrich_text(t)
    alone = time.process_time() - start
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    cpu_off, cpu_on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    result = {
        "what": "indexing throughput, local enrichment off vs on (median of rounds)",
        "data": f"SciFact, first {len(docs)} abstracts",
        "model": embedder.name,
        "documents": len(docs),
        "chunks": chunks,
        "rounds": rounds,
        "seconds_off": [round(x, 3) for x in times["off"]],
        "seconds_on": [round(x, 3) for x in times["on"]],
        "docs_per_s_off": round(len(docs) / off, 2),
        "docs_per_s_on": round(len(docs) / on, 2),
        "throughput_drop_percent": round(100 * (1 - off / on), 2),
        "cpu_seconds_off": [round(x, 3) for x in cpu["off"]],
        "cpu_seconds_on": [round(x, 3) for x in cpu["on"]],
        "cpu_throughput_drop_percent": round(100 * (1 - cpu_off / cpu_on), 2),
        "enrichment_alone_cpu_ms_per_doc": round(1000 * alone / len(texts), 3),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "guaipeca": __version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    out = REPO / "bench" / "results" / "enrich.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
