"""Tools that manage corpora: re-index, status, folders, upload and delete."""

# No `from __future__ import annotations` here: the SDK evaluates each tool's annotations when
# it is registered, and they name this function's live locals (settings, limits).
import functools
import threading
from typing import Annotated

from pydantic import Field

from guaipeca.errors import InvalidArgumentError, NotFoundError
from guaipeca.ingest import SyncReport
from guaipeca.server.departure import until_departure
from guaipeca.server.files import MAX_NAME_BYTES, PreparedUpload, decode_base64
from guaipeca.server.overview import folders_of, status_of
from guaipeca.server.schema import (
    DeleteOut,
    FoldersOut,
    IndexOut,
    StatusOut,
    UploadOut,
)
from guaipeca.server.service import Service
from guaipeca.server.tools.common import (
    READ_ONLY,
    Registrar,
    in_thread,
    one_of,
)
from guaipeca.server.uploads import convert_then_store, job_out, tool_upload
from guaipeca.server.writes import current_caller

__all__ = [
    "register_delete",
    "register_index",
    "register_list_folders",
    "register_status",
    "register_upload",
]


def _upload_corpora(service: Service) -> str:
    """The corpora that accept uploads, as the tool descriptions name them: under grants,
    not at all (every caller sees the same descriptions; list_folders shows its own)."""
    if service.guard.policy.enabled:
        return "see list_folders (upload_allowed)"
    return ", ".join(service.settings.upload.allow) or "none"


def register_index(tool: Registrar, service: Service) -> None:
    """Registers the ``index`` tool."""

    @tool(
        "Re-index folders",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
    )
    async def index(
        corpus: Annotated[
            str | None,
            Field(
                description="The configured corpus to re-index; default (or 'all', unless a "
                "corpus has that name): every one."
            ),
        ] = None,
        force: Annotated[
            bool,
            Field(description="Rebuild: convert and embed every file again (slow)."),
        ] = False,
    ) -> IndexOut:
        """Re-read configured corpus folders: new and changed files are converted and
        indexed, deleted files leave the index. Returns a summary per corpus (added,
        changed, unchanged, removed, failed files with reasons, totals, seconds).

        Incremental and safe to repeat. Searches keep answering while it runs; writes
        (index, upload, delete) run one at a time, and a caller with too many of them
        queued is told when to retry (status shows a run in progress).
        """
        configured = [c.name for c in service.settings.corpora]
        every = corpus is None or (corpus == "all" and "all" not in configured)
        names = configured if every else [str(corpus)]
        if every and service.guard.limited:  # under grants: those the caller may write
            names = [n for n in names if service.guard.can_write(n)]
        if not names:
            mine = " you may write" if service.guard.limited else ""
            raise InvalidArgumentError(f"the server's configuration lists no corpora{mine}")
        for name in names:  # before queueing: a denied write does not wait its turn
            await in_thread(functools.partial(service.guard.check_write, name))

        def run() -> list[SyncReport]:
            for name in names:
                service.corpus_root(name)  # every folder checked before any run starts
            reports = []
            for name in names:
                with service.audited(name):
                    reports.append(service.reindex(name, force=force))
            return reports

        # A client that leaves while the run waits for its turn has it cancelled.
        reports = await until_departure(functools.partial(service.writes.run, run))
        return IndexOut(corpora=[service.summary(r) for r in reports])


def register_status(tool: Registrar, service: Service) -> None:
    """Registers the ``status`` tool."""

    @tool("Index status", **READ_ONLY)
    async def status(
        job: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=100,
                description="The id of one of your upload jobs (an upload that answered "
                "state 'running'): its state and outcome come back as job.",
            ),
        ] = None,
    ) -> StatusOut:
        """The server's version, embedding model and dimension, every corpus with its
        topic, language, weight and document/chunk counts, corpora that cannot be used
        (with the reason) and the indexing run in progress, if any.

        With job: also that upload job (one of yours), as job: its state (running, done
        or failed) and, once it ended, result (the upload's answer) or error."""
        found = None
        if job is not None:  # someone else's job is as unknown as a missing one
            found = service.jobs.get(job, current_caller())
            if found is None:
                raise NotFoundError(
                    f"unknown job {job!r:.60}: no such job (unknown, expired, or not yours)"
                )
        out = await in_thread(functools.partial(status_of, service))
        out.job = job_out(found) if found is not None else None
        return out


