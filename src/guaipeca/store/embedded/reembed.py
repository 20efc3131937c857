"""Re-embed a corpus's stored chunks with another model (``guaipeca reembed``).

No document is converted or chunked again: the chunks' text comes from the catalog. New
vectors go to a work file, ``reembed.f32``, beside the corpus, with ``reembed.json`` saying
which model they are for and how far the run got; both are flushed after every batch of
documents, so a run killed at any point resumes from its last batch. Until the switch the
corpus keeps its old vectors and serves keyword search and reads (dense search waits for the
new model's vectors); the switch is one catalog commit (:meth:`Corpus.swap_vectors`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from guaipeca.store.contract import ChunkRow
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import FileVectors, MemoryVectors

__all__ = ["ReembedReport", "reembed_corpus"]

WORK_FILE = "reembed.f32"
PROGRESS_FILE = "reembed.json"
_DOCS_PER_BATCH = 32

#: A corpus's chunks of one document -> (what is embedded for each, its hash), in order.
Inputs = Callable[[Sequence[ChunkRow]], tuple[list[str], list[str]]]
Embed = Callable[[list[str]], npt.NDArray[np.float32]]
#: Called with (documents done, documents in all) after each batch.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ReembedReport:
    corpus: str
    model: str
    documents: int
    chunks: int
    #: Documents a previous, interrupted run had already done (0: a fresh start).
    resumed: int
    #: False when the corpus was already on the configured model (nothing was done).
    changed: bool


def reembed_corpus(
    corpus: Corpus, inputs: Inputs, embed: Embed, progress: Progress | None = None
) -> ReembedReport:
    """Re-embed every chunk of ``corpus`` for its configured model (``corpus.identity``).

    The corpus's write lock is taken only for the swap, so other processes keep opening and
    searching it; a write that lands meanwhile (another process deleting a document) makes
    the run start over, this time holding the write lock throughout.

    Raises:
        IndexLockedError: another reembed of this corpus is running.
    """
    target = corpus.identity
    folder = corpus.folder
    with WriteLock(folder / "reembed.lock" if folder else None, timeout=1.0):
        if corpus.mismatch is None and corpus.stored_identity() == target:
            _clear(folder)
            n_docs, n_chunks, _ = corpus.catalog.counts()
            return ReembedReport(corpus.name, target.describe(), n_docs, n_chunks, 0, False)
        first = _run(corpus, inputs, embed, progress, hold_lock=False)
        report = first or _run(corpus, inputs, embed, progress, hold_lock=True)
        assert report is not None
        return report


def _run(
    corpus: Corpus, inputs: Inputs, embed: Embed, progress: Progress | None, *, hold_lock: bool
) -> ReembedReport | None:
    """One pass; None when the catalog changed under it before the swap."""
    with corpus.write_locked() if hold_lock else contextlib.nullcontext():
        generation = corpus.catalog.generation()
        docs = [
            (int(pk), str(doc_id))
            for pk, doc_id in corpus.catalog.read_sql(
                "SELECT doc_pk, doc_id FROM documents ORDER BY doc_pk"
            )
        ]
        work, done_pk = _open_work(corpus, generation)
        resumed = sum(1 for pk, _ in docs if pk <= done_pk)
        todo = [(pk, doc_id) for pk, doc_id in docs if pk > done_pk]
        for start in range(0, len(todo), _DOCS_PER_BATCH):
            batch = todo[start : start + _DOCS_PER_BATCH]
            texts: list[str] = []
            slots: list[int] = []
            for _, doc_id in batch:
                rows = corpus.catalog.document_chunks(doc_id)
                texts.extend(inputs(rows)[0])
                slots.extend(r.slot for r in rows)
            if texts:
                work.write(np.asarray(slots, dtype=np.int64), embed(texts))
            work.flush()
            _save_progress(corpus, generation, batch[-1][0])
            if progress is not None:
                progress(resumed + start + len(batch), len(docs))
        with corpus.write_locked():
            if corpus.catalog.generation() != generation:
                work.close()
                _clear(corpus.folder)
                return None
            hashes: list[tuple[int, str]] = []
            for _, doc_id in docs:  # the new model salts the hashes: recompute them all
                rows = corpus.catalog.document_chunks(doc_id)
                hashes.extend(zip((r.chunk_pk for r in rows), inputs(rows)[1], strict=True))
            corpus.swap_vectors(work, hashes)
            _clear(corpus.folder)
    name = corpus.identity.describe()
    return ReembedReport(corpus.name, name, len(docs), len(hashes), resumed, True)


def _open_work(corpus: Corpus, generation: int) -> tuple[FileVectors | MemoryVectors, int]:
    """The work vectors and the last document done, or fresh ones when the saved progress
    is for another model or an older state of the catalog."""
    dim = corpus.identity.dimension
    if corpus.folder is None:
        return _covering(MemoryVectors(dim), corpus), -1
    saved = _load_progress(corpus.folder)
    expected = {"identity": corpus.identity.to_json(), "generation": generation}
    fresh = saved is None or any(saved.get(k) != v for k, v in expected.items())
    if fresh:
        _clear(corpus.folder)
    work = FileVectors(corpus.folder / WORK_FILE, dim, create=True)
    done = -1 if fresh or saved is None else int(str(saved["done_doc_pk"]))
    return _covering(work, corpus), done


def _covering(work: FileVectors | MemoryVectors, corpus: Corpus) -> FileVectors | MemoryVectors:
    """Grown to the catalog's high-water mark (freed slots at the top included), as every
    vector file must be; the padding rows belong to no chunk."""
    high_water = corpus.catalog.slot_map()[1]
    if len(work.rows()) < high_water:
        work.write(np.asarray([high_water - 1]), np.zeros((1, work.dim), np.float32))
    return work


def _load_progress(folder: Path) -> dict[str, object] | None:
    try:
        data = json.loads((folder / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not (folder / WORK_FILE).exists():
        return None
    return data


def _save_progress(corpus: Corpus, generation: int, done_doc_pk: int) -> None:
    if corpus.folder is None:
        return
    path = corpus.folder / PROGRESS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "identity": corpus.identity.to_json(),
                "generation": generation,
                "done_doc_pk": done_doc_pk,
            }
        )
    )
    with tmp.open("rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _clear(folder: Path | None) -> None:
    if folder is not None:
        for name in (WORK_FILE, PROGRESS_FILE):
            (folder / name).unlink(missing_ok=True)
