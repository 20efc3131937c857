"""The original Guaipeca's data folder, brought into an index: what ``guaipeca
import-faiss`` does.

The original keeps one folder per corpus (``<data>/corpora/<name>/``) holding
``faiss_index.fai`` (the vectors), ``faiss_index.fai.bak`` (the copy made before each write),
``metadata.json`` (every chunk: id, text, heading, source path, character offset, heading
path, section id, metadata) and ``file_hashes.json``. The text and metadata live in
``metadata.json``, so no FAISS library is needed to read them: the index file is only checked
(its header says the vector size and count). Its vectors are not reused: the model that
made them cannot be verified, so the documents are embedded again with the current model.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from guaipeca.errors import InvalidArgumentError
from guaipeca.index import Index
from guaipeca.types import NewDocument

__all__ = [
    "INDEX_FILE",
    "METADATA_FILE",
    "ImportReport",
    "OriginalCorpus",
    "find_original_corpora",
    "import_corpus",
    "read_corpus",
]

log = logging.getLogger("guaipeca")

INDEX_FILE: Final = "faiss_index.fai"
BACKUP_FILE: Final = "faiss_index.fai.bak"
METADATA_FILE: Final = "metadata.json"
#: A FAISS index file starts with a four-letter type code, then the vector size (int32)
#: and count (int64), little-endian (faiss/impl/index_write.cpp, write_index_header).
_HEADER: Final = struct.Struct("<4siq")
#: Most characters one chunk's start is searched for in the text before it (the original's
#: overlap is 200 by default, at most its chunk size).
_MAX_OVERLAP: Final = 20_000


@dataclass(frozen=True)
class OriginalCorpus:
    """One corpus folder of the original: its chunks and what its FAISS file says."""

    name: str
    folder: Path
    chunks: list[dict[str, Any]]
    index_file: Path | None  # the readable one: the index, else its backup
    dimension: int | None
    vectors: int | None
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportReport:
    corpus: str
    source: OriginalCorpus
    documents: int
    chunks: int
    embedded: int


def _is_corpus_folder(folder: Path) -> bool:
    return (folder / METADATA_FILE).is_file() and (
        (folder / INDEX_FILE).is_file() or (folder / BACKUP_FILE).is_file()
    )


def find_original_corpora(folder: Path) -> list[Path]:
    """The original's corpus folders in ``folder``: itself, its ``corpora/`` folder's, or
    those of ``data/corpora/`` under it (``~/.guaipeca`` or its ``data``); [] if none."""
    folder = Path(folder)
    if _is_corpus_folder(folder):
        return [folder]
    for parent in (folder, folder / "corpora", folder / "data" / "corpora"):
        try:
            found = sorted(p for p in parent.iterdir() if p.is_dir() and _is_corpus_folder(p))
        except OSError:
            continue
        if found:
            return found
    return []


def _header(path: Path) -> tuple[int, int] | str:
    """``(dimension, vectors)`` of a FAISS index file, or why it cannot be one."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEADER.size)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if len(head) < _HEADER.size:
        return "is too short to be a FAISS index"
    code, dimension, vectors = _HEADER.unpack(head)
    if not (code[:1] == b"I" and code.isalnum() and 0 < dimension <= 65_536 and vectors >= 0):
        return "is not a FAISS index"
    return dimension, vectors


def read_corpus(folder: Path) -> OriginalCorpus:
    """Read one of the original's corpus folders.

    The index file is checked first, then its backup, as the original loaded them; if
    neither is sound the text is still there (``problems`` says so).

    Raises:
        InvalidArgumentError: ``metadata.json`` is missing, not JSON or not a list of chunks.
    """
    problems: list[str] = []
    found: tuple[Path, int, int] | None = None
    for path in (folder / INDEX_FILE, folder / BACKUP_FILE):
        if not path.is_file():
            continue
        header = _header(path)
        if isinstance(header, str):
            problems.append(f"{path.name} {header}")
            continue
        found = (path, *header)
        break
    meta = folder / METADATA_FILE
    try:
        chunks = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot read {meta}: {exc}") from None
    if not isinstance(chunks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("text"), str) for c in chunks
    ):
        raise InvalidArgumentError(f"{meta} is not the original's list of chunks")
    if found is not None and found[2] != len(chunks):
        problems.append(f"{found[0].name} holds {found[2]} vectors for {len(chunks)} chunks")
    return OriginalCorpus(
        name=folder.name,
        folder=folder,
        chunks=chunks,
        index_file=found[0] if found else None,
        dimension=found[1] if found else None,
        vectors=found[2] if found else None,
        problems=problems,
    )


def _stitch(texts: list[str]) -> str:
    """Chunk texts in order, each one's overlap with the text before it written once."""
    out = ""
    for text in texts:
        longest = min(len(out), len(text), _MAX_OVERLAP)
        shared = next((n for n in range(longest, 0, -1) if out.endswith(text[:n])), 0)
        if shared >= 20 or (shared and shared == len(text)):
            out += text[shared:]
        else:
            out += ("\n\n" if out else "") + text
    return out


def _doc_id(source: str, root: Path | None, common: str) -> str:
    if root is not None and Path(source).is_relative_to(root):
        return Path(source).relative_to(root).as_posix()
    if common and source.startswith(common):
        return source[len(common) :].lstrip("/") or Path(source).name
    return Path(source).name or source


def documents_of(corpus: OriginalCorpus, root: Path | None = None) -> list[NewDocument]:
    """One document per source path, its chunks stitched in order. Ids are paths relative
    to ``root`` (the corpus's configured folder) when the source is under it, else to the
    folder all the sources share."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    if not corpus.chunks:
        return []
    for chunk in corpus.chunks:
        by_source.setdefault(str(chunk.get("source_path") or corpus.name), []).append(chunk)
    sources = sorted(by_source)
    common = os.path.commonpath(sources) if len(sources) > 1 else os.path.dirname(sources[0])
    docs = []
    for source in sources:
        chunks = sorted(by_source[source], key=lambda c: int(c.get("char_offset") or 0))
        metadata: dict[str, Any] = {}
        for chunk in chunks:
            extra = chunk.get("metadata")
            if isinstance(extra, Mapping):
                for key, value in extra.items():
                    if isinstance(value, str | int | float | bool):
                        metadata.setdefault(str(key), value)
        metadata.update(imported_from="guaipeca-faiss", original_corpus=corpus.name)
        docs.append(
            NewDocument(
                doc_id=_doc_id(source, root, common),
                text=_stitch([c["text"] for c in chunks]),
                metadata=metadata,
                source_path=source if os.path.isfile(source) else None,
            )
        )
    return docs


def import_corpus(
    index: Index,
    corpus: OriginalCorpus,
    *,
    name: str | None = None,
    root: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Add an original corpus's documents to ``index`` (corpus ``name``, default the
    original's), then embed them with the index's model (``progress(chunks done, still
    pending)`` as :meth:`Index.embed_pending` reports it)."""
    target = name or corpus.name
    docs = documents_of(corpus, root)
    index.add_documents(docs, corpus=target, wait=False)
    embedded = index.embed_pending(target, progress=progress)
    return ImportReport(target, corpus, len(docs), len(corpus.chunks), embedded)
