"""The integrity check behind ``Index.verify()`` and ``guaipeca check``.

It reads everything and trusts nothing: SQLite's own integrity check, then the catalog's
invariants (chunk counts, spans inside their document, positions in order, each vector slot
either used once or free), the vector file (one unit vector per live chunk), and the lexical
index (one entry per chunk, each one findable by its own words, in step with the catalog).
A problem is one line that says what disagrees with what.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from guaipeca.errors import GuaipecaError
from guaipeca.store.embedded.catalog import Catalog
from guaipeca.store.embedded.corpus import BACKUP_NAME, Corpus, count_damaged
from guaipeca.store.embedded.vectors import read_backup

__all__ = ["CheckReport", "CorpusCheck", "verify_corpus"]

F32 = npt.NDArray[np.float32]
Reembed = Callable[[Catalog, Sequence[str]], dict[str, F32]]
_LEXICAL_BATCH = 400
_TOKENS_PER_CHUNK = 3
_MAX_LISTED = 5


@dataclass(frozen=True, slots=True)
class CorpusCheck:
    """What the check found in one corpus; ``ok`` when ``problems`` is empty."""

    name: str
    documents: int
    chunks: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every corpus checked, plus corpora that could not even be opened."""

    corpora: tuple[CorpusCheck, ...]
    broken: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.broken and all(c.ok for c in self.corpora)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "corpora": [
                {
                    "name": c.name,
                    "ok": c.ok,
                    "documents": c.documents,
                    "chunks": c.chunks,
                    "problems": list(c.problems),
                }
                for c in self.corpora
            ],
            "broken": self.broken,
        }


def verify_corpus(corpus: Corpus, reembed: Reembed | None = None) -> CorpusCheck:
    """Check one corpus: catalog ↔ vectors ↔ lexical index agree and every chunk resolves.

    ``reembed`` (the Index's) tells a zeroed vector from one the model really made zero.
    """
    problems: list[str] = []
    try:
        documents, chunks, _ = corpus.catalog.counts()
    except GuaipecaError as exc:
        return CorpusCheck(corpus.name, 0, 0, (str(exc),))
    for check in (_sqlite, _catalog, _texts, _slots, _vectors, _backup, _lexical):
        try:
            problems.extend(check(corpus, reembed))
        except GuaipecaError as exc:
            problems.append(str(exc))
    return CorpusCheck(corpus.name, documents, chunks, tuple(problems))


def _listed(items: Sequence[object]) -> str:
    shown = ", ".join(str(i) for i in items[:_MAX_LISTED])
    return shown + (", ..." if len(items) > _MAX_LISTED else "")


