"""The ``upload`` tool's jobs (issue 29, item 2), through the SDK's in-memory client: an
upload not done within ``upload.answer_seconds`` answers state "running" with a job that
``status`` follows to the upload's own answer; a call cancelled before then writes nothing.

A write of the test's own holds the write turn until the test lets it go, so "not done in
time" is a state the test sets up, not a race. (tests/reliability/test_slow_uploads.py
replays the same against a real ``guaipeca serve`` with two identities and a leaving client.)
"""

from __future__ import annotations

import base64
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from guaipeca.config import LoadedSettings
from guaipeca.server import Service, build_server
from support.mcp import tool_data as data
from support.mcp import tool_error as error
from support.reliability import make_service

TEXT = b"# Late\n\nA note about the quetzal lantern, uploaded while the turn was held.\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Service]:
    service = make_service(tmp_path, docs=2)
    yield service
    service.index.close()


def answering_after(base: Service, seconds: float) -> Service:
    """``base`` with ``upload.answer_seconds`` set to ``seconds`` (same index)."""
    settings = base.settings.model_copy(
        update={"upload": base.settings.upload.model_copy(update={"answer_seconds": seconds})}
    )
    loaded = base.loaded
    return Service(base.index, LoadedSettings(settings, loaded.source, loaded.data_dir))


@asynccontextmanager
async def turn_held(service: Service) -> AsyncIterator[Callable[[], None]]:
    """The write turn held by a write of the test's own until the yielded release is
    called (or the block ends)."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        release.wait(60)

    async with anyio.create_task_group() as tg:
        tg.start_soon(service.writes.run, hold, "holder")
        await anyio.to_thread.run_sync(holding.wait, 30)
        try:
            yield release.set
        finally:
            release.set()


def upload_args(filename: str) -> dict[str, Any]:
    return {
        "corpus": "docs",
        "filename": filename,
        "content_base64": base64.b64encode(TEXT).decode("ascii"),
    }


async def until(condition: Callable[[], bool], seconds: float = 30) -> None:
    """Wait (on the event loop) until ``condition()`` holds."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.01)


async def ended(client: Client, job: str) -> dict[str, Any]:
    """The job once it is no longer running, as ``status`` shows it."""
    with anyio.fail_after(60):
        while True:
            out = data(await client.call_tool("status", {"job": job}))["job"]
            if out["state"] != "running":
                return dict(out)
            await anyio.sleep(0.02)


@pytest.mark.anyio
async def test_an_upload_not_done_in_time_is_a_job_that_status_follows_to_its_answer(
    base: Service,
) -> None:
    service = answering_after(base, 0.2)
    folder = service.corpus_root("docs")
    async with Client(build_server(service)) as client:
        async with turn_held(service) as release:
            out = data(await client.call_tool("upload", upload_args("late.md")))
            job = out["job"]
            assert out["state"] == "running" and out["corpus"] == "docs"
            assert out["doc_id"] is None and out["indexed"] is None
            assert out["poll"] == f"/jobs/{job}"
            assert f"call status with job {job!r}" in out["note"]
            running = data(await client.call_tool("status", {"job": job}))
            assert running["job"]["state"] == "running" and running["job"]["result"] is None
            assert running["corpora"], "the rest of status is still there"
            assert not (folder / "late.md").exists()
            release()
            outcome = await ended(client, job)
        direct = data(await client.call_tool("upload", upload_args("direct.md")))
        plain = data(await client.call_tool("status", {}))
    assert outcome["kind"] == "upload" and outcome["state"] == "done"
    assert outcome["status"] == 200 and outcome["error"] is None
    assert outcome["finished"] >= outcome["started"]
    result = outcome["result"]
    assert result["doc_id"] == "late.md" and result["indexed"]["added"] == 1
    # The job's answer is the one the call would have had: a direct upload of the same
    # bytes answers the same, but for its name and the run's own figures.
    same = ("state", "corpus", "bytes", "sha256", "replaced", "format", "warnings", "job")
    assert {k: result[k] for k in same} == {k: direct[k] for k in same}
    assert (folder / "late.md").read_bytes() == TEXT
    assert "late.md" in {h.doc_id for h in service.index.search("quetzal", mode="keyword")}
    assert plain["job"] is None


@pytest.mark.anyio
async def test_status_calls_anothers_job_unknown_as_a_missing_one(base: Service) -> None:
    service = answering_after(base, 30)
    theirs = service.jobs.start("someone-else", "upload")
    async with Client(build_server(service)) as client:
        missing = error(await client.call_tool("status", {"job": "no-such-job"}))
        foreign = error(await client.call_tool("status", {"job": theirs.id}))
    assert missing == (
        "Error executing tool status: unknown job 'no-such-job': no such job (unknown, "
        "expired, or not yours)"
    )
    assert foreign == missing.replace("no-such-job", theirs.id)


@pytest.mark.anyio
async def test_an_upload_cancelled_while_it_waits_for_the_turn_writes_nothing(
    base: Service,
) -> None:
    service = answering_after(base, 60)
    folder = service.corpus_root("docs")
    async with Client(build_server(service)) as client:
        async with turn_held(service), anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "upload", upload_args("gone.md"))
            await until(lambda: service.writes.queued == 2)  # the holder and the upload
            tg.cancel_scope.cancel()
        await until(lambda: service.writes.queued == 0)
        # The queue is free and the upload never ran: a later write goes straight through.
        after = data(await client.call_tool("upload", upload_args("after.md")))
    assert after["state"] == "done" and (folder / "after.md").exists()
    assert not (folder / "gone.md").exists()
    assert "gone.md" not in {d.doc_id for d in service.index.list_documents(limit=1000)}
    assert service.jobs.running() == 0


def test_a_job_is_found_for_an_owner_with_non_ascii_characters(base: Service) -> None:
    """A JWT subject may be 'joão': the owner check must not raise on it."""
    job = base.jobs.start("joão", "upload")
    assert base.jobs.get(job.id, "joão") is job
    assert base.jobs.get(job.id, "joao") is None
