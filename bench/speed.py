"""Speed, memory and scale of Guaipeca: one command, results in bench/results/speed.json.

    .venv/bin/pip install -e '.[bench]'          # matplotlib, for the charts
    .venv/bin/python bench/speed.py [--scales 10000,30000,100000,300000] [--quick]

What it measures (on-disk indexes, default settings unless said otherwise):

1. Indexing with the real bundled model: cold documents/s and chunks/s on the first 300
   SciFact documents, then 10 new documents into that index, then an unchanged re-add of all
   of them (must embed nothing).
2. Query latency p50/p95/p99 of keyword, dense, hybrid and hybrid with ``rerank=True``, the
   query-embedding cache off (``embedding.cache_max_entries=0``), the real model embedding
   every query, at each scale; with ``search.dense_scan`` (when the setting exists) dense and
   hybrid are timed with "exact" and "binary", and recall@10 of binary against exact is given.
3. The first hybrid search right after adding one document, against the usual median.
4. Memory: peak RSS of a fresh process that opens the index and runs every query (one process
   per scale), idle RSS of a real ``guaipeca serve --transport http`` on the 100k index after
   a few searches, and bytes per chunk on disk (``Index.stats()``).
5. Charts (docs/img/speed-latency.png, docs/img/speed-footprint.png).

Scale indexes are synthesised from the real corpora: every SciFact / NFCorpus chunk becomes a
unit (its text and its real vector from the quality benchmark's cache,
/tmp/guaipeca-bench-cache); copy ``c`` of unit ``i`` is a one-chunk document whose text is the
unit's with a few words dropped and swapped and a tag ``(copy c of i)`` in its title, and whose
vector is the unit's plus gaussian noise, renormalised. An embedder that reads the tag hands
those vectors to ``Index.add_documents``, so the index is built by the library's own write path.
The largest index is built once under /tmp/guaipeca-speed (a snapshot is copied at each smaller
scale) and reused by later runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers
from quality import embedding_key, machine, make_settings, pct

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BEIR_DIR", "/work/shared/data/beir"))
CACHE = Path(os.environ.get("GUAIPECA_BENCH_CACHE", "/tmp/guaipeca-bench-cache"))
WORK = Path(os.environ.get("GUAIPECA_SPEED_DIR", "/tmp/guaipeca-speed"))
DATASETS = ("scifact", "nfcorpus")
TAG = re.compile(r"\(copy (\d+) of (\d+)\)")
NOISE = 0.012  # per-component sigma: copies keep cosine ~0.97 with their unit
BUILD_BATCH = 4000  # documents per add_documents call while building


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / VmHWM of a process in kB, from /proc/<pid>/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def anon_kb(pid: int) -> int:
    """Anonymous (private, not file-backed) resident kB of a process."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1])
    return 0


# -- the synthetic corpus ----------------------------------------------------------------------
def load_units(log_: Any = log) -> tuple[list[tuple[str, str]], np.ndarray, list[str]]:
    """Every real chunk whose vector is in the bench cache: ``[(title, body)]``, vectors, and
    which datasets were used. A chunk's cache key is sha256 of its embedding input under either
    cached setting (the default, or ``embedding.preprocess=false``)."""
    from guaipeca.chunk import canonicalize, chunk_text
    from guaipeca.embed import embedding_input

    units: list[tuple[str, str]] = []
    vectors: list[np.ndarray] = []
    used = []
    for name in DATASETS:
        lookup: dict[str, np.ndarray] = {}
        for npy in _unit_caches(name):
            keys_path = npy.with_suffix(".keys.json")
            if not keys_path.exists():
                continue
            mat = np.load(npy, mmap_mode="r")
            keys = json.loads(keys_path.read_text())
            if len(keys) != len(mat):
                continue
            lookup.update(zip(keys, mat, strict=True))
        if not lookup:
            log_(f"[units] no cached vectors for {name}; skipped")
            continue
        docs, _ = peers.load_beir(DATA / name)
        found = missing = 0
        for doc_id, text in docs.items():
            text = canonicalize(text)
            title = text.split("\n", 1)[0].lstrip("# ").strip()
            chunks = chunk_text(text, doc_key=f"default/{doc_id}", max_size=1500)
            # What each chunk is embedded as with preprocessing on and off (no overlap).
            keyed = [
                [embedding_input(c.text, c.heading_path, preprocess=p) for c in chunks]
                for p in (True, False)
            ]
            for i, c in enumerate(chunks):
                vec = None
                for inputs in keyed:
                    vec = lookup.get(hashlib.sha256(inputs[i].encode("utf-8")).hexdigest())
                    if vec is not None:
                        break
                if vec is None:
                    missing += 1
                    continue
                found += 1
                body = c.text
                if body.startswith("# "):
                    body = body.split("\n", 1)[1].strip() if "\n" in body else ""
                units.append((title[:200], body))
                vectors.append(np.asarray(vec, dtype=np.float32))
        used.append(name)
        log_(f"[units] {name}: {found} chunks with a cached vector, {missing} without")
    return units, np.vstack(vectors), used


