"""What the ``status`` and ``list_folders`` tools answer: the index and the configured
corpora as the caller may see them (under grants, only the corpora it may read)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from guaipeca import __version__
from guaipeca.embed import identity_of
from guaipeca.errors import BackendUnavailableError
from guaipeca.server.schema import (
    BrokenCorpus,
    CorpusStatus,
    FolderOut,
    FoldersOut,
    IndexingState,
    StatusOut,
    UploadLimits,
)
from guaipeca.server.service import Service
from guaipeca.types import IndexStats

__all__ = ["folders_of", "status_of"]


def status_of(service: Service) -> StatusOut:
    """The ``status`` tool's answer: the model, each corpus the caller may read (configured
    or only in the data folder), the totals of those a search covers, what is indexing."""
    # A Qdrant server that is down is reported, not raised: status must keep answering.
    down = service.index.backend_error
    try:
        stats = service.index.stats() if down is None else None
    except BackendUnavailableError as exc:
        down, stats = str(exc), None
    if stats is None:
        emb = service.index.embedder
        stats = IndexStats(None, emb.name, emb.dimension, ())
    stats = service.guard.stats(stats)  # under grants: the readable corpora only
    by_name = {c.name: c for c in stats.corpora}
    configured = service.configured
    counted = service.searched(stats)  # the totals: a corpus left out is only listed
    allowed = {n for n in service.settings.upload.allow if service.guard.rights.may_write(n)}
    names = list(configured) + [n for n in by_name if n not in configured]
    names = service.guard.readable(names) if service.guard.limited else names
    corpora = []
    for name in names:
        conf = configured.get(name)
        st = by_name.get(name)
        corpora.append(
            CorpusStatus(
                name=name,
                topic=conf.topic if conf else "",
                language=st.language if st else (conf.language if conf else ""),
                weight=conf.weight if conf else 1.0,
                documents=st.documents if st else 0,
                chunks=st.chunks if st else 0,
                pending_chunks=st.pending_chunks if st else 0,
                pending_seconds=st.pending_seconds if st else 0.0,
                configured=conf is not None,
                indexed=st is not None,
                searched=conf is not None or service.loaded.source is None,
                upload_allowed=name in allowed,
                note=None
                if conf is not None or service.loaded.source is None
                else (
                    f"not in the configuration, so not searched; drop it with "
                    f"'guaipeca drop {name}'"
                ),
                model=st.model if st else identity_of(service.index.embedder_for(name)).describe(),
                model_mismatch=service.sanitise(st.model_mismatch)
                if st and st.model_mismatch
                else None,
            )
        )
    running = service.indexing
    if running and not service.guard.rights.may_read(running[0]):
        running = None
    return StatusOut(
        version=__version__,
        model=stats.model,
        dimension=stats.dimension,
        documents=counted.documents,
        chunks=counted.chunks,
        pending_chunks=counted.pending_chunks,
        pending_seconds=counted.pending_seconds,
        corpora=corpora,
        broken=[
            BrokenCorpus(name=n, reason=service.sanitise(r))
            for n, r in service.index.broken_corpora.items()
            if service.guard.rights.may_read(n)
        ],
        indexing=IndexingState(corpus=running[0], seconds=round(running[1], 3))
        if running
        else None,
        backend=service.settings.storage.backend,
        backend_error=service.sanitise(down) if down else None,
    )


def folders_of(service: Service) -> FoldersOut:
    """The ``list_folders`` tool's answer: each readable configured corpus's folder and
    settings, and where the caller may upload."""
    up = service.settings.upload
    home = None
    with contextlib.suppress(RuntimeError):
        home = Path.home()
    out = []
    rights = service.guard.rights
    for c in service.settings.corpora:
        if not rights.may_read(c.name):
            continue
        shown = c.path
        if home is not None and c.path.is_relative_to(home):
            shown = Path("~") / c.path.relative_to(home)
        out.append(
            FolderOut(
                name=c.name,
                path=shown.as_posix(),
                exists=c.path.is_dir(),
                topic=c.topic,
                weight=c.weight,
                language=c.language,
                extensions=list(c.extensions),
                exclude=list(c.exclude),
                upload_allowed=c.name in up.allow and rights.may_write(c.name),
            )
        )
    return FoldersOut(
        folders=out,
        upload=UploadLimits(
            corpora=[n for n in up.allow if rights.may_write(n)],
            max_file_size=up.max_file_size,
            allowed_extensions=list(up.allowed_extensions),
            auto_index=up.auto_index,
        ),
    )