def _sqlite(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    out: list[str] = []
    result = [str(r[0]) for r in corpus.catalog.read_sql("PRAGMA integrity_check")]
    if result != ["ok"]:
        out.append(f"catalog: SQLite integrity check failed: {_listed(result)}")
    if corpus.catalog.read_sql("PRAGMA foreign_key_check"):
        out.append("catalog: chunks refer to documents that do not exist")
    return out


def _catalog(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    db = corpus.catalog
    out: list[str] = []
    wrong_count = db.read_sql(
        "SELECT d.doc_id FROM documents d LEFT JOIN chunks c ON c.doc_pk = d.doc_pk "
        "GROUP BY d.doc_pk HAVING d.chunk_count != count(c.chunk_pk)"
    )
    if wrong_count:
        out.append(
            f"catalog: {len(wrong_count)} documents do not have the chunks they list "
            f"({_listed([r[0] for r in wrong_count])})"
        )
    outside = db.read_sql(
        "SELECT c.chunk_pk FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk WHERE c.start < 0 "
        'OR c."end" <= c.start OR c."end" > length(d.text)'
    )
    if outside:
        out.append(
            f"catalog: {len(outside)} chunks do not resolve to a span of their document "
            f"(chunks {_listed([r[0] for r in outside])})"
        )
    disordered: list[int] = []
    last_doc, expected, last_end = None, 0, 0
    for doc_pk, position, start, end in db.read_sql(
        'SELECT doc_pk, position, start, "end" FROM chunks ORDER BY doc_pk, position'
    ):
        if doc_pk != last_doc:
            last_doc, expected, last_end = doc_pk, 0, 0
        if position != expected or start < last_end:
            disordered.append(int(doc_pk))
        expected, last_end = position + 1, end
    if disordered:
        docs = sorted(set(disordered))
        out.append(f"catalog: {len(docs)} documents have chunks out of order or overlapping")
    return out


def _texts(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    """Each document's text still hashes to the SHA-256 stored with it (SQLite has no page
    checksums: damaged text would otherwise go unnoticed)."""
    changed: list[str] = []
    last = -1
    while True:
        rows = corpus.catalog.read_sql(
            "SELECT doc_pk, doc_id, text, text_sha256 FROM documents WHERE doc_pk > ? "
            "ORDER BY doc_pk LIMIT 200",
            (last,),
        )
        if not rows:
            break
        for _, doc_id, text, sha in rows:
            if hashlib.sha256(str(text).encode("utf-8", "surrogatepass")).hexdigest() != sha:
                changed.append(str(doc_id))
        last = int(rows[-1][0])
    if changed:
        return [
            f"catalog: the text of {len(changed)} documents no longer matches its checksum "
            f"({_listed(changed)})"
        ]
    return []


def _backup(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    if corpus.folder is None or not (corpus.folder / BACKUP_NAME).exists():
        return []
    try:
        read_backup(corpus.folder / BACKUP_NAME, corpus.dim)
    except GuaipecaError as exc:
        return [f"vectors: {exc}; 'guaipeca compact' writes a fresh one"]
    return []


def _slots(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    out: list[str] = []
    slot_to_pk, high_water = corpus.catalog.slot_map()
    # Reserved slots of chunks waiting for their vectors are used too (no vector yet).
    used = set(np.flatnonzero(slot_to_pk >= 0).tolist()) | set(corpus.catalog.pending_slots())
    free = {int(r[0]) for r in corpus.catalog.read_sql("SELECT slot FROM free_slots")}
    both = used & free
    if both:
        out.append(f"catalog: {len(both)} vector slots are both used and free")
    beyond = {s for s in free if s >= high_water or s < 0}
    if beyond:
        out.append(f"catalog: {len(beyond)} free slots lie beyond the high-water mark")
    lost = high_water - len(used | (free - beyond))
    if lost:
        out.append(f"catalog: {lost} vector slots are neither used nor free")
    return out


def _vectors(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    # Slots alone (the hashes, a slow query at 1M chunks, only for zero rows), as at open.
    slot_to_pk, high_water = corpus.catalog.slot_map()
    rows = corpus.vector_rows()
    if high_water > len(rows):
        return [f"vectors: the file holds {len(rows)} rows, the catalog needs {high_water}"]
    slots = np.flatnonzero(slot_to_pk >= 0).astype(np.int64)
    count = count_damaged(rows, slots, corpus.catalog, reembed, strict=True)
    if count:
        return [f"vectors: {count} of {len(slots)} chunk vectors are damaged (not unit vectors)"]
    return []


def _lexical(corpus: Corpus, reembed: Reembed | None) -> list[str]:
    out: list[str] = []
    catalog = corpus.catalog
    generation = catalog.generation()
    if corpus.folder is not None:
        try:
            state = json.loads((corpus.folder / "lexical.state").read_text())
        except (OSError, ValueError):
            state = {}
        if not (isinstance(state, dict) and state.get("clean") is True):
            out.append("lexical: the index is marked as being written (a write was interrupted)")
        # "same_as": the embedding phase moved the catalog on without touching the index, or
        # its commit failed (the catalog stayed at the older generation).
        elif generation not in (state.get("generation"), state.get("same_as")):
            out.append(
                f"lexical: the index matches catalog generation {state.get('generation')}, "
                f"the catalog is at {generation}"
            )
    _, chunks, _ = catalog.counts()
    held = corpus.lexical.count()
    if held != chunks:
        out.append(f"lexical: the index holds {held} chunks, the catalog {chunks}")
    missing: list[int] = []
    analyse = corpus.analyzer.tokens
    for batch in catalog.iter_chunk_texts(batch=_LEXICAL_BATCH):
        tokens: list[str] = []
        expected: set[int] = set()
        for pk, text in batch:
            words = list(dict.fromkeys(analyse(text)))[:_TOKENS_PER_CHUNK]
            if words:
                tokens.extend(words)
                expected.add(pk)
        if not expected:
            continue
        found = {
            pk for pk, _ in corpus.lexical.search_tokens(tokens, len(expected), sorted(expected))
        }
        missing.extend(sorted(expected - found))
    if missing:
        out.append(
            f"lexical: {len(missing)} chunks cannot be found by their own words "
            f"(chunks {_listed(missing)})"
        )
    return out