def _unit_caches(name: str) -> list[Path]:
    """The quality bench's vector caches of a whole dataset made with the chunking the units
    use (max_size 1500, no overlap, preprocessing on or off); other experiments' caches are
    left out so they cannot change the corpus. Sorted so the int8-weights graph's vectors
    (``-int8w-`` in the name) win over the plain graph's for the same input."""
    keys = {
        embedding_key(make_settings([f"embedding.preprocess={p}", "chunking.max_size=1500"]))[0]
        for p in ("true", "false")
    }
    return sorted(
        npy
        for npy in CACHE.glob(f"{name}-*.npy")
        if npy.stem.rpartition("-")[2] in keys and not npy.name.startswith(f"{name}-sub")
    )


def synthetic_doc(units: list[tuple[str, str]], k: int) -> tuple[str, str]:
    """Document ``k``: copy ``k // U`` of unit ``k % U``; copies > 0 are perturbed."""
    u = k % len(units)
    c = k // len(units)
    title, body = units[u]
    words = body.split()
    if c and len(words) > 8:
        rng = np.random.default_rng(k)
        for _ in range(2):  # drop two words
            del words[int(rng.integers(len(words)))]
        i = int(rng.integers(len(words) - 1))  # swap two neighbours
        words[i], words[i + 1] = words[i + 1], words[i]
    text = f"# {title} (copy {c} of {u})\n\n" + " ".join(words)
    return f"u{u}-c{c}", text[:1450]  # one chunk per document (max_size 1500)


class SynthEmbedder:
    """Passage vectors from the tag ``(copy c of u)`` in the embedding input: unit ``u``'s real
    vector, plus seeded gaussian noise for copies > 0. Queries go to the real model."""

    def __init__(self, inner: Any, vectors: np.ndarray) -> None:
        self.inner, self.vectors = inner, vectors
        self.name, self.dimension = inner.name, inner.dimension

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for j, t in enumerate(texts):
            m = TAG.search(t)
            if m is None:  # not one of ours (should not happen): a deterministic vector
                seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
                v = np.random.default_rng(seed).standard_normal(self.dimension)
            else:
                c, u = int(m.group(1)), int(m.group(2))
                v = self.vectors[u].astype(np.float64)
                if c:
                    v = v + np.random.default_rng(c * 1_000_003 + u).normal(
                        0, NOISE, self.dimension
                    )
            out[j] = v / np.linalg.norm(v)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def real_embedder() -> Any:
    from guaipeca.config import EngineSettings
    from guaipeca.embed import default_embedder

    emb = EngineSettings().embedding
    return default_embedder(threads=emb.threads, batch_size=emb.batch_size)


def dense_scan_values() -> list[str]:
    """["exact", "binary"] when the search.dense_scan setting exists, else [None]."""
    from guaipeca.config import SearchSettings

    return ["exact", "binary"] if "dense_scan" in SearchSettings.model_fields else []


