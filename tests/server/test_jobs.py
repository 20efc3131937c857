"""Jobs (server/jobs.py) outlive the process that ran them: a real SQLite file in a temp
folder, opened again as a restarted server would. A job left running is ended with what
became of its file; an unusable file falls back to memory without failing an upload."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from pathlib import Path

import pytest

from guaipeca.server import Service
from guaipeca.server.jobs import JOBS_FILE, Job, Jobs, StoreStage, UploadLink, current_upload
from support.reliability import make_service, small_disk


def _ended(job: Job) -> str:
    return f"ended at restart: {job.kind}"


def _reopen(path: Path, **kw: float) -> Jobs:
    return Jobs(path, interrupted=_ended, **kw)


def test_a_finished_job_is_read_back_by_its_owner_only_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / JOBS_FILE
    jobs = _reopen(path)
    job = jobs.start("token:alice", "upload")
    jobs.finish(job, 200, {"doc_id": "a.md"})
    jobs.close()

    again = _reopen(path)
    found = again.get(job.id, "token:alice")
    assert found is not None and again.persistent
    assert found.as_json() == {
        "job": job.id,
        "kind": "upload",
        "state": "done",
        "started": round(job.started, 3),
        "finished": round(job.finished or 0, 3),
        "status": 200,
        "result": {"doc_id": "a.md"},
    }
    assert again.get(job.id, "jwt:bob") is None  # someone else's: as if unknown
    assert again.get(job.id[:-1] + "x", "token:alice") is None
    assert job.id not in path.read_bytes().decode("latin-1")  # only its hash is stored
    assert path.stat().st_mode & 0o077 == 0


def test_a_job_left_running_ends_failed_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / JOBS_FILE
    jobs = _reopen(path)
    job = jobs.start("token:alice", "upload")
    jobs.close()  # the process died with the job running

    again = _reopen(path)
    found = again.get(job.id, "token:alice")
    assert found is not None
    out = found.as_json()
    assert (out["state"], out["status"]) == ("failed", 503)
    assert out["error"] == "ended at restart: upload"
    again.close()
    assert _reopen(path).get(job.id, "token:alice") is not None  # ended once, and kept


def test_a_running_job_of_another_live_server_on_the_same_folder_is_left_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / JOBS_FILE
    first = _reopen(path)
    job = first.start("token:alice", "upload")
    second = _reopen(path)  # the first still holds its lock on the file
    assert second.get(job.id, "token:alice") is not None
    assert second.get(job.id, "token:alice").state == "running"  # type: ignore[union-attr]
    first.finish(job, 200, {})
    assert first.get(job.id, "token:alice").state == "done"  # type: ignore[union-attr]


def test_finished_jobs_expire_and_are_dropped_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / JOBS_FILE
    jobs = _reopen(path)
    old = jobs.start("token:alice", "upload")
    jobs.finish(old, 400, {"error": "no"})
    jobs.close()
    expired = _reopen(path, keep_seconds=0.0)
    assert expired.get(old.id, "token:alice") is None
    expired.close()
    assert _reopen(path).get(old.id, "token:alice") is None


def test_an_unusable_jobs_file_keeps_jobs_in_memory_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / JOBS_FILE
    path.mkdir()  # a folder where the file should be: it cannot be opened
    jobs = _reopen(path)
    with caplog.at_level(logging.WARNING, "guaipeca.server"):
        job = jobs.start("token:alice", "upload")
        jobs.finish(job, 200, {"doc_id": "a.md"})
        other = jobs.start("token:alice", "upload")
    assert not jobs.persistent
    assert jobs.get(job.id, "token:alice") is not None and jobs.running() == 1
    assert other.state == "running"
    warnings = [r for r in caplog.records if "jobs are kept in memory" in r.getMessage()]
    assert len(warnings) == 1


def test_a_damaged_jobs_file_keeps_jobs_in_memory(tmp_path: Path) -> None:
    path = tmp_path / JOBS_FILE
    path.write_bytes(b"not a database at all, " * 100)
    jobs = _reopen(path)
    job = jobs.start("token:alice", "upload")
    assert not jobs.persistent and jobs.get(job.id, "token:alice") is job


def test_a_full_disk_under_the_jobs_file_falls_back_to_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", "256k") as disk:
        jobs = _reopen(disk / JOBS_FILE)
        job = jobs.start("token:alice", "upload")
        assert jobs.persistent
        filler = disk / "filler"
        with pytest.raises(OSError), open(filler, "wb", buffering=0) as fh:
            while True:  # until the disk is full
                fh.write(b"\0" * 4096)
        with caplog.at_level(logging.WARNING, "guaipeca.server"):
            jobs.finish(job, 200, {"warnings": ["x" * 200_000]})  # more than is left
            later = jobs.start("token:alice", "upload")
        assert not jobs.persistent
        assert jobs.get(job.id, "token:alice").state == "done"  # type: ignore[union-attr]
        assert jobs.get(later.id, "token:alice") is not None
        assert sum("kept in memory" in r.getMessage() for r in caplog.records) == 1
        jobs.close()
        filler.unlink()


def test_a_read_only_jobs_file_falls_back_to_memory(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "1m") as disk:
        _reopen(disk / JOBS_FILE).close()  # made, then the disk turns read-only
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        jobs = _reopen(disk / JOBS_FILE)
        job = jobs.start("token:alice", "upload")
        jobs.finish(job, 200, {})
        assert not jobs.persistent
        assert jobs.get(job.id, "token:alice").state == "done"  # type: ignore[union-attr]


# -- what a restart says of an upload's file ---------------------------------------------
@pytest.fixture
def service(tmp_path: Path) -> Service:
    return make_service(tmp_path, docs=1)


def _restarted(service: Service) -> Service:
    """The same data folder opened by a new server process (its jobs' file reopened)."""
    service.jobs.close()
    return Service(service.index, service.loaded)


def test_an_upload_killed_while_converting_wrote_nothing(service: Service) -> None:
    job = service.jobs.start("token:alice", "upload", UploadLink())
    found = _restarted(service).jobs.get(job.id, "token:alice")
    assert found is not None and found.status == 503
    assert found.body["error"].startswith(
        "the server restarted before the upload ended; nothing from it was written or indexed"
    )


def test_an_upload_killed_while_its_file_was_written_leaves_no_temporary_file(
    service: Service, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    link = UploadLink()
    job = service.jobs.start("token:alice", "upload", link)
    data = b"# New\n\nnever landed\n"
    token = current_upload.set(link)
    try:
        shown = "'new.md' in corpus 'docs'"
        stage = StoreStage(str(folder / "new.md"), shown, hashlib.sha256(data).hexdigest(), True)
        service.jobs.storing(stage)
    finally:
        current_upload.reset(token)
    (folder / ".guaipeca-0123456789ab.upload").write_bytes(data[:5])  # killed mid-write
    found = _restarted(service).jobs.get(job.id, "token:alice")
    assert found is not None
    assert found.body["error"].startswith(
        "the server restarted before 'new.md' in corpus 'docs' was written; nothing from it "
        "was written or indexed"
    )
    assert sorted(os.listdir(folder)) == ["doc-0.md"]


def test_an_upload_killed_while_indexing_says_its_file_is_in_the_folder(
    service: Service, tmp_path: Path
) -> None:
    link = UploadLink()
    token = current_upload.set(link)
    try:
        ready = service.prepare_upload("docs", "late.md", b"# Late\n\nstored, then killed\n")
        job = service.jobs.start("token:alice", "upload", link)  # a job before the store
        service.store_upload(ready)  # stored and indexed; the process dies before finish
    finally:
        current_upload.reset(token)
    found = _restarted(service).jobs.get(job.id, "token:alice")
    assert found is not None
    assert found.body["error"].startswith(
        "the server restarted while 'late.md' in corpus 'docs' was being indexed: the file "
        "is in the corpus folder"
    )
    assert (tmp_path / "docs" / "late.md").exists()