def register_list_folders(tool: Registrar, service: Service) -> None:
    """Registers the ``list_folders`` tool."""

    @tool("List folders", **READ_ONLY)
    async def list_folders() -> FoldersOut:
        """The configured corpora: name, folder, topic, weight, language, file types,
        exclude patterns and whether uploads are allowed, plus the upload limits.

        Use it to choose corpora for search or a target for upload."""
        return await in_thread(functools.partial(folders_of, service))


def register_upload(tool: Registrar, service: Service) -> None:
    """Registers the ``upload`` tool."""
    up = service.settings.upload

    @tool(
        "Upload a file",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=False,
    )
    async def upload(
        corpus: Annotated[
            str,
            Field(
                min_length=1,
                description=f"A corpus that accepts uploads: {_upload_corpora(service)}.",
            ),
        ],
        filename: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_NAME_BYTES,
                description="A plain file name with its extension, e.g. 'report.pdf' "
                "(no folders; use subfolder).",
            ),
        ],
        content_base64: Annotated[
            str | None,
            Field(
                min_length=1,
                description="The file's bytes, base64-encoded (standard alphabet). At most "
                f"{up.max_file_size} bytes once decoded.",
            ),
        ] = None,
        subfolder: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=1000,
                description="A folder inside the corpus folder, e.g. 'notes/2024' "
                "(created if missing).",
            ),
        ] = None,
        overwrite: Annotated[bool, Field(description="Replace a file of the same name.")] = False,
        content: Annotated[
            str | None,
            Field(min_length=1, description="The seed Guaipeca's name for content_base64."),
        ] = None,
        index: Annotated[
            bool | None,
            Field(description=f"Index it now (default: upload.auto_index, {up.auto_index})."),
        ] = None,
    ) -> UploadOut:
        """Save a document into a corpus folder and index it.

        Accepts only corpora listed in the server's upload.allow, file types in
        upload.allowed_extensions, and files that convert to text (a broken PDF is
        refused and nothing is written). An existing file is kept unless overwrite is
        true. Returns the document id (its path in the corpus) and the indexing summary
        (state "done"). Give content_base64 (or content).

        A slow upload (a long conversion, OCR, a busy write queue) not done within the
        server's upload.answer_seconds returns state "running" and a job id instead: it
        goes on, and status with that job gives its outcome (the same answer, or the
        error). A call cancelled before then writes nothing.
        """
        encoded = one_of("content_base64", content_base64, "content", content)
        service.writable_corpus(corpus)  # before anything is decoded

        def prepare(cancel: threading.Event) -> PreparedUpload:
            data = decode_base64(encoded, up.max_file_size)
            return service.prepare_upload(
                corpus, filename, data, subfolder=subfolder, overwrite=overwrite, cancel=cancel
            )

        # Converted outside the write turn; a call cancelled, or whose client left, before
        # it is answered stops there and writes nothing; past upload.answer_seconds, a job.
        work = convert_then_store(service, prepare, index=index, cancel=threading.Event())
        return await tool_upload(service, work, corpus)


def register_delete(tool: Registrar, service: Service) -> None:
    """Registers the ``delete`` tool."""

    @tool(
        "Delete a document",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=True,
    )
    async def delete(
        corpus: Annotated[
            str,
            Field(
                min_length=1,
                description="The document's corpus (one that accepts uploads: "
                f"{_upload_corpora(service)}).",
            ),
        ],
        doc_id: Annotated[
            str | None,
            Field(min_length=1, max_length=1024, description="The document id (doc_id)."),
        ] = None,
        filename: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=1024,
                description="The seed Guaipeca's name for doc_id (the file's path in the "
                "corpus folder, e.g. 'report.pdf').",
            ),
        ] = None,
        index: Annotated[
            bool,
            Field(
                description="Remove it from the index now (false: only the file goes; the "
                "document leaves the index at the next index run)."
            ),
        ] = True,
    ) -> DeleteOut:
        """Delete a document: its file is removed from the corpus folder (when it is a
        file inside that folder) and the document from the index. Cannot be undone.

        Only in corpora that accept uploads. Give doc_id (or filename)."""
        name = one_of("doc_id", doc_id, "filename", filename)
        # A client that leaves while the delete waits for its turn has it cancelled.
        remove = functools.partial(service.delete, corpus, name, index=index)
        return await until_departure(functools.partial(service.writes.run, remove))
