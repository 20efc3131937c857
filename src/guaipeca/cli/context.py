"""What every command shares: the exit codes, the two consoles (results to stdout, logs and
progress to stderr), the ``--config`` given on the command line, the settings it loads and
the index they open.

Exit codes: 0 ok, 1 a user-facing error (bad input, bad config, nothing indexed, another
process writing the corpus, a full disk, …), 2 a usage error, 3 an internal error (a bug:
please report it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from guaipeca.config import LoadedSettings, check_corpus_paths, load_settings
from guaipeca.errors import GuaipecaError, IndexLockedError, StorageError
from guaipeca.text.terminal import visible

if TYPE_CHECKING:
    from guaipeca.config import EmbeddingSettings
    from guaipeca.embed import Embedder
    from guaipeca.index import Index

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class TerminalConsole(Console):
    """A console that prints text as it is: no rich markup (a file named ``[red]x[/red]``
    stays that), no ``:emoji:`` codes, and the characters a terminal would obey (ESC,
    newlines, bidi overrides, ...) written as escapes (text/terminal.py), because the names,
    headings, snippets and messages we print come from the documents."""

    def print(self, *objects: Any, **options: Any) -> None:
        options.update(markup=False, emoji=False, highlight=False)
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **options)

    def print_verbatim(self, text: str) -> None:
        """Print ``text`` unescaped: ``--json`` output, which json.dumps has escaped."""
        super().print(text, markup=False, emoji=False, highlight=False)


class VisibleFormatter(logging.Formatter):
    """Log lines with the message escaped like the console's text (a traceback stays as is)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return visible(super().formatMessage(record))


out = TerminalConsole(soft_wrap=True)
err = TerminalConsole(stderr=True, soft_wrap=True)
log = logging.getLogger("guaipeca")


@dataclasses.dataclass
class State:
    """What the global options set for the command that runs."""

    config: str | None = None
    #: ``--verbose``: more log lines, and every skipped file in an index summary.
    verbose: bool = False
    #: The data folder of the settings loaded, named when its disk is full.
    data_dir: Path | None = None


state = State()


def current_settings(*, check_paths: bool = False) -> LoadedSettings:
    loaded = load_settings(state.config, cwd=Path.cwd(), check_paths=False)
    state.data_dir = loaded.data_dir
    if check_paths:
        check_corpus_paths(loaded)
    return loaded


def index_path(loaded: LoadedSettings) -> Path:
    """Where the configured index lives (corpora, their catalogs and lock files)."""
    return loaded.data_dir / "index"


def open_index(
    loaded: LoadedSettings, *, tolerate_down: bool = False, keyword_only: bool = False
) -> Index:
    """The index with the configured model, settings and corpora (weights, languages).

    A storage server (Qdrant) that is down is an error, except for ``serve``
    (``tolerate_down``), which starts and reports it in status and /health.
    ``keyword_only``: the model is loaded only if something asks for a vector
    (cli/model_memo.py), so a keyword search starts faster.
    """
    from guaipeca.cli.model_memo import lazy_model, note_model
    from guaipeca.embed import load_embedder
    from guaipeca.embed.select import load_models
    from guaipeca.index import Index

    s = loaded.settings
    source = str(loaded.source) if loaded.source else None
    from guaipeca.store.backends import open_backend

    def load(settings: EmbeddingSettings) -> Embedder:
        model = load_embedder(settings, source=source, data_dir=loaded.data_dir)
        note_model(loaded.data_dir, settings, model)
        return model

    def model_for(settings: EmbeddingSettings) -> Embedder:
        lazy = (
            lazy_model(loaded.data_dir, settings, lambda: load(settings)) if keyword_only else None
        )
        return lazy if lazy is not None else load(settings)

    models = load_models(s, load=model_for)
    backend = open_backend(s.storage)  # None: embedded, files under data_dir
    try:
        index = Index(
            index_path(loaded),
            embedder=models.default,
            settings=s.engine(),
            backend=backend,
            corpus_embedders=models.embedders,
            corpus_embedding=models.settings,
        )
    except StorageError as exc:
        where = f"storage.data_dir in {source}" if source else "storage.data_dir"
        raise StorageError(f"{exc} (set {where}, or GUAIPECA_DATA_DIR)") from None
    down = None if tolerate_down or backend is None else index.backend_error
    if down is not None:
        index.close()
        raise GuaipecaError(down)
    for corpus in s.corpora:
        if corpus.name in index.corpora:
            index.set_corpus_weight(corpus.name, corpus.weight)
    return index


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


#: ``--wait`` and ``--wait-timeout``, shared by the commands that write a corpus.
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="When another process is writing the corpus, wait for it to finish instead of "
        "exiting with code 1.",
    ),
]
WaitTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--wait-timeout",
        min=0,
        help="Wait at most this many seconds for another writer, then exit with code 1 "
        "(implies --wait).",
    ),
]


@contextlib.contextmanager
def writing(
    loaded: LoadedSettings, corpora: Iterable[str], *, wait: bool, timeout: float | None
) -> Iterator[None]:
    """Be the one process writing these corpora while the block runs (``Index.writing``);
    it needs no open index, so a refused run stops before loading anything.

    Without ``wait`` another writer is an error (exit code 1) naming it; with it, one line
    on stderr says who is waited for.

    Raises:
        IndexLockedError: another process writes one of them (and we do not wait, or the
            timeout passed).
    """
    from guaipeca.index.checks import location_problem
    from guaipeca.index.corpora import hold_corpora

    waits = wait or timeout is not None
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(
            hold_corpora(
                index_path(loaded),
                corpora,
                wait=timeout if waits else 0.0,
                on_wait=lambda line: err.print(line, markup=False),
            )
        )
    except IndexLockedError as exc:
        raise IndexLockedError(f"{exc} (or pass --wait)" if not waits else str(exc)) from None
    except OSError as exc:  # the lock file's folder cannot be made: the data folder is unusable
        source = loaded.source
        where = f"storage.data_dir in {source}" if source else "storage.data_dir"
        problem = location_problem(index_path(loaded), exc)
        raise StorageError(f"{problem} (set {where}, or GUAIPECA_DATA_DIR)") from None
    with stack:
        yield
