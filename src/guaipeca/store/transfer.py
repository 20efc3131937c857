"""Copy corpora between backends (embedded, Qdrant, PostgreSQL) without embedding anything
again.

Each document is read with its chunks, their stored vectors and embedding-input hashes, and
written to the target store as it is. Moving to Qdrant or PostgreSQL keeps chunk ids
(``corpus:number``);
moving back to the embedded backend numbers chunks again in the same order (SQLite assigns
them), so rankings and ties stay the same either way.

Resumable: after each batch the migrated document ids are appended to a checkpoint file
(JSON lines, flushed and fsynced), and a rerun skips them. A batch interrupted halfway is
written again (a replace, so nothing is duplicated).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from guaipeca.errors import GuaipecaError
from guaipeca.store.contract import CorpusStore, PreparedDocument
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.store.postgres.corpus import PostgresCorpus
from guaipeca.store.qdrant.corpus import QdrantCorpus
from guaipeca.types import ChunkSpan, location_of

__all__ = ["MigrateReport", "export_documents", "migrate_corpus"]


@dataclass(frozen=True, slots=True)
class MigrateReport:
    corpus: str
    documents: int
    chunks: int
    skipped: int  # already migrated by an earlier, interrupted run


Exported = list[tuple[PreparedDocument, list[int]]]  # each document with its chunk ids


def _catalog_db(store: Corpus) -> sqlite3.Connection:
    if store.folder is None:
        raise GuaipecaError("only an index on disk can be migrated")
    # Read-only, beside the catalog's own connection: what is needed here (hashes, source
    # state) is not part of the store interface.
    return sqlite3.connect(f"file:{store.folder / 'catalog.sqlite'}?mode=ro", uri=True)


def _embedded_docs(store: Corpus, doc_ids: Sequence[str]) -> Exported:
    db = _catalog_db(store)
    try:
        rows = store.catalog
        vectors = store._vectors.rows()
        out = []
        for doc_id in doc_ids:
            doc = rows.document(doc_id)
            if doc is None:
                continue
            sha, modified, s_sha, s_size, s_mtime = db.execute(
                "SELECT text_sha256, modified, source_sha256, source_size, source_mtime_ns "
                "FROM documents WHERE doc_id = ?",
                (doc_id,),
            ).fetchone()
            hashes = dict(
                db.execute(
                    "SELECT chunk_pk, embed_sha256 FROM chunks WHERE doc_pk = ?", (doc.doc_pk,)
                ).fetchall()
            )
            chunks = rows.document_chunks(doc_id)
            vecs = (
                np.asarray(vectors[[c.slot for c in chunks]], dtype=np.float32)
                if chunks
                else np.zeros((0, store.dim), np.float32)
            )
            doc_out = (
                PreparedDocument(
                    doc_id=doc_id,
                    text=doc.text,
                    text_sha256=sha,
                    metadata=doc.metadata,
                    source_path=doc.source_path,
                    modified=modified,
                    chunks=[ChunkSpan(**location_of(c)) for c in chunks],
                    embed_hashes=[hashes[c.chunk_pk] for c in chunks],
                    vectors=vecs,
                    source_state=(s_sha, s_size, s_mtime),
                ),
                [c.chunk_pk for c in chunks],
            )
            out.append(doc_out)
        return out
    finally:
        db.close()


def export_documents(store: CorpusStore, doc_ids: Sequence[str]) -> Exported:
    """Documents as stored (text, chunks, vectors, hashes, source state), ready to write."""
    if isinstance(store, QdrantCorpus | PostgresCorpus):
        return store.export_documents(doc_ids)
    if isinstance(store, Corpus):
        return _embedded_docs(store, doc_ids)
    raise GuaipecaError(f"cannot migrate from a {type(store).__name__}")


def _first_keys(store: CorpusStore) -> list[str]:
    """Document ids ordered by their first chunk id (so the target numbers chunks alike)."""
    if isinstance(store, QdrantCorpus | PostgresCorpus):
        first = store.first_chunk_ids()
    elif isinstance(store, Corpus):
        db = _catalog_db(store)
        try:
            first = {
                str(d): int(pk or 0)
                for d, pk in db.execute(
                    "SELECT d.doc_id, min(c.chunk_pk) FROM documents d "
                    "LEFT JOIN chunks c ON c.doc_pk = d.doc_pk GROUP BY d.doc_pk"
                )
            }
        finally:
            db.close()
    else:
        raise GuaipecaError(f"cannot migrate from a {type(store).__name__}")
    return sorted(first, key=lambda d: (first[d], d))


def _done(checkpoint: Path, corpus: str) -> set[str]:
    done: set[str] = set()
    if checkpoint.exists():
        for line in checkpoint.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash: its batch is written again
            if isinstance(entry, dict) and entry.get("corpus") == corpus:
                done.update(str(d) for d in entry.get("docs", []))
    return done


def _append(checkpoint: Path, corpus: str, doc_ids: Sequence[str]) -> None:
    with checkpoint.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"corpus": corpus, "docs": list(doc_ids)}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _batches(ids: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


def migrate_corpus(
    source: CorpusStore,
    target: CorpusStore,
    *,
    checkpoint: Path,
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> MigrateReport:
    """Copy one corpus; resumes from ``checkpoint``. ``progress(done, total)`` per batch."""
    ids = _first_keys(source)
    done = _done(checkpoint, source.name)
    todo = [d for d in ids if d not in done]
    skipped = len(ids) - len(todo)
    copied = chunks = 0
    if progress:
        progress(skipped, len(ids))
    if isinstance(target, QdrantCorpus) and isinstance(source, Corpus):
        # BM25 needs the average chunk length of the whole corpus from the first write on.
        lengths = [
            len(source.analyzer.tokens(text))
            for part in source.catalog.iter_chunk_texts()
            for _, text in part
        ]
        target.preset_avgdl(sum(lengths) / len(lengths) if lengths else 0.0)
    for part in _batches(todo, batch):
        exported = export_documents(source, part)
        docs = [d for d, _ in exported]
        if isinstance(target, QdrantCorpus | PostgresCorpus):
            target.write(docs, keys=[k for _, k in exported])  # chunk ids kept
        else:
            target.write(docs)
        _append(checkpoint, source.name, part)
        copied += len(docs)
        chunks += sum(len(d.chunks) for d in docs)
        if progress:
            progress(skipped + copied, len(ids))
    return MigrateReport(source.name, copied, chunks, skipped)
