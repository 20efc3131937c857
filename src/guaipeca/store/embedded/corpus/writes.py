"""The write path: documents inserted or replaced in one atomic write (vectors, lexical index,
catalog commit last), deletes, the embedding phase's fills, and the vector backup."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.errors import disk_full
from guaipeca.store.contract import PreparedDocument
from guaipeca.store.embedded.corpus.recovery import BACKUP_NAME
from guaipeca.store.embedded.corpus.snapshot import Snapshots
from guaipeca.store.embedded.vectors import backup_rows, write_backup

F32 = npt.NDArray[np.float32]
_BACKUP_MIN_PENDING = 64
#: Once no chunk waits for its vector, the backup lacks at most 1/_SETTLED_SHARE of the
#: vectors it holds (none at all below that many): docs/reliability.md "Vector backup".
_SETTLED_SHARE = 64

log = logging.getLogger("guaipeca")


class Writes(Snapshots):
    """Every change to the corpus's documents and vectors."""

    # -- the vector backup ---------------------------------------------------------------
    def _maybe_backup(self, pending: int) -> None:
        """Refresh the backup once the vectors written since it reach a quarter of it (so
        copying costs O(1) per vector written), and, when no chunk is left waiting for
        its vector (an embedding phase has ended), once they exceed 1/64 of it: a
        rebuilt corpus of 30 vectors kept an empty backup (issue 38). Under the write
        lock."""
        if self.folder is None:
            return
        held = backup_rows(self.folder / BACKUP_NAME)
        due = held is None or pending >= max(_BACKUP_MIN_PENDING, held // 4)
        if not due and held is not None and pending > held // _SETTLED_SHARE:
            due = self.catalog.pending_count() == 0
        if due:
            try:
                self.write_backup()
            except OSError as exc:
                # The write is committed; the backup (a spare copy) is refreshed by a later
                # write. Failing here would report a committed write as lost.
                full = disk_full(exc, self.folder)
                if full is None:
                    raise
                log.warning("corpus %s: vector backup not refreshed: %s", self.name, full)

    def write_backup(self) -> None:
        """Copy the live vectors to ``vectors.backup`` now (``compact`` and writes do it)."""
        if self.folder is None:
            return
        with self._lock:
            live = self.catalog.live_hashes()
            slots = np.asarray([s for s, _ in live], dtype=np.int64)
            write_backup(
                self.folder / BACKUP_NAME,
                [h for _, h in live],
                self._vectors.rows(),
                slots,
                release=self._vectors.release,
            )
            self.catalog.set_meta({"vectors_since_backup": "0"})

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
            pending = int(self.catalog.get_meta("vectors_since_backup") or 0)
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
                            chunks=doc.chunks,
                            embed_hashes=doc.embed_hashes,
                            slots=slots,
                            enrichments=doc.enrichments,
                            source_state=doc.source_state,
                            pending=doc.pending,
                        )
                        adds.extend(zip(pks, (c.text for c in doc.chunks), strict=True))
                    if vec_slots:
                        self._vectors.write(
                            np.asarray(vec_slots, dtype=np.int64), np.vstack(vec_rows)
                        )
                        self._vectors.flush()
                        reserved = sum(1 for d in docs for x in d.pending if x is not None)
                        pending += len(vec_slots) - reserved
                        txn.set_meta("vectors_since_backup", str(pending))
                    lexical_touched = True
                    if deletes:
                        # Replaced chunks are deleted in a commit of their own: tantivy (0.27)
                        # throws away a merge when a segment it merges lost all its documents
                        # in the same commit (a replaced one-chunk document), so merges never
                        # landed and segments piled up. The state marker stays dirty until
                        # both commits are done, so a crash between them means a rebuild.
                        self.lexical.delete(deletes)
                        self.lexical.commit()
                        self.lexical.release_writer()
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
            self._publish(
                generation,
                freed,
                added,
                high_water,
                signs=self._signs_after(vec_slots, vec_rows, high_water),
            )
            self._maybe_backup(pending)

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
                if doc.pending and doc.pending[i] is not None:
                    continue  # a reserved slot of its own, filled by the embedding phase
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
                if doc.pending and doc.pending[i] is not None:
                    # A zero row: the file covers the slot; no reader trusts it yet.
                    vec_rows.append(np.zeros((1, self.dim), dtype=np.float32))
                else:
                    vec_rows.append(doc.vectors[i : i + 1])
        return slots

    # -- the embedding phase (progressive indexing) ---------------------------------------
    def pending_count(self) -> int:
        """Chunks searchable by keyword that still wait for their vector."""
        return self.catalog.pending_count()

    def pending_work(self, limit: int) -> list[tuple[int, str, str]]:
        """The oldest pending chunks: ``(chunk_pk, embedding-input hash, input)``."""
        return self.catalog.pending_work(limit)

    def fill_pending(self, vectors: Mapping[int, F32]) -> int:
        """Write the vectors of pending chunks (by chunk_pk) into their reserved slots, in
        one commit; chunks deleted or replaced meanwhile are skipped. Returns how many.

        A reserved slot holds no vector the committed catalog trusts, so writing it before
        the commit is safe; the lexical index does not change, and its marker says so
        before the commit (a crash at any point needs no lexical rebuild)."""
        if not vectors:
            return 0
        with self._lock:
            self._fresh()
            backup_pending = int(self.catalog.get_meta("vectors_since_backup") or 0)
            with self.catalog.write() as txn:
                taken = txn.take_pending(list(vectors))
                slots = [slot for slot, _ in taken.values()]
                rows = [np.asarray(vectors[pk], dtype=np.float32)[None, :] for pk in taken]
                if taken:
                    self._vectors.write(np.asarray(slots, dtype=np.int64), np.vstack(rows))
                    self._vectors.flush()
                    backup_pending += len(taken)
                    txn.set_meta("vectors_since_backup", str(backup_pending))
                generation, added, high_water = txn.generation, list(txn.added), txn.high_water
                if self._lexical_clean_at(generation - 1):
                    self._write_state(generation, clean=True, same_as=generation - 1)
            self._publish(
                generation, [], added, high_water, signs=self._signs_after(slots, rows, high_water)
            )
            if taken:
                self._maybe_backup(backup_pending)
            return len(taken)

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
