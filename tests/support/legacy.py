"""What users of the systems Guaipeca replaces bring: the original Guaipeca's sample config
and data folder, and A-RAG-OG's ``.env``, each built from what its README documents.

The data folder is ``<data>/corpora/<name>/`` holding ``faiss_index.fai`` (a real FAISS
IndexFlatIP written by faiss-cpu), its ``.fai.bak`` copy, ``metadata.json`` (the chunks) and
``file_hashes.json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

#: The original Guaipeca's README sample, as documented (its two corpus folders made here).
ORIGINAL_SAMPLE = """\
corpora:
  - name: epm-docs
    path: ./epm
    topic: "EPM & Oracle HFM/ARCS"
    weight: 1.5
    extensions: [.md, .txt, .pdf, .docx]

  - name: finance-reference
    path: ./finance
    topic: "Finance & Accounting Standards"
    weight: 1.3
    extensions: [.md, .txt, .pdf]

embedding:
  model: all-MiniLM-L6-v2
  dimensions: 384
  preprocess: true              # heading + first 500 chars for better embeddings
  cache_ttl_seconds: 3600      # embedding cache entry TTL (1 hour)
  cache_max_entries: 10000     # max cached embeddings (LRU eviction)

chunking:
  max_size: 2000
  overlap: 200
  table_aware: true
  split_on_headings: true

server:
  transport: both  # stdio | http | both
  port: 8090
  host: 127.0.0.1  # Use 0.0.0.0 for network access
  # auth_token: "your-secret-token"  # Optional: require Bearer token auth

upload:
  allow: ["epm-docs"]  # corpora that accept file uploads
  max_file_size: 52428800  # 50MB
  allowed_extensions: [.md, .txt, .pdf, .docx]
  auto_index: true  # index after upload

# Search configuration (optional — all values have safe defaults)
search:
  hybrid: false              # Enable BM25 + FAISS hybrid search (default: false)
  bm25_weight: 1.0           # BM25 contribution weight in RRF fusion
  dense_weight: 1.0          # Dense (FAISS) contribution weight in RRF fusion
  rrf_k: 60                  # RRF constant (higher = smoother ranking)
  max_chars: 8000            # Threshold for auto return_mode (total result chars)
"""

#: A-RAG-OG's .env with every variable its README lists, at its documented defaults (the
#: secrets and tokens filled in, as a user's copy of .env.example has them).
ARAGOG_ENV = """\
HF_HUB_OFFLINE=1
HF_HOME=./data/huggingface
FASTEMBED_CACHE_PATH=./data/fastembed
HOST=0.0.0.0
PORT=8000
RATE_LIMIT_RPS=5
RATE_LIMIT_BURST=15
SEARCH_MAX_CONCURRENCY=16
SEARCH_TIMEOUT=30
JWT_SECRET=an-openwebui-secret-of-enough-length-123
JWT_ALGORITHM=HS256
MINIO_ENDPOINT=localhost:9000
MINIO_USER=minio
MINIO_PASSWORD=minio-password
MINIO_BUCKET=default
MINIO_URL_EXPIRE=3600
QDRANT_URL=http://localhost:6333
QDRANT_TOKEN=qdrant-key
QDRANT_TIMEOUT=30
QDRANT_EMBEDDING_DIM=1024
QDRANT_COLLECTION=aragog
DOCLING_URL=http://localhost:5001
DOCLING_TIMEOUT=600
CHUNKER_TOKENIZER=BAAI/bge-m3
CHUNKER_MAX_TOKENS=1000
ENRICHER_MAX_WORKERS=3
ENRICHER_MODEL=gemma4:31b
ENRICHER_URL=http://localhost:11434/v1
ENRICHER_TOKEN=enricher-key
ENRICHER_TIMEOUT=300
ENRICHER_LANGUAGE=english
DENSE_EMBEDDING_MODEL=BAAI/bge-m3
DENSE_EMBEDDING_URL=http://localhost:8001/v1
DENSE_EMBEDDING_TOKEN=dense-key
DENSE_EMBEDDING_TIMEOUT=15
SPARSE_EMBEDDING_MODEL=Qdrant/bm25
SPARSE_EMBEDDING_LANGUAGE=english
SPARSE_EMBEDDING_DEVICE=cpu
EMBEDDED_META_FIELDS=context,keywords,headings,hypothetical_questions
RERANKER_MODEL=BAAI/bge-reranker-v2-m3
RERANKER_URL=http://localhost:8002/v1
RERANKER_TOKEN=reranker-key
RERANKER_TIMEOUT=15
RERANKER_SCORE_THRESHOLD=0.2
"""

#: Two documents as the original chunked them: 20 characters of overlap carried from one
#: chunk to the next, offsets into the converted text, heading paths and section ids.
AUDIT = (
    "# Audit guide\n\n## Intro\n\nThe HFM data audit tracks every change to consolidated "
    "data.\n\n## Steps\n\nOpen the audit report and filter by entity."
)
ARCS = "ARCS reconciliations close the period once every account balances."


def original_chunks(docs: Path) -> list[dict[str, Any]]:
    cut = AUDIT.index("## Steps")
    return [
        {
            "id": "3f1a9c0e5b7d2468",
            "heading": "Intro",
            "text": AUDIT[:cut],
            "source_path": str(docs / "audit.md"),
            "char_offset": 0,
            "metadata": {"filename": "audit.md", "page": 1},
            "heading_path": ["Audit guide", "Intro"],
            "section_id": "audit:intro",
        },
        {
            "id": "9b2e4d6f8a0c1357",
            "heading": "Steps",
            "text": AUDIT[cut - 20 :],  # the overlap the original carried over
            "source_path": str(docs / "audit.md"),
            "char_offset": cut - 20,
            "metadata": {},
            "heading_path": ["Audit guide", "Steps"],
            "section_id": "audit:steps",
        },
        {
            "id": "c0ffee0123456789",
            "heading": "",
            "text": ARCS,
            "source_path": str(docs / "close" / "arcs.txt"),
            "char_offset": 0,
            "metadata": {"filename": "arcs.txt"},
            "heading_path": [],
            "section_id": "unstructured:c0ffee",
        },
    ]


def original_data(home: Path, docs: Path, name: str = "epm-docs", dimension: int = 384) -> Path:
    """``home`` laid out as the original's ``~/.guaipeca``; returns the corpus folder."""
    import faiss

    folder = home / "data" / "corpora" / name
    folder.mkdir(parents=True)
    chunks = original_chunks(docs)
    (folder / "metadata.json").write_text(json.dumps(chunks, indent=2))
    (folder / "file_hashes.json").write_text(
        json.dumps({c["source_path"]: "0" * 64 for c in chunks})
    )
    vectors = np.random.default_rng(7).random((len(chunks), dimension), dtype=np.float32)
    index = faiss.IndexFlatIP(dimension)
    index.add(vectors)
    faiss.write_index(index, str(folder / "faiss_index.fai"))
    shutil.copy2(folder / "faiss_index.fai", folder / "faiss_index.fai.bak")
    (folder / "bm25_index").mkdir()
    return folder
