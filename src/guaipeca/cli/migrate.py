"""``guaipeca migrate --to qdrant|postgres|embedded``: the command around the transfer
(:mod:`guaipeca.store.transfer`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from rich.console import Console

from guaipeca.config import did_you_mean
from guaipeca.errors import GuaipecaError
from guaipeca.progress import JobProgress
from guaipeca.store.transfer import migrate_corpus

if TYPE_CHECKING:
    from guaipeca.config import LoadedSettings
    from guaipeca.index import Index

__all__ = ["run_migrate"]

TARGETS = ("qdrant", "postgres", "embedded")


def _open(loaded: LoadedSettings, backend_name: str) -> Index:
    from guaipeca.embed import load_embedder
    from guaipeca.index import Index
    from guaipeca.store.qdrant.backend import QdrantBackend

    s = loaded.settings
    source = str(loaded.source) if loaded.source else None
    embedder = load_embedder(s.embedding, source=source, data_dir=loaded.data_dir)
    if backend_name == "embedded":
        return Index(loaded.data_dir / "index", embedder=embedder, settings=s.engine())
    if backend_name == "postgres":
        from guaipeca.store.postgres.backend import PostgresBackend

        if s.storage.postgres.dsn is None:
            raise GuaipecaError(
                f"set storage.postgres.dsn (or GUAIPECA_POSTGRES_DSN) in {source or 'the config'} "
                "first"
            )
        pg = PostgresBackend.from_settings(s.storage.postgres)
        return Index(embedder=embedder, settings=s.engine(), backend=pg)
    q = s.storage.qdrant
    if q.url is None and q.path is None:
        raise GuaipecaError(
            "set storage.qdrant.url (a Qdrant server or cluster) or storage.qdrant.path "
            f"(local mode) in {source or 'the config'} first"
        )
    backend = QdrantBackend.from_settings(q)
    return Index(embedder=embedder, settings=s.engine(), backend=backend)


def run_migrate(
    loaded: LoadedSettings,
    to: str,
    corpora: list[str] | None,
    *,
    batch: int,
    restart: bool,
    hold: Callable[[list[str]], AbstractContextManager[None]],
    out: Console,
    err: Console,
) -> None:
    """Copy every (or the named) corpus from the configured backend to ``to``, each held
    (``hold``: its writer lock) while it is copied.

    Raises:
        GuaipecaError: a bad target, nothing to copy, or a backend that cannot be reached.
    """
    if to not in TARGETS:
        raise GuaipecaError(f"--to must be one of {', '.join(TARGETS)}, not {to!r:.40}")
    current = loaded.settings.storage.backend
    if to == current:
        other = "embedded" if to != "embedded" else "qdrant or postgres"
        raise GuaipecaError(
            f"storage.backend is already {to!r}; to copy {other} -> {to}, set "
            f"storage.backend: {other} while migrating"
        )
    checkpoint = loaded.data_dir / f"migrate-to-{to}.jsonl"
    loaded.data_dir.mkdir(parents=True, exist_ok=True)
    if restart:
        checkpoint.unlink(missing_ok=True)
    source = _open(loaded, current)
    try:
        target = _open(loaded, to)
    except BaseException:
        source.close()
        raise
    try:
        names = corpora or source.corpora
        unknown = [n for n in names if n not in source.corpora]
        if unknown:
            hint = did_you_mean(unknown[0], source.corpora)
            raise GuaipecaError(
                f"no corpus named {unknown[0]!r} in the {current} index"
                f"{'; ' + hint if hint else ''} (corpora: {', '.join(source.corpora) or 'none'})"
            )
        if not names:
            raise GuaipecaError(f"the {current} index has no corpora to copy")
        for name in names:
            store = source.store(name)
            started = time.perf_counter()
            with hold([name]), JobProgress(console=err) as job:
                target.create_corpus(name, language=store.language)
                report = migrate_corpus(
                    store,
                    target.store(name),
                    checkpoint=checkpoint,
                    batch=batch,
                    progress=job.task(f"{name}: copied", "documents").update,
                )
            seconds = time.perf_counter() - started
            out.print(
                f"{name}: {report.documents} document{'' if report.documents == 1 else 's'} "
                f"({report.chunks} chunk{'' if report.chunks == 1 else 's'}) copied to {to}"
                f", {report.skipped} already copied ({seconds:.1f} s)",
            )
        checkpoint.unlink(missing_ok=True)
        where = loaded.source or "the config"
        out.print(f"done; set storage.backend: {to} in {where} to use it")
    finally:
        target.close()
        source.close()