def engine_settings(dense_scan: str | None = None) -> Any:
    from guaipeca.config import EngineSettings

    data: dict[str, Any] = {"embedding": {"cache_max_entries": 0}}
    if dense_scan:
        data["search"] = {"dense_scan": dense_scan}
    return EngineSettings.model_validate(data)


def build_scales(
    scales: list[int], units: list[tuple[str, str]], vectors: np.ndarray, inner: Any
) -> dict[str, Any]:
    """Grow one index to the largest scale, copying it aside at each scale on the way."""
    from guaipeca import Index

    live = WORK / "build" / "index"
    manifest_path = WORK / "manifest.json"
    fingerprint = f"{len(units)}:{float(vectors[:, 0].sum()):.6f}:{NOISE}"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    if manifest.get("fingerprint") != fingerprint:
        shutil.rmtree(WORK / "build", ignore_errors=True)
        for old in WORK.glob("scale-*"):
            shutil.rmtree(old, ignore_errors=True)
        manifest = {"fingerprint": fingerprint, "scales": {}, "build": []}
    todo = [
        n
        for n in scales
        if not (WORK / f"scale-{n}" / "index").exists() or str(n) not in manifest["scales"]
    ]
    if not todo:
        log("[build] every scale already built; reused")
        return manifest
    index = Index(live, embedder=SynthEmbedder(inner, vectors), settings=engine_settings())
    docs_done = int(manifest.get("docs_done", 0))
    chunks = index.stats().chunks
    # A scale below what is built: start over. An interrupted batch needs nothing: documents
    # are deterministic, so re-adding them from the last finished batch skips those written.
    if min(todo) < chunks:
        index.close()
        shutil.rmtree(WORK / "build", ignore_errors=True)
        index = Index(live, embedder=SynthEmbedder(inner, vectors), settings=engine_settings())
        docs_done, chunks, manifest["build"] = 0, 0, []
        for n in todo:
            shutil.rmtree(WORK / f"scale-{n}", ignore_errors=True)
    for n in sorted(todo):
        while chunks < n:
            batch = dict(
                synthetic_doc(units, k)
                for k in range(docs_done, docs_done + min(BUILD_BATCH, n - chunks))
            )
            t0 = time.perf_counter()
            report = index.add_documents(batch)
            dt = time.perf_counter() - t0
            docs_done += len(batch)
            chunks += report.chunks
            manifest["build"].append(
                {
                    "chunks_after": chunks,
                    "chunks": report.chunks,
                    "seconds": round(dt, 3),
                    "loadavg": os.getloadavg(),
                }
            )
            manifest.update(docs_done=docs_done, chunks_done=chunks)
            manifest_path.write_text(json.dumps(manifest, indent=1))
            log(f"[build] {chunks} chunks ({report.chunks / dt:.0f} chunks/s, no embedding)")
        index.close()
        dest = WORK / f"scale-{n}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        shutil.copytree(live, dest / "index")
        manifest["scales"][str(n)] = {"chunks": chunks, "docs": docs_done}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        log(f"[build] scale {n}: snapshot at {dest}")
        index = Index(live, embedder=SynthEmbedder(inner, vectors), settings=engine_settings())
    index.close()
    return manifest


# -- 1. indexing with the real model -----------------------------------------------------------
def indexing_speed(sample: int) -> dict[str, Any]:
    from guaipeca import Index

    docs, _ = peers.load_beir(DATA / "scifact")
    items = list(docs.items())
    first, extra = dict(items[:sample]), dict(items[sample : sample + 10])
    folder = WORK / "indexing"
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    index = Index(folder)  # default settings, the bundled model
    load_s = time.perf_counter() - t0
    out: dict[str, Any] = {
        "sample": f"first {sample} SciFact documents",
        "model_load_seconds": round(load_s, 2),
    }
    for label, batch in (
        ("cold", first),
        ("incremental_10_new", extra),
        ("unchanged_readd", first | extra),
    ):
        la = os.getloadavg()
        t0 = time.perf_counter()
        r = index.add_documents(batch)
        dt = time.perf_counter() - t0
        out[label] = {
            "docs": len(batch),
            "added": r.added,
            "unchanged": r.unchanged,
            "chunks": r.chunks,
            "chunks_embedded": r.chunks_embedded,
            "seconds": round(dt, 3),
            "docs_per_s": round(len(batch) / dt, 2),
            "chunks_per_s": round(r.chunks / dt, 2) if r.chunks else None,
            "loadavg_before": la,
        }
        log(f"[indexing] {label}: {json.dumps(out[label])}")
    index.close()
    shutil.rmtree(folder, ignore_errors=True)
    return out


