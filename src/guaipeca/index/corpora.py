"""The open corpora of an :class:`~guaipeca.index.Index`, by name: how they are found (the
index folder, or a backend server's list), opened, looked up and dropped, with their weights,
the ones that cannot be opened, and why a backend server cannot be reached."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from guaipeca.config import did_you_mean
from guaipeca.errors import (
    BackendUnavailableError,
    ConfigError,
    GuaipecaError,
    IndexCorruptError,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
    StorageError,
)
from guaipeca.index.checks import location_problem
from guaipeca.index.models import Models
from guaipeca.store.contract import Backend, CorpusStore, valid_corpus_name
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.store.embedded.lock import claim_writer

__all__ = ["Corpora", "hold_corpora"]

_REDISCOVER_SECONDS = 10.0


class Corpora:
    """The corpora under ``path`` (embedded; None: in memory) or in ``backend``.

    Raises:
        StorageError: ``path`` cannot hold an index.
    """

    def __init__(self, path: Path | None, backend: Backend | None, models: Models) -> None:
        self._path = path
        self._backend = backend
        self._models = models
        self.stores: dict[str, CorpusStore] = {}
        #: Each corpus's weight in a merge across corpora.
        self.weights: dict[str, float] = {}
        # Corpora that exist on disk but cannot be used as they are (another model, a
        # damaged file): the error is raised when one is used, and drop clears it.
        self.broken: dict[str, GuaipecaError] = {}
        self.lock = threading.Lock()
        # While a backend server is down: why, and when discovery was last tried.
        self._down: tuple[BackendUnavailableError, float] | None = None
        if backend is not None:
            self._discover()
        elif path is not None:
            self._open_folder(path)

    def _open_folder(self, path: Path) -> None:
        try:
            (path / "corpora").mkdir(parents=True, exist_ok=True)
            folders = sorted((path / "corpora").iterdir())
            # SQLite in WAL mode writes beside its file even to read: a folder that
            # cannot be written cannot be used at all.
            if not os.access(path / "corpora", os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable")
        except OSError as exc:
            raise StorageError(location_problem(path, exc)) from None
        for folder in folders:
            if folder.name.startswith("."):
                continue
            # lexical.state too: a corpus whose catalog was lost must show as broken.
            if (folder / "catalog.sqlite").exists() or (folder / "lexical.state").exists():
                try:
                    self.open(folder.name, None)
                except (ModelError, IndexCorruptError, ConfigError) as exc:
                    self.broken[folder.name] = exc

    def open(self, name: str, language: str | None) -> CorpusStore:
        """Open (or create) corpus ``name`` on its model and register it."""
        model = self._models.of(name)
        store: CorpusStore
        if self._backend is not None:
            store = self._backend.open_corpus(
                name, language=language, model=model.name, dim=model.embedder.dimension
            )
        else:
            folder = self._path / "corpora" / name if self._path is not None else None
            store = Corpus(
                name,
                folder,
                language=language,
                model=model.name,
                dim=model.embedder.dimension,
                reembed=model.writer.reembed,
                identity=model.identity,
            )
        self.stores[name] = store
        self.weights.setdefault(name, 1.0)
        return store

    def create(self, name: str, language: str | None, default_language: str) -> None:
        """Open or create a corpus; a new ``language`` reopens an open one (which raises
        ConfigError naming both when its stored language differs)."""
        with self.lock:
            if name in self.broken:
                raise self.broken[name]
            if name not in self.stores:
                self.open(name, language or default_language)
            elif language is not None and language != self.stores[name].language:
                self.stores[name].close()
                del self.stores[name]
                self.open(name, language)  # raises ConfigError naming both

    def _discover(self) -> None:
        """Open the backend's corpora; when it is down, remember why (retried later)."""
        assert self._backend is not None
        try:
            for name in self._backend.corpus_names():
                if name in self.stores:
                    continue
                try:
                    self.open(name, None)
                except (ModelError, IndexCorruptError, ConfigError) as exc:
                    self.broken[name] = exc
        except BackendUnavailableError as exc:
            self._down = (exc, time.monotonic())
        else:
            self._down = None

    def backend_error(self) -> str | None:
        """Why the storage backend cannot be reached, or None (always None when embedded)."""
        if self._backend is None:
            return None
        try:
            self._backend.check()
        except BackendUnavailableError as exc:
            return str(exc)
        if self._down is not None:
            self._discover()
        return None

    def names(self) -> list[str]:
        """Names of the usable corpora."""
        down = self._down
        if down is not None and time.monotonic() - down[1] > _REDISCOVER_SECONDS:
            self._discover()  # the server was down when the index was opened
        return sorted(self.stores)

    def get(self, name: str) -> CorpusStore:
        """An open corpus.

        Raises:
            NotFoundError: no such corpus (or the error that keeps it from opening).
        """
        try:
            store = self.stores[name]
        except KeyError:
            if name in self.broken:
                raise self.broken[name] from None
            if self._down is not None:  # its corpora could not be listed
                raise self._down[0] from None
            known = ", ".join(sorted(self.stores)) or "none yet"
            hint = did_you_mean(name, self.stores)
            raise NotFoundError(
                f"no corpus named {name!r:.70}{'; ' + hint if hint else ''} (corpora: {known})"
            ) from None
        if isinstance(store, Corpus) and store.catalog.replaced():
            store = self._reopen(name, store)
        return store

    def _reopen(self, name: str, old: Corpus) -> CorpusStore:
        """The corpus another process dropped and made again (``index --force``) opened
        anew: reading on from the old files mixed the old catalog (open connections) with
        the new (connections opened since). Requests still on the old one get one line."""
        with self.lock:
            current = self.stores.get(name)
            if current is not old:  # another thread reopened it first
                return current if current is not None else self.get(name)
            old.close()
            return self.open(name, None)

    def embedded(self, name: str) -> Corpus:
        """A corpus of the embedded backend (for checks that read its files)."""
        store = self.get(name)
        if not isinstance(store, Corpus):
            raise InvalidArgumentError(
                f"corpus {name!r} is stored in {self._backend.name if self._backend else '?'}; "
                "this check reads the embedded backend's files"
            )
        return store

    def drop(self, name: str) -> None:
        """Delete a corpus and everything in it (even one that cannot be opened)."""
        with self.lock:
            corpus = self.stores.pop(name, None)
            self.broken.pop(name, None)
            if corpus is not None:
                corpus.close()
            if self._backend is not None:
                self._backend.drop_corpus(name)
            elif self._path is not None:
                folder = self._path / "corpora" / name
                if folder.exists():
                    # Rename first: a crash mid-delete must not leave a half corpus behind.
                    doomed = folder.with_name(f".{name}.dropped")
                    shutil.rmtree(doomed, ignore_errors=True)
                    folder.rename(doomed)
                    shutil.rmtree(doomed, ignore_errors=True)

    def holding(self, doc_id: str, corpus: str | None) -> CorpusStore:
        """The corpus that holds document ``doc_id`` (in ``corpus``, or in any).

        Raises:
            NotFoundError: no such document.
            InvalidArgumentError: it is in several corpora and ``corpus`` is None.
        """
        if corpus is not None:
            store = self.get(corpus)
            if store.stored_signature(doc_id) is None:
                raise NotFoundError(f"no document {doc_id!r:.80} in corpus {corpus!r}")
            return store
        found = [c for c in self.stores.values() if c.stored_signature(doc_id) is not None]
        if not found:
            raise NotFoundError(f"no document {doc_id!r:.80}")
        if len(found) > 1:
            names = ", ".join(sorted(c.name for c in found))
            raise InvalidArgumentError(
                f"document {doc_id!r:.80} exists in several corpora ({names}); name the corpus"
            )
        return found[0]

    def close(self) -> None:
        """Close every open corpus (the backend stays open)."""
        for corpus in self.stores.values():
            corpus.close()
        self.stores.clear()


@contextlib.contextmanager
def hold_corpora(
    path: Path | None,
    corpora: Iterable[str],
    *,
    wait: float | None = 0.0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the writer locks of these corpora of the index at ``path`` (one file in each
    corpus folder, taken in name order so two holders of several never deadlock); nothing
    to take without a path. See :meth:`guaipeca.index.Index.writing`.

    Raises:
        IndexLockedError: another process writes one of them.
    """
    names = sorted({valid_corpus_name(n) for n in corpora})
    if path is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(
                claim_writer(
                    path / "corpora" / name / "writer.lock",
                    what=f"corpus {name!r}",
                    wait=wait,
                    on_wait=on_wait,
                )
            )
        yield
