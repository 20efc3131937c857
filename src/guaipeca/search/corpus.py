"""One corpus on disk or in memory: its catalog, vector slots and lexical index kept in step.

This is our storage layout and write protocol (hand-written on purpose). A write is:
vectors into slots nobody references → flush; lexical deletes/adds → commit; catalog
commit last. A marker file says whether the lexical index is known to match a catalog
generation; if a crash leaves it dirty or behind, it is rebuilt from the catalog on open
(chunk text lives in the catalog, so no re-conversion or re-embedding is needed).
Readers use an immutable snapshot (``slot -> chunk``) that a writer swaps after commit.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, IndexCorruptError, ModelError
from ..lexical import Analyzer, LexicalIndex
from ..store import (
    Catalog,
    ChunkRecord,
    ChunkRow,
    FileVectors,
    MemoryVectors,
    WriteLock,
    write_vector_file,
)
from ..types import ChunkSpan, CorpusStats

__all__ = ["Corpus", "PreparedDocument", "valid_corpus_name"]

log = logging.getLogger("guaipeca")

F32 = npt.NDArray[np.float32]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def valid_corpus_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"corpus name {name!r:.70} is invalid: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    """A document ready to store: canonical text, chunks, and one vector per chunk."""

    doc_id: str
    text: str
    text_sha256: str
    metadata: Mapping[str, Any]
    source_path: str | None
    modified: float | None
    chunks: Sequence[ChunkSpan]
    embed_hashes: Sequence[str]
    vectors: F32
    source_state: tuple[str | None, int | None, int | None] = (None, None, None)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    generation: int
    slot_to_pk: npt.NDArray[np.int64]  # -1 where the slot is free


class Corpus:
    """Storage and retrieval for one named corpus."""

    def __init__(
        self,
        name: str,
        folder: Path | None,
        *,
        language: str | None,
        model: str,
        dim: int,
    ) -> None:
        self.name = valid_corpus_name(name)
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(folder / "catalog.sqlite" if folder else None)
        self._lock = WriteLock(folder / "write.lock" if folder else None)
        with self._lock:
            self.language = self._check_meta(language, model, dim)
        self.model = model
        self.dim = dim
        self.analyzer = Analyzer(self.language)
        self._vectors: FileVectors | MemoryVectors = self._open_vectors()
        self.lexical = LexicalIndex(folder / "lexical" if folder else None, self.analyzer)
        with self._lock:
            self._reconcile_lexical()
        self._snap = self._load_snapshot()
        self._snap_lock = threading.Lock()

    # -- opening -----------------------------------------------------------------------
    def _check_meta(self, language: str | None, model: str, dim: int) -> str:
        stored = {k: self.catalog.get_meta(k) for k in ("corpus", "language", "model", "dimension")}
        if stored["model"] is None:
            lang = language or "english"
            self.catalog.set_meta(
                {
                    "corpus": self.name,
                    "language": lang,
                    "model": model,
                    "dimension": str(dim),
                    "vectors_file": "vectors.f32",
                }
            )
            return lang
        if stored["model"] != model or stored["dimension"] != str(dim):
            raise ModelError(
                f"corpus {self.name!r} was indexed with model {stored['model']} "
                f"(dimension {stored['dimension']}), not {model} (dimension {dim}); "
                "re-index it with 'guaipeca index --force'"
            )
        lang = stored["language"] or "english"
        if language is not None and language != lang:
            raise ConfigError(
                f"corpus {self.name!r} was indexed in language {lang!r}, not {language!r}; "
                "re-index it with 'guaipeca index --force' to change its language"
            )
        return lang

    def _open_vectors(self) -> FileVectors | MemoryVectors:
        if self.folder is None:
            return MemoryVectors(self.dim)
        current = self.catalog.get_meta("vectors_file") or "vectors.f32"
        # A compaction that crashed before its catalog commit leaves a file nobody names.
        for stray in self.folder.glob("vectors*.f32*"):
            if stray.name != current:
                stray.unlink(missing_ok=True)
        _, chunks, _ = self.catalog.counts()
        path = self.folder / current
        if not path.exists() and chunks:
            raise IndexCorruptError(
                f"vector file {path} is missing for corpus {self.name!r}; "
                "re-index it with 'guaipeca index --force'"
            )
        return FileVectors(path, self.dim, create=True)

    def _state_path(self) -> Path | None:
        return self.folder / "lexical.state" if self.folder else None

    def _write_state(self, generation: int, clean: bool) -> None:
        path = self._state_path()
        if path is None:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"generation": generation, "clean": clean}))
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def _reconcile_lexical(self) -> None:
        path = self._state_path()
        if path is None:
            return
        generation = self.catalog.generation()
        try:
            state = json.loads(path.read_text())
            ok = state.get("clean") is True and state.get("generation") == generation
        except (OSError, ValueError):
            ok = False
        if not ok:
            if path.exists() or self.catalog.counts()[1]:
                log.warning(
                    "corpus %s: lexical index does not match the catalog; rebuilding it", self.name
                )
            self._rebuild_lexical(generation)

    def _rebuild_lexical(self, generation: int) -> None:
        self._write_state(generation, clean=False)
        self.lexical.clear()
        for batch in self.catalog.iter_chunk_texts():
            self.lexical.add(batch)
        self.lexical.commit()
        self._release_lexical()
        self._write_state(generation, clean=True)

    def _release_lexical(self) -> None:
        # tantivy's writer holds a folder lock for as long as it lives: drop it after every
        # write so another process can take its turn under our file lock. Waiting for its
        # merges also makes the segment layout (and so BM25 statistics, which count deleted
        # documents until a merge) depend only on the writes, not on thread timing — in
        # memory as on disk, which keeps their rankings identical.
        self.lexical.release_writer()

    def _load_snapshot(self) -> _Snapshot:
        generation = self.catalog.generation()
        slot_to_pk, high_water = self.catalog.slot_map()
        if high_water > len(self._vectors.rows()):
            raise IndexCorruptError(
                f"vector file of corpus {self.name!r} is shorter than the catalog needs; "
                "re-index it with 'guaipeca index --force'"
            )
        return _Snapshot(generation, slot_to_pk)

    def _fresh(self) -> _Snapshot:
        """The current snapshot, reloaded if another process committed since we last looked."""
        snap = self._snap
        if self.folder is None or self.catalog.generation() == snap.generation:
            return snap
        with self._snap_lock:
            if self.catalog.generation() != self._snap.generation:
                name = self.catalog.get_meta("vectors_file") or "vectors.f32"
                assert isinstance(self._vectors, FileVectors)
                self._vectors = FileVectors(self.folder / name, self.dim)
                self.lexical.reload()
                self._snap = self._load_snapshot()
            return self._snap

    # -- writes ------------------------------------------------------------------------
    def known_vectors(self, hashes: Iterable[str]) -> dict[str, F32]:
        """Vectors already stored for these embedding-input hashes (to skip re-embedding)."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        self._fresh()
        found = self.catalog.slots_for_hashes(wanted)
        if not found:
            return {}
        rows = self._vectors.rows()
        return {h: np.array(rows[s], dtype=np.float32) for h, s in found.items()}

    def stored_signature(self, doc_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        """``(text_sha256, metadata, source_path)`` of a stored document, or None."""
        return self.catalog.signature(doc_id)

    def write(self, docs: Sequence[PreparedDocument]) -> None:
        """Insert or replace documents in one atomic write."""
        if not docs:
            return
        with self._lock:
            self._fresh()
            lexical_touched = False
            try:
                with self.catalog.write() as txn:
                    self._write_state(txn.generation - 1, clean=False)
                    deletes: list[int] = []
                    adds: list[tuple[int, str]] = []
                    vec_slots: list[int] = []
                    vec_rows: list[F32] = []
                    for doc in docs:
                        slots = self._place(txn, doc, deletes, vec_slots, vec_rows)
                        pks = txn.insert_document(
                            doc_id=doc.doc_id,
                            text=doc.text,
                            text_sha256=doc.text_sha256,
                            metadata=doc.metadata,
                            source_path=doc.source_path,
                            modified=doc.modified,
                            chunks=[
                                _record(c, h)
                                for c, h in zip(doc.chunks, doc.embed_hashes, strict=True)
                            ],
                            slots=slots,
                            source_state=doc.source_state,
                        )
                        adds.extend(zip(pks, (c.text for c in doc.chunks), strict=True))
                    if vec_slots:
                        self._vectors.write(
                            np.asarray(vec_slots, dtype=np.int64), np.vstack(vec_rows)
                        )
                        self._vectors.flush()
                    lexical_touched = True
                    self.lexical.delete(deletes)
                    self.lexical.add(adds)
                    self.lexical.commit()
                    generation = txn.generation
                    freed, added, high_water = (
                        list(txn.freed_slots),
                        list(txn.added),
                        txn.high_water,
                    )
            except BaseException:
                self._recover_lexical(lexical_touched)
                raise
            finally:
                self._release_lexical()
            self._write_state(generation, clean=True)
            self._publish(generation, freed, added, high_water)

    def _place(
        self,
        txn: Any,
        doc: PreparedDocument,
        deletes: list[int],
        vec_slots: list[int],
        vec_rows: list[F32],
    ) -> list[int]:
        """Choose a slot per chunk: keep the old slot when the same text was embedded before."""
        keep: dict[int, int] = {}  # chunk index -> reused slot
        old = txn.find_document(doc.doc_id)
        if old is not None:
            reusable = txn.reusable_vectors(old[0])
            for i, h in enumerate(doc.embed_hashes):
                slot = reusable.pop(h, None)
                if slot is not None:
                    keep[i] = slot
            deletes.extend(txn.delete_document(old[0], keep_slots=keep.values()))
        fresh = iter(txn.allocate_slots(len(doc.chunks) - len(keep)))
        slots: list[int] = []
        for i in range(len(doc.chunks)):
            if i in keep:
                slots.append(keep[i])
            else:
                slot = next(fresh)
                slots.append(slot)
                vec_slots.append(slot)
                vec_rows.append(doc.vectors[i : i + 1])
        return slots

    def _recover_lexical(self, touched: bool) -> None:
        """After a failed write: the catalog rolled back, so the lexical index must too."""
        if not touched:
            self.lexical.rollback()
            self._write_state(self.catalog.generation(), clean=True)
            return
        try:
            self._rebuild_lexical(self.catalog.generation())
        except Exception:  # pragma: no cover - the marker stays dirty; next open rebuilds
            log.exception("corpus %s: lexical rebuild after a failed write failed", self.name)

    def _publish(
        self, generation: int, freed: list[int], added: list[tuple[int, int]], high_water: int
    ) -> None:
        old = self._snap.slot_to_pk
        new = np.full(high_water, -1, dtype=np.int64)
        new[: len(old)] = old
        if freed:
            new[np.asarray(freed, dtype=np.int64)] = -1
        if added:
            arr = np.asarray(added, dtype=np.int64)
            new[arr[:, 0]] = arr[:, 1]
        with self._snap_lock:
            self._snap = _Snapshot(generation, new)

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents (their slots become free for the next write). Returns how many."""
        with self._lock:
            self._fresh()
            touched = False
            try:
                with self.catalog.write() as txn:
                    self._write_state(txn.generation - 1, clean=False)
                    removed: list[int] = []
                    count = 0
                    for doc_id in doc_ids:
                        old = txn.find_document(doc_id)
                        if old is not None:
                            removed.extend(txn.delete_document(old[0]))
                            count += 1
                    touched = True
                    self.lexical.delete(removed)
                    self.lexical.commit()
                    generation, freed, hw = txn.generation, list(txn.freed_slots), txn.high_water
            except BaseException:
                self._recover_lexical(touched)
                raise
            finally:
                self._release_lexical()
            self._write_state(generation, clean=True)
            self._publish(generation, freed, [], hw)
            return count

    def set_source_state(
        self, doc_id: str, state: tuple[str | None, int | None, int | None], modified: float | None
    ) -> bool:
        """Record a source file's new hash/size/mtime when its content did not change."""
        with self._lock, self.catalog.write(derived=False) as txn:
            return txn.set_source_state(doc_id, state, modified)

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        """Replace a document's metadata (no re-embedding, no lexical change)."""
        with self._lock, self.catalog.write(derived=False) as txn:
            return txn.update_metadata(doc_id, metadata)

    def compact(self) -> None:
        """Renumber slots densely, drop free space, rebuild BM25 statistics, VACUUM."""
        with self._lock:
            self._fresh()
            order = self.catalog.all_slots_in_order()
            rows = self._vectors.rows()
            slots = np.asarray([s for _, s in order], dtype=np.int64)
            packed = (
                np.array(rows[slots], dtype=np.float32)
                if len(slots)
                else np.zeros((0, self.dim), np.float32)
            )
            moves = [(pk, i) for i, (pk, _) in enumerate(order)]
            with self.catalog.write() as txn:
                name = f"vectors.{txn.generation}.f32"
                if self.folder is not None:
                    write_vector_file(self.folder / name, packed)
                txn.reassign_slots(moves, high_water=len(order))
                txn.set_meta("vectors_file", name)
                generation = txn.generation
            old_vectors = self._vectors
            if self.folder is not None:
                self._vectors = FileVectors(self.folder / name, self.dim)
                assert isinstance(old_vectors, FileVectors)
                old_vectors.close()
                if old_vectors.path.name != name:
                    old_vectors.path.unlink(missing_ok=True)
            else:
                fresh = MemoryVectors(self.dim)
                fresh.write(np.arange(len(packed), dtype=np.int64), packed)
                self._vectors = fresh
            self._rebuild_lexical(generation)
            self.catalog.vacuum()
            with self._snap_lock:
                self._snap = self._load_snapshot()

    # -- reads -------------------------------------------------------------------------
    def dense(
        self, query: F32, n: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float]]:
        """Exact cosine top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk."""
        if n <= 0:
            return []
        snap = self._fresh()
        rows = self._vectors.rows()
        high_water = len(snap.slot_to_pk)
        if where:
            pks, slots = self.catalog.filtered_slots(where, corpus=self.name)
            if len(pks) == 0:
                return []
            scores = rows[slots] @ query
        else:
            live = snap.slot_to_pk >= 0
            if not live.any():
                return []
            scores = rows[:high_water] @ query
            pks = snap.slot_to_pk
            scores = np.where(live, scores, -np.inf)
        return _top(pks, np.asarray(scores, dtype=np.float64), n)

    def keyword(
        self, query: str, n: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float]]:
        """BM25 top-``n``: ``(chunk_pk, score)`` best first, ties by chunk_pk."""
        if n <= 0:
            return []
        self._fresh()
        allowed: list[int] | None = None
        if where:
            pks, _ = self.catalog.filtered_slots(where, corpus=self.name)
            if len(pks) == 0:
                return []
            allowed = pks.tolist()
        return self.lexical.search(query, n, allowed=allowed)

    def rows(self, chunk_pks: Sequence[int]) -> dict[int, ChunkRow]:
        return self.catalog.chunks(chunk_pks)

    def stats(self) -> CorpusStats:
        docs, chunks, free = self.catalog.counts()
        return CorpusStats(
            name=self.name,
            language=self.language,
            documents=docs,
            chunks=chunks,
            deleted_slots=free,
            vector_bytes=self._vectors.size_bytes(),
            catalog_bytes=self.catalog.size_bytes(),
            lexical_bytes=self.lexical.size_bytes(),
        )

    def close(self) -> None:
        self.lexical.close()
        self._vectors.close()
        self.catalog.close()


def _record(chunk: ChunkSpan, embed_sha256: str) -> ChunkRecord:
    return ChunkRecord(
        position=chunk.position,
        start=chunk.start,
        end=chunk.end,
        heading_path=chunk.heading_path,
        section_id=chunk.section_id,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        embed_sha256=embed_sha256,
    )


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