# -- 2/3. one scale, in a fresh process --------------------------------------------------------
def load_queries(limit: int) -> list[str]:
    per_set = [list(peers.load_beir(DATA / name)[1].values()) for name in DATASETS]
    mixed = [q for group in zip(*per_set, strict=False) for q in group]  # alternate datasets
    return mixed[:limit]


def worker(scale: int, n_queries: int, after_write: int) -> dict[str, Any]:
    """Run in a fresh process: open the scale's index, time every mode, a few writes."""
    from guaipeca import Index

    path = WORK / f"scale-{scale}" / "index"
    queries = load_queries(n_queries)
    inner = real_embedder()  # queries and the after-write documents: the real model
    scans = dense_scan_values() or [None]
    out: dict[str, Any] = {"scale": scale, "queries": len(queries), "latency_ms": {}}
    tops: dict[str, list[list[str]]] = {}
    rss_open = None
    for scan in scans:
        t0 = time.perf_counter()
        index = Index(path, embedder=inner, settings=engine_settings(scan))
        out.setdefault("open_seconds", round(time.perf_counter() - t0, 3))
        rss_open = rss_open or proc_status()["VmRSS"]
        # rerank is passed every time: its default changed between versions.
        plan: list[tuple[str, str, dict[str, Any]]] = [
            ("dense", "dense", {"rerank": False}),
            ("hybrid", "hybrid", {"rerank": False}),
        ]
        if scan in (None, "exact"):
            plan = [
                ("keyword", "keyword", {"rerank": False}),
                *plan,
                ("hybrid+rerank", "hybrid", {"rerank": True}),
            ]
        for label, mode, extra in plan:
            key = label if scan in (None, "exact") else f"{label} (binary)"
            if scan == "exact" and label in ("dense", "hybrid"):
                key = f"{label} (exact)"
            for q in queries[:3]:  # warm-up: page cache, tantivy searcher, ONNX session
                index.search(q, top_k=10, mode=mode, **extra)  # type: ignore[arg-type]
            lat, cpu, ids = [], [], []
            for q in queries:
                t, c0 = time.perf_counter(), time.process_time()
                hits = index.search(q, top_k=10, mode=mode, **extra)  # type: ignore[arg-type]
                lat.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                ids.append([h.chunk_id for h in hits])
            # CPU time of this process (all threads) per query: what the search costs on a
            # machine shared with other work, where wall time includes waiting for a core.
            out["latency_ms"][key] = pct(lat) | {
                "cpu_ms_p50": round(float(np.median(cpu)), 3),
                "loadavg": os.getloadavg(),
            }
            tops[key] = ids
            log(f"[scale {scale}] {key}: p50 {out['latency_ms'][key]['p50']} ms")
        index.close()
    # Writes and sizes with the default settings (dense_scan "auto" when it exists).
    index = Index(path, embedder=inner, settings=engine_settings(None))
    out["search_settings"] = index.settings.search.model_dump()
    out["after_write"] = first_search_after_write(index, queries, after_write)
    out["after_write"]["dense_scan"] = index.settings.search.model_dump().get("dense_scan")
    log(f"[scale {scale}] after write: {json.dumps(out['after_write'])}")
    stats = index.stats()
    c = stats.corpora[0]
    out["disk"] = {
        "chunks": c.chunks,
        "documents": c.documents,
        "vector_bytes": c.vector_bytes,
        "catalog_bytes": c.catalog_bytes,
        "lexical_bytes": c.lexical_bytes,
        "bytes_per_chunk": {
            "vectors": round(c.vector_bytes / c.chunks, 1),
            "catalog": round(c.catalog_bytes / c.chunks, 1),
            "lexical": round(c.lexical_bytes / c.chunks, 1),
            "total": round((c.vector_bytes + c.catalog_bytes + c.lexical_bytes) / c.chunks, 1),
        },
    }
    index.close()
    if "dense (binary)" in tops:
        exact, binary = tops["dense (exact)"], tops["dense (binary)"]
        out["binary_recall@10_vs_exact"] = round(
            float(
                np.mean(
                    [
                        len(set(a) & set(b)) / max(1, len(a))
                        for a, b in zip(exact, binary, strict=True)
                    ]
                )
            ),
            4,
        )
    st = proc_status()
    out["rss_kb"] = {"after_open": rss_open, "end": st["VmRSS"], "peak": st["VmHWM"]}
    return out


