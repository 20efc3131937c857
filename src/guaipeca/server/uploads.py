"""An upload's two parts: convert outside the write turn, then store inside it.

Conversion (OCR included) is the slow part, and it used to run inside the single write turn:
one 100-page scan held every other identity's writes for 18 minutes (issue 29). Here an
upload takes its place in the write queue (counted against the per-caller bound), converts
in a worker thread under ``limits.convert_timeout_seconds`` and one of the shared
conversion slots (one per caller), and only then waits for the write turn, for the short
store and index. So another identity's upload waits at most for one store.

Cancel: until an upload is accepted (answered, or answered 202 with a job), a client that
leaves stops it: its conversion stops at the next page, a queued store never starts, and
nothing is written. ``PUT /api/upload`` answers 202 with a job once ``upload.answer_seconds``
pass (``GET /jobs/{id}`` then gives the outcome); the MCP ``upload`` tool (and
``/api/tools/upload``) answers state "running" with the job's id then, followed with the
``status`` tool's ``job`` argument or ``GET /jobs/{id}``. A tool call's client that leaves
(server/departure.py) or a cancelled call stops it the same way.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from guaipeca.errors import (
    AbandonedError,
    ConversionTimeoutError,
    DiskFullError,
    GuaipecaError,
    StoppedError,
    UploadQuotaError,
    WriteQueueFullError,
)
from guaipeca.server.asgi import error_response, queue_full_response
from guaipeca.server.departure import current_departure
from guaipeca.server.files import PreparedUpload
from guaipeca.server.jobs import Job, UploadLink, current_upload
from guaipeca.server.schema import JobOut, UploadOut
from guaipeca.server.service import Service
from guaipeca.server.writes import current_caller

__all__ = [
    "CONVERT_GRACE_SECONDS",
    "accept_upload",
    "answer_upload",
    "convert_then_store",
    "job_out",
    "job_routes",
    "tool_upload",
]

log = logging.getLogger("guaipeca.server")

#: How long past ``limits.convert_timeout_seconds`` a conversion that has not stopped at a
#: checkpoint is waited for before its upload is refused anyway (the thread is left to stop).
CONVERT_GRACE_SECONDS = 5.0

Prepare = Callable[[threading.Event], PreparedUpload]


async def convert_then_store(
    service: Service, prepare: Prepare, *, index: bool | None, cancel: threading.Event
) -> UploadOut:
    """``prepare(cancel)`` (checks and conversion) in a worker thread outside the write
    turn, then ``service.store_upload`` in it. Cancelling the caller sets ``cancel``.

    Raises:
        WriteQueueFullError: the caller has too many writes queued, or the queue is full.
        InvalidArgumentError: the upload is refused (checks, conversion, its time budget).
        AbandonedError: ``cancel`` was set before the store began.
        GuaipecaError: storing or indexing failed.
    """
    writes = service.writes
    seconds = service.settings.limits.convert_timeout_seconds
    try:
        async with writes.admitted() as who:
            async with service.conversions.slot(who):
                try:
                    with anyio.fail_after(seconds + CONVERT_GRACE_SECONDS):
                        # Abandoned on cancel: ``cancel`` stops the thread at its next page.
                        ready = await anyio.to_thread.run_sync(
                            functools.partial(prepare, cancel), abandon_on_cancel=True
                        )
                except TimeoutError:
                    raise ConversionTimeoutError(
                        f"the conversion took longer than limits.convert_timeout_seconds "
                        f"({seconds:g} s); nothing was written"
                    ) from None
            if cancel.is_set():
                raise AbandonedError("the upload was cancelled: its client left")
            return await writes.locked(functools.partial(service.store_upload, ready, index=index))
    except BaseException:
        cancel.set()  # cancelled (the client left) or failed: the conversion stops too
        raise


def _outcome(exc: BaseException | None, out: UploadOut | None, service: Service) -> Response:
    """The answer to an upload that ended with ``out`` or ``exc``."""
    if exc is None and out is not None:
        return JSONResponse(out.model_dump(mode="json"))
    if isinstance(exc, WriteQueueFullError):
        return queue_full_response(exc)
    if isinstance(exc, StoppedError):
        return error_response(503, service.sanitise(str(exc)))
    if isinstance(exc, DiskFullError | UploadQuotaError):
        return error_response(507, service.sanitise(str(exc)))
    if isinstance(exc, GuaipecaError):
        return error_response(400, service.sanitise(str(exc)))
    log.error("upload failed", exc_info=exc)
    return error_response(500, "internal error")


def _quiet(task: asyncio.Future[UploadOut]) -> None:
    """Retrieve the outcome of work nobody waits for any more (no "never retrieved")."""
    if not task.cancelled():
        task.exception()


async def accept_upload(
    service: Service, work: Awaitable[UploadOut], left: Awaitable[None] | None
) -> UploadOut | Job:
    """Run ``work``: its answer when done within ``upload.answer_seconds``, else a job of
    the current caller's that runs on to its end. Until then, ``left`` ending (the client
    left) or the call being cancelled cancels ``work``: nothing is written.

    Raises:
        AbandonedError: ``left`` ended first; ``work`` was cancelled.
        Exception: whatever ``work`` raised within the answer time.
    """
    link = UploadLink()  # ties the work to its job, if it gets one; its task copies it
    current_upload.set(link)
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(left) if left is not None else None
    wait = service.settings.upload.answer_seconds
    try:
        await asyncio.wait(
            {task} if gone is None else {task, gone},
            timeout=wait,
            return_when=asyncio.FIRST_COMPLETED,
        )
    except asyncio.CancelledError:
        task.cancel()  # the call was cancelled before its upload was accepted
        task.add_done_callback(_quiet)
        raise
    finally:
        if gone is not None:
            gone.cancel()
    if task.done():
        return task.result()
    if gone is not None and gone.done() and not gone.cancelled():
        task.cancel()  # not accepted yet: stopped, nothing written
        task.add_done_callback(_quiet)
        log.info("upload cancelled: its client left before it was accepted")
        raise AbandonedError("the upload was cancelled: its client left; nothing was written")
    return _as_job(service, task, link)


def _as_job(service: Service, task: asyncio.Future[UploadOut], link: UploadLink) -> Job:
    """A job of the current caller's for ``task``, which runs on to its end; its outcome
    is the answer ``PUT /api/upload`` would have given."""
    job = service.jobs.start(current_caller(), "upload", link)

    def finished(done: asyncio.Future[UploadOut]) -> None:
        if done.cancelled():  # the server stopped first
            service.jobs.finish(job, 503, {"error": "the server stopped before the upload ended"})
            return
        exc = done.exception()
        answer = _outcome(exc, None if exc is not None else done.result(), service)
        service.jobs.finish(job, answer.status_code, json.loads(bytes(answer.body)))

    task.add_done_callback(finished)
    _running.add(task)  # kept referenced until it ends
    task.add_done_callback(_running.discard)
    return job


async def tool_upload(service: Service, work: Awaitable[UploadOut], corpus: str) -> UploadOut:
    """The ``upload`` tool's answer: ``work``'s, or state "running" with a job once
    ``upload.answer_seconds`` pass; the call's client leaving first (over HTTP) cancels it.

    Raises:
        AbandonedError: the client left first; nothing was written.
        Exception: whatever ``work`` raised within the answer time.
    """
    departure = current_departure.get()
    got = await accept_upload(service, work, departure.wait() if departure else None)
    return got if isinstance(got, UploadOut) else _accepted(service, got, corpus)


def _accepted(service: Service, job: Job, corpus: str) -> UploadOut:
    """What the ``upload`` tool answers for an upload accepted as ``job``."""
    seconds = service.settings.upload.answer_seconds
    return UploadOut(
        state="running",
        corpus=corpus,
        doc_id=None,
        job=job.id,
        poll=f"/jobs/{job.id}",
        note=f"not done within upload.answer_seconds ({seconds:g} s); it goes on: call "
        f"status with job {job.id!r} for its outcome (done, with the upload's result, or "
        "failed, with the error)",
    )


def job_out(job: Job) -> JobOut:
    """``job`` as ``GET /jobs/{id}`` and the ``status`` tool show it."""
    return JobOut.model_validate(job.as_json())


async def _client_left(request: Request) -> None:
    """Return once the client disconnects (its body was read: nothing else comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def answer_upload(request: Request, service: Service, work: Awaitable[UploadOut]) -> Response:
    """Run ``work`` for ``request``: its answer when done within ``upload.answer_seconds``,
    else 202 with a job that runs on to its end; a client that leaves before either has
    ``work`` cancelled (nothing is written)."""
    try:
        got = await accept_upload(service, work, _client_left(request))
    except AbandonedError:
        return error_response(499, "the client left")
    except Exception as exc:  # every failure becomes an answer
        return _outcome(exc, None, service)
    if isinstance(got, UploadOut):
        return _outcome(None, got, service)
    where = f"/jobs/{got.id}"
    return JSONResponse(
        {"job": got.id, "state": "running", "poll": where},
        status_code=202,
        headers={"Location": where},
    )


# Jobs' tasks, referenced until they end (the event loop keeps only weak references).
_running: set[asyncio.Future[UploadOut]] = set()


def job_routes(service: Service) -> list[BaseRoute]:
    """``GET /jobs/{id}``: one of the caller's jobs (404 for anyone else's)."""

    async def job(request: Request) -> Response:
        found = service.jobs.get(str(request.path_params["id"]), current_caller())
        if found is None:
            return error_response(404, "no such job (unknown, expired, or not yours)")
        return JSONResponse(job_out(found).model_dump(mode="json"))

    return [Route("/jobs/{id}", endpoint=job, methods=["GET"])]
