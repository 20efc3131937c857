"""Measure `guaipeca migrate --to qdrant` on 100k synthetic chunks (docs/scaling.md).

Chunks: SciFact abstracts (real text, ../shared/data) cut to 900 characters, ten per
document as ``## Part`` sections, 10,000 documents -> 100,000+ chunks. Vectors: 384-dim
unit vectors drawn from a generator seeded by each text's hash (MiniLM's size; embedding
100k chunks with the real model would take an hour on 2 cores and is not what migration
costs, since migration never embeds). Target: qdrant-client's local mode on disk (no Qdrant
server can run here). Usage: .venv/bin/python bench/qdrant_migrate.py [WORKDIR] [DOCS]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from guaipeca import Index, NewDocument
from guaipeca.store.qdrant.backend import QdrantBackend
from guaipeca.store.transfer import migrate_corpus

DIM = 384
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir" / "scifact"


class SeededEmbedder:
    """Deterministic unit vectors from each text's hash (fast; for measuring storage)."""

    name = "seeded-384"
    dimension = DIM

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


def main() -> None:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    n_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    with gzip.open(SHARED / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        abstracts = [json.loads(line)["text"][:900] for line in fh]
    docs = []
    for d in range(n_docs):
        parts = [abstracts[(d * 10 + j) % len(abstracts)] for j in range(10)]
        body = "\n\n".join(f"## Part {j}\n\n{p}" for j, p in enumerate(parts))
        docs.append(NewDocument(f"doc{d:05d}", body, metadata={"n": d % 100}))
    t0 = time.perf_counter()
    source = Index(work / "embedded", embedder=SeededEmbedder())
    for i in range(0, len(docs), 500):
        source.add_documents(docs[i : i + 500])
    built = time.perf_counter() - t0
    chunks = source.stats().chunks
    print(
        f"embedded index: {n_docs} documents, {chunks} chunks, built in {built:.0f} s", flush=True
    )
    target = Index(embedder=SeededEmbedder(), backend=QdrantBackend.open_local(work / "qdrant"))
    target.create_corpus("default")
    t0 = time.perf_counter()
    report = migrate_corpus(
        source.store("default"),
        target.store("default"),
        checkpoint=work / "checkpoint.jsonl",
        batch=64,
    )
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in (work / "qdrant").rglob("*") if p.is_file())
    print(
        f"migrate --to qdrant (local mode): {report.documents} documents, {report.chunks} chunks "
        f"in {seconds:.0f} s ({report.chunks / seconds:.0f} chunks/s); peak RSS {rss:.0f} MB; "
        f"Qdrant folder {size / 2**20:.0f} MB",
        flush=True,
    )
    q = "protein expression in cancer cells"
    a = [h.chunk_id for h in source.search(q, top_k=10, mode="keyword")]
    b = [h.chunk_id for h in target.search(q, top_k=10, mode="keyword")]
    print(f"keyword top-10 identical after migration: {a == b}")
    target.close()
    source.close()


if __name__ == "__main__":
    main()