def first_search_after_write(index: Any, queries: list[str], rounds: int) -> dict[str, Any]:
    """Hybrid latency (no rerank) of the first and second search after adding one document, next
    to the usual latency: the same queries searched ``rounds`` times with no write between.
    Doc ids are fixed and texts carry a nonce: each add is a real write (a replace) and the
    index does not grow from run to run."""
    nonce = time.time_ns()
    picks = [queries[(j * 7) % len(queries)] for j in range(rounds)]
    usual, first, second, add_ms = [], [], [], []
    for q in picks:
        t = time.perf_counter()
        index.search(q, top_k=10, mode="hybrid", rerank=False)
        usual.append((time.perf_counter() - t) * 1000)
    for j, q in enumerate(picks):
        text = f"# After write {j}\n\nA new note {nonce} number {j}: {q}"
        t = time.perf_counter()
        index.add_documents({f"after-write-{j}": text})
        add_ms.append((time.perf_counter() - t) * 1000)
        for store, query in ((first, q), (second, picks[(j + 1) % len(picks)])):
            t = time.perf_counter()
            index.search(query, top_k=10, mode="hybrid", rerank=False)
            store.append((time.perf_counter() - t) * 1000)
    u, a = float(np.median(usual)), float(np.median(first))
    return {
        "rounds": rounds,
        "usual_p50_ms": round(u, 2),
        "after_write_p50_ms": round(a, 2),
        "ratio": round(a / u, 2),
        "after_write_max_ms": round(max(first), 2),
        "second_after_write_p50_ms": round(float(np.median(second)), 2),
        "add_one_doc_p50_ms": round(float(np.median(add_ms)), 2),
    }


