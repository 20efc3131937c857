"""Uploads whose work outlives their answer: jobs, followed with ``GET /jobs/{id}``.

An upload not done within ``upload.answer_seconds`` is answered 202 with a job id; from
then on it is accepted, runs to its end whether or not its client stays, and its outcome
(the answer the upload would have had: status and JSON body) waits here for its owner.
Only the identity that sent it sees a job (anyone else gets 404, as for an unknown id).
Jobs live in memory: a restart forgets them (what was stored stays stored). Used from the
event loop only.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["JOB_KEEP_SECONDS", "Job", "Jobs"]

#: How long a finished job's outcome is kept for its owner.
JOB_KEEP_SECONDS: Final = 3600.0
# Finished jobs kept in all (the oldest go first); running ones are bounded by the write
# queue (server.max_queued_writes).
_MAX_KEPT: Final = 1000


@dataclass
class Job:
    """One upload answered 202: ``state`` running, done or failed; once it ends, ``status``
    and ``body`` are the answer the upload would have had."""

    id: str
    owner: str
    kind: str
    started: float = field(default_factory=time.time)
    state: Literal["running", "done", "failed"] = "running"
    status: int = 202
    body: dict[str, Any] = field(default_factory=dict)
    finished: float | None = None

    def as_json(self) -> dict[str, Any]:
        """What ``GET /jobs/{id}`` answers: the job, and its outcome once it has one."""
        out: dict[str, Any] = {
            "job": self.id,
            "kind": self.kind,
            "state": self.state,
            "started": round(self.started, 3),
        }
        if self.finished is not None:
            out["finished"] = round(self.finished, 3)
            out["status"] = self.status
            out["result" if self.state == "done" else "error"] = (
                self.body if self.state == "done" else self.body.get("error", "failed")
            )
        return out


class Jobs:
    """The jobs of this server process, by id."""

    def __init__(self, keep_seconds: float = JOB_KEEP_SECONDS) -> None:
        self.keep_seconds = keep_seconds
        self._jobs: OrderedDict[str, Job] = OrderedDict()

    def start(self, owner: str, kind: str) -> Job:
        """A new running job of ``owner``'s."""
        self._forget_old()
        job = Job(secrets.token_urlsafe(12), owner, kind)
        self._jobs[job.id] = job
        return job

    def finish(self, job: Job, status: int, body: dict[str, Any]) -> None:
        """Record ``job``'s outcome: the HTTP status and JSON body of its answer."""
        job.state = "done" if status < 400 else "failed"
        job.status, job.body, job.finished = status, body, time.time()
        self._jobs.move_to_end(job.id)  # the most recently finished are kept longest

    def get(self, job_id: str, owner: str) -> Job | None:
        """``owner``'s job ``job_id``, or None (unknown, expired or someone else's)."""
        self._forget_old()
        job = self._jobs.get(job_id)
        # As bytes: compare_digest refuses str with non-ASCII characters (a JWT subject may
        # have them).
        mine = job is not None and secrets.compare_digest(job.owner.encode(), owner.encode())
        return job if mine else None

    def running(self) -> int:
        return sum(1 for j in self._jobs.values() if j.state == "running")

    def _forget_old(self) -> None:
        now = time.time()
        done = [j for j in self._jobs.values() if j.finished is not None]
        for job in done[: max(0, len(done) - _MAX_KEPT)]:
            del self._jobs[job.id]
        for job in done:
            if job.id in self._jobs and job.finished is not None:
                if now - job.finished <= self.keep_seconds:
                    break
                del self._jobs[job.id]
