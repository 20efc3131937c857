"""Keep a corpus in step with a folder of text files: add new and changed files, drop
removed ones. (Binary formats arrive through converters; this handles text.)"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidArgumentError
from .index import Index
from .types import DocumentInfo, NewDocument

__all__ = ["TEXT_EXTENSIONS", "SyncReport", "sync_folder"]

TEXT_EXTENSIONS: tuple[str, ...] = (".md", ".markdown", ".txt")
_BATCH = 64


@dataclass
class SyncReport:
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)


def _walk(folder: Path, extensions: Sequence[str]) -> Iterator[Path]:
    # followlinks=False: a symlink loop cannot trap the walk.
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and Path(name).suffix.lower() in extensions:
                yield Path(root) / name


def sync_folder(
    index: Index,
    folder: str | os.PathLike[str],
    *,
    corpus: str = "default",
    extensions: Sequence[str] = TEXT_EXTENSIONS,
    progress: Callable[[int, int], None] | None = None,
) -> SyncReport:
    """Index every text file under ``folder`` into ``corpus``; ids are relative paths.

    Raises:
        InvalidArgumentError: ``folder`` is not a readable directory.
    """
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise InvalidArgumentError(f"{folder} is not a folder")
    report = SyncReport()
    paths = list(_walk(root, tuple(e.lower() for e in extensions)))
    seen: set[str] = set()
    batch: list[NewDocument] = []

    def flush() -> None:
        if batch:
            result = index.add_documents(batch, corpus=corpus)
            report.added += result.added
            report.changed += result.replaced + result.metadata_updated
            report.unchanged += result.unchanged
            report.chunks_embedded += result.chunks_embedded
            batch.clear()

    for done, path in enumerate(paths, start=1):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
            if "\x00" in text:
                raise ValueError("contains NUL bytes; not a text file")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            report.failed.append((str(path), _reason(exc)))
        else:
            seen.add(rel)
            batch.append(
                NewDocument(rel, text, source_path=str(path), modified=path.stat().st_mtime)
            )
            if len(batch) >= _BATCH:
                flush()
        if progress:
            progress(done, len(paths))
    flush()
    index.create_corpus(corpus)
    prefix = str(root) + os.sep
    stale = [
        d.doc_id
        for d in _all_documents(index, corpus)
        if d.source_path and d.source_path.startswith(prefix) and d.doc_id not in seen
    ]
    for doc_id in stale:
        report.removed += int(index.delete_document(doc_id, corpus=corpus))
    return report


def _all_documents(index: Index, corpus: str) -> Iterator[DocumentInfo]:
    offset = 0
    while True:
        page = index.list_documents(corpus=corpus, limit=1000, offset=offset)
        if not page:
            return
        yield from page
        offset += len(page)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return str(exc) or type(exc).__name__