def run_worker(scale: int, n_queries: int, after_write: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        str(scale),
        "--queries",
        str(n_queries),
        "--after-write",
        str(after_write),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write("".join(f"    {line}\n" for line in done.stdout.splitlines()[:-1]))
    if done.returncode != 0:
        return {"scale": scale, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.splitlines()[-1])


# -- 4. a real server --------------------------------------------------------------------------
def serve_rss(scale: int, queries: list[str]) -> dict[str, Any]:
    """Idle RSS of ``guaipeca serve --transport http`` on the scale's index after searches."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    script = Path(sys.executable).parent / "guaipeca"
    home = WORK / "serve-home"
    home.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {
        **os.environ,
        "GUAIPECA_HOME": str(home),
        "GUAIPECA_DATA_DIR": str(WORK / f"scale-{scale}"),
    }
    proc = subprocess.Popen(
        [str(script), "serve", "--transport", "http", "--port", str(port), "--no-watch"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {
        "scale": scale,
        "command": f"guaipeca serve --transport http --port {port} --no-watch",
        "searches": len(queries),
    }
    try:
        t0 = time.perf_counter()
        while True:
            try:
                if httpx2.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if proc.poll() is not None or time.perf_counter() - t0 > 180:
                err = proc.stderr.read().decode() if proc.stderr else ""
                return out | {"error": f"server did not start: {err[-500:]}"}
            time.sleep(0.3)
        out["startup_seconds"] = round(time.perf_counter() - t0, 2)
        out["rss_kb_after_start"] = proc_status(proc.pid)["VmRSS"]

        async def searches() -> list[float]:
            lat = []
            async with (
                httpx2.AsyncClient(timeout=60) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as c,
            ):
                for q in queries:
                    t = time.perf_counter()
                    res = await c.call_tool("search", {"query": q, "top_k": 10})
                    lat.append((time.perf_counter() - t) * 1000)
                    assert isinstance(res.structured_content, dict), res
            return lat

        lat = anyio.run(searches)
        time.sleep(1)
        busy = proc_status(proc.pid)
        # Idle: no request for longer than server.idle_trim_seconds (default 5 s), after
        # which the server unmaps vector pages and trims the C heap.
        time.sleep(9)
        st = proc_status(proc.pid)
        out |= {
            "search_ms_over_mcp_http": pct(lat),
            "rss_kb_1s_after_searches": busy["VmRSS"],
            "idle_rss_kb": st["VmRSS"],
            "idle_anon_kb": anon_kb(proc.pid),
            "peak_rss_kb": st["VmHWM"],
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


# -- 5. charts ---------------------------------------------------------------------------------
def charts(result: dict[str, Any], img: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["scales"] if "error" not in r]
    if not rows:
        return []
    img.mkdir(parents=True, exist_ok=True)
    xs = [r["disk"]["chunks"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharex=True)
    for ax, field, what in (
        (axes[0], "p50", "wall-clock p50 (ms)"),
        (axes[1], "cpu_ms_p50", "CPU time per query, p50 (ms)"),
    ):
        for key in rows[0]["latency_ms"]:
            ys = [r["latency_ms"][key].get(field) for r in rows]
            if None not in ys:
                ax.plot(xs, ys, marker="o", label=key)
        ax.set_xscale("log")
        ax.set_xlabel("chunks in the index")
        ax.set_ylabel(what)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Guaipeca search latency vs index size (top_k=10, query embedding included)")
    fig.tight_layout()
    lat_png = img / "speed-latency.png"
    fig.savefig(lat_png, dpi=110)
    plt.close(fig)
    fig, ax1 = plt.subplots(figsize=(7, 4.2))
    for part in ("vectors", "catalog", "lexical", "total"):
        ax1.plot(
            xs,
            [r["disk"]["bytes_per_chunk"][part] for r in rows],
            marker="o",
            label=f"disk: {part}",
        )
    ax1.set_xscale("log")
    ax1.set_xlabel("chunks in the index")
    ax1.set_ylabel("bytes per chunk on disk")
    ax1.grid(True, which="both", alpha=0.3)
    ax2 = ax1.twinx()
    ax2.plot(
        xs,
        [r["rss_kb"]["peak"] / 1024 for r in rows],
        "k--",
        marker="s",
        label="peak RSS, search process (MB)",
    )
    ax2.set_ylabel("MB")
    ax2.set_ylim(bottom=0)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.set_ylim(bottom=0)
    ax1.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower right")
    ax1.set_title("Disk bytes per chunk and memory vs index size")
    fig.tight_layout()
    foot_png = img / "speed-footprint.png"
    fig.savefig(foot_png, dpi=110)
    plt.close(fig)
    return [os.path.relpath(lat_png, REPO), os.path.relpath(foot_png, REPO)]


def tables(result: dict[str, Any]) -> str:
    """Markdown tables for docs/benchmarks.md."""
    lines = []
    ix = result.get("indexing", {})
    if "cold" in ix:
        lines += [
            "| indexing (real model, on disk) | documents | chunks | embedded | seconds | "
            "docs/s | chunks/s |",
            "|---|---|---|---|---|---|---|",
        ]
        for label in ("cold", "incremental_10_new", "unchanged_readd"):
            r = ix[label]
            cps = "-" if r["chunks_per_s"] is None else f"{r['chunks_per_s']:.1f}"
            lines.append(
                f"| {label.replace('_', ' ')} | {r['docs']} | {r['chunks']} | "
                f"{r['chunks_embedded']} | {r['seconds']:.3f} | {r['docs_per_s']:,.1f} | {cps} |"
            )
        lines.append("")
    rows = [r for r in result.get("scales", []) if "error" not in r]
    if rows:
        keys = list(rows[0]["latency_ms"])
        lines += [
            "| mode | "
            + " | ".join(f"{r['disk']['chunks']:,} chunks: p50 / p95 / p99 (CPU p50)" for r in rows)
            + " |",
            "|---|" + "---|" * len(rows),
        ]
        for k in keys:
            cells = []
            for r in rows:
                m = r["latency_ms"][k]
                cpu = f" ({m['cpu_ms_p50']:.0f})" if "cpu_ms_p50" in m else ""
                cells.append(f"{m['p50']:.0f} / {m['p95']:.0f} / {m['p99']:.0f}{cpu}")
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        if "binary_recall@10_vs_exact" in rows[0]:
            lines.append(
                "| recall@10, binary vs exact dense | "
                + " | ".join(f"{r['binary_recall@10_vs_exact']:.3f}" for r in rows)
                + " |"
            )
        lines += [
            "",
            "| chunks | hybrid p50, no write before (ms) | first search after adding one "
            "document p50 / max (ms) | ratio | second search after p50 (ms) | "
            "add one document p50 (ms) |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            aw = r["after_write"]
            second = aw.get("second_after_write_p50_ms")
            lines.append(
                f"| {r['disk']['chunks']:,} | {aw['usual_p50_ms']:.0f} | "
                f"{aw['after_write_p50_ms']:.0f} / {aw['after_write_max_ms']:.0f} | "
                f"{aw['ratio']}x | {'-' if second is None else f'{second:.0f}'} | "
                f"{aw['add_one_doc_p50_ms']:.0f} |"
            )
        lines += [
            "",
            "| chunks | vectors B/chunk | catalog B/chunk | lexical B/chunk | total B/chunk | "
            "on disk (MB) | RSS after open (MB) | peak RSS (MB) | open (s) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            b, d = r["disk"]["bytes_per_chunk"], r["disk"]
            mb = (d["vector_bytes"] + d["catalog_bytes"] + d["lexical_bytes"]) / 2**20
            lines.append(
                f"| {d['chunks']:,} | {b['vectors']:.0f} | {b['catalog']:.0f} "
                f"| {b['lexical']:.0f} | {b['total']:.0f} | {mb:.0f} | "
                f"{r['rss_kb']['after_open'] / 1024:.0f} | {r['rss_kb']['peak'] / 1024:.0f} | "
                f"{r['open_seconds']:.2f} |"
            )
    sv = result.get("serve", {})
    if "idle_rss_kb" in sv:
        lines += [
            "",
            "| `guaipeca serve --transport http` | value |",
            "|---|---|",
            f"| index | {sv['scale']:,} chunks |",
            f"| start-up to /health OK | {sv['startup_seconds']} s |",
            f"| RSS after start | {sv['rss_kb_after_start'] / 1024:.0f} MB |",
            f"| search over MCP Streamable HTTP, p50 of {sv['searches']} | "
            f"{sv['search_ms_over_mcp_http']['p50']:.0f} ms |",
        ]
        if "rss_kb_1s_after_searches" in sv:
            lines.append(
                f"| RSS 1 s after the searches | {sv['rss_kb_1s_after_searches'] / 1024:.0f} MB |"
            )
        lines.append(
            f"| **idle RSS (10 s without requests)** | **{sv['idle_rss_kb'] / 1024:.0f} MB** |"
        )
        if "idle_anon_kb" in sv:
            lines.append(
                f"| of which anonymous (not file-backed) | {sv['idle_anon_kb'] / 1024:.0f} MB |"
            )
        lines.append(f"| peak RSS | {sv['peak_rss_kb'] / 1024:.0f} MB |")
    return "\n".join(lines)


# -- driver ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--scales", default="10000,30000,100000,300000", help="comma-separated chunk counts"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="scales 10000 only, 50 queries, 100-document indexing sample, no server",
    )
    ap.add_argument("--queries", type=int, default=220, help="queries timed per mode and scale")
    ap.add_argument("--after-write", type=int, default=20, help="write+search rounds")
    ap.add_argument("--sample", type=int, default=300, help="documents for the indexing test")
    ap.add_argument("--serve-scale", type=int, default=100000)
    ap.add_argument("--skip-indexing", action="store_true", help="reuse the last indexing figures")
    ap.add_argument(
        "--skip-measured",
        action="store_true",
        help="reuse the last run's figures for scales (and the server) it already measured",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "speed.json"))
    ap.add_argument("--img", default=str(REPO / "docs" / "img"))
    ap.add_argument(
        "--tables", action="store_true", help="print the tables of the last run (and re-draw)"
    )
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.tables:  # re-draw the charts and print the tables of the last run
        last = json.loads(Path(args.out).read_text())
        charts(last, Path(args.img))
        print(tables(last))
        return 0
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.queries, args.after_write)), flush=True)
        return 0
    if args.quick:
        args.scales, args.queries, args.sample, args.after_write = "10000", 50, 100, 5
    scales = sorted(int(s) for s in args.scales.split(","))
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    previous = json.loads(out_path.read_text()) if out_path.exists() else {}
    result: dict[str, Any] = {
        "command": "python bench/speed.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "dense_scan_values": dense_scan_values() or "search.dense_scan not in this version",
        "loadavg_samples": [],
    }

    def save() -> None:
        result["loadavg_samples"].append((round(time.time() - started), os.getloadavg()))
        out_path.write_text(json.dumps(result, indent=1))

    if args.skip_indexing and "indexing" in previous:
        origin = previous["indexing"].get("reused_from", previous.get("started"))
        result["indexing"] = previous["indexing"] | {"reused_from": origin}
    else:
        result["indexing"] = indexing_speed(args.sample)
    save()
    units, vectors, used = load_units()
    result["synthetic"] = {
        "datasets": used,
        "units": len(units),
        "noise_sigma": NOISE,
        "perturbation": "copy c>0 of a unit: 2 words dropped, 2 neighbours "
        "swapped, '(copy c of u)' in the title line",
    }
    inner = real_embedder()
    manifest = build_scales(scales, units, vectors, inner)
    builds = [b for b in manifest["build"] if b["chunks"]]
    if builds:
        result["build_without_embedding"] = {
            "chunks_per_s_median": round(
                float(np.median([b["chunks"] / b["seconds"] for b in builds])), 1
            ),
            "batches": len(builds),
            "batch_docs": BUILD_BATCH,
        }
    del units, vectors
    save()
    result["scales"] = []
    measured = {r["scale"]: r for r in previous.get("scales", []) if "error" not in r}
    for n in scales:
        if args.skip_measured and n in measured:
            r = measured[n] | {"reused_from": previous.get("started")}
            log(f"[scale {n}] reused from the run of {previous.get('started')}")
        else:
            r = run_worker(n, args.queries, args.after_write)
        result["scales"].append(r)
        save()
        if "error" in r:
            log(f"[scale {n}] failed: {r['error']}")
    serve_at = args.serve_scale if args.serve_scale in scales else None
    if serve_at and args.skip_measured and "error" not in previous.get("serve", {"error": 1}):
        result["serve"] = previous["serve"] | {"reused_from": previous.get("started")}
    elif serve_at and not args.quick:
        result["serve"] = serve_rss(serve_at, load_queries(10))
        log(f"[serve] {json.dumps(result['serve'])}")
    result["charts"] = charts(result, Path(args.img))
    result["tables_md"] = tables(result)
    result["seconds"] = round(time.time() - started, 1)
    result["loadavg_at_end"] = os.getloadavg()
    save()
    print(result["tables_md"])
    log(f"wrote {out_path} in {result['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
