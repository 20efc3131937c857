"""The corpus: opened in its constructor, read by dense and keyword scans (writes and
maintenance are the layers below it)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.lexical import Analyzer
from guaipeca.store.contract import ChunkRow, DenseScan, valid_corpus_name
from guaipeca.store.embedded.binary import BINARY_MIN_CHUNKS, candidate_count, prefilter
from guaipeca.store.embedded.catalog import Catalog
from guaipeca.store.embedded.corpus.maintenance import Maintenance
from guaipeca.store.embedded.corpus.recovery import Reembed, refuse_lost_catalog
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import FileVectors, MemoryVectors
from guaipeca.store.embedded.vectors import scores as vector_scores
from guaipeca.types import CorpusStats

F32 = npt.NDArray[np.float32]


class Corpus(Maintenance):
    """Storage and retrieval for one named corpus."""

    def __init__(
        self,
        name: str,
        folder: Path | None,
        *,
        language: str | None,
        model: str,
        dim: int,
        reembed: Reembed | None = None,
        identity: EmbedderIdentity | None = None,
    ) -> None:
        self.name = valid_corpus_name(name)
        #: Why the vectors cannot serve the configured model (another identity), or None.
        #: Such a corpus still answers keyword searches and reads; ``guaipeca reembed`` fixes it.
        self.mismatch: str | None = None
        self.identity = identity or EmbedderIdentity("custom", model, dim)
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            refuse_lost_catalog(self.name, folder)
        self.catalog = Catalog(folder / "catalog.sqlite" if folder else None)
        self._lock = WriteLock(folder / "write.lock" if folder else None)
        self.model = model
        self.dim = dim
        with self._lock:
            self.language = self._check_meta(language, model, dim)
        self._model_reembed = reembed
        self.analyzer = Analyzer(self.language)
        with self._lock:
            self._vectors: FileVectors | MemoryVectors
            self._vectors, opened = self._open_vectors()
            self.lexical = self._open_lexical()
            self._reconcile_lexical()
        self._snap = self._load_snapshot(opened)
        self._snap_lock = threading.Lock()

    # -- reads -------------------------------------------------------------------------
    def dense(
        self,
        query: F32,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        scan: DenseScan = "exact",
    ) -> list[tuple[int, float]]:
        """Cosine top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk.

        ``scan="exact"`` scores every live vector. ``"binary"`` first keeps the slots nearest
        by sign-bit Hamming distance (store/embedded/binary.py) and scores only those exactly: the
        scores are exact, a true top-``n`` item is rarely missed (recall measured in bench/).
        ``"auto"`` is binary from ``BINARY_MIN_CHUNKS`` live chunks. Filtered scans are exact.
        """
        if n <= 0:
            return []
        snap = self._fresh()
        rows = self._vectors.rows()
        high_water = len(snap.slot_to_pk)
        if not where and scan != "exact":
            count = snap.live_count
            if scan == "binary" or count >= BINARY_MIN_CHUNKS:
                if count == 0:
                    return []
                slots = prefilter(self._signs(snap, rows), query, snap.live, candidate_count(n))
                scores = self._vectors.gather(slots) @ query
                return _top(snap.slot_to_pk[slots], np.asarray(scores, dtype=np.float64), n)
        if where:
            pks, slots = self.catalog.filtered_slots(where, corpus=self.name, embedded_only=True)
            if len(pks) == 0:
                return []
            scores = vector_scores(self._vectors, query, high_water, np.asarray(slots))
        else:
            live = snap.live
            if snap.live_count == 0:
                return []
            # Block by block, released as it goes when the file is large (embedded/vectors.py).
            scores = vector_scores(self._vectors, query, high_water)
            pks = snap.slot_to_pk
            scores = np.where(live, scores, -np.inf)
        return _top(pks, np.asarray(scores, dtype=np.float64), n)

    def keyword(
        self,
        query: str,
        n: int,
        where: Mapping[str, Any] | None = None,
        *,
        phrase_weight: float = 0.0,
    ) -> list[tuple[int, float]]:
        """BM25 top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk; adjacent query
        words found side by side add ``phrase_weight`` times their pair's score."""
        if n <= 0:
            return []
        self._fresh()
        allowed: list[int] | None = None
        if where:
            pks, _ = self.catalog.filtered_slots(where, corpus=self.name)
            if len(pks) == 0:
                return []
            allowed = pks.tolist()
        return self.lexical.search(query, n, allowed=allowed, phrase_weight=phrase_weight)

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        return self.catalog.chunks(chunk_pks)

    def stats(self) -> CorpusStats:
        docs, chunks, free = self.catalog.counts()
        pending = self.catalog.pending_count()
        # chunks/s of the last embedding round (any process): the estimate of time left.
        rate = float(self.catalog.get_meta("embed_rate") or 0) if pending else 0.0
        return CorpusStats(
            name=self.name,
            language=self.language,
            documents=docs,
            chunks=chunks,
            deleted_slots=free,
            vector_bytes=self._vectors.size_bytes(),
            catalog_bytes=self.catalog.size_bytes(),
            lexical_bytes=self.lexical.size_bytes(),
            pending_chunks=pending,
            pending_seconds=round(pending / rate, 1) if rate > 0 else (None if pending else 0.0),
            model=self.stored_identity().describe(),
            model_mismatch=self.mismatch,
        )

    def stored_identity(self) -> EmbedderIdentity:
        """What the stored vectors are (fields not recorded read '?')."""
        if self.mismatch is None:
            return self.identity
        return EmbedderIdentity.from_record(self.catalog.vector_identity() or {})

    def release_memory(self) -> None:
        """Unmap the vector pages read so far (they stay in the OS page cache)."""
        self._vectors.release()

    def close(self) -> None:
        self.lexical.close()
        self._vectors.close()
        self.catalog.close()


def _top(
    ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], n: int
) -> list[tuple[int, float]]:
    finite = np.isfinite(scores)
    count = int(finite.sum())
    if count == 0:
        return []
    n = min(n, count)
    if n < len(scores):
        part = np.argpartition(-scores, n - 1)[:n]
        # Include every item tied with the cut-off so tie-breaking by id is exact.
        cut = scores[part].min()
        part = np.flatnonzero(scores >= cut)
    else:
        part = np.flatnonzero(finite)
    order = sorted(part.tolist(), key=lambda i: (-float(scores[i]), int(ids[i])))[:n]
    return [(int(ids[i]), float(scores[i])) for i in order]
