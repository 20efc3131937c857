"""Uploads whose work outlives their answer: jobs, followed with ``GET /jobs/{id}``.

An upload not done within ``upload.answer_seconds`` is answered 202 with a job id; from
then on it is accepted, runs to its end whether or not its client stays, and its outcome
(the answer the upload would have had: status and JSON body) waits here for its owner.
Only the identity that sent it sees a job (anyone else gets 404, as for an unknown id).

Jobs survive a restart: each is written to one small SQLite table in the data folder
(``jobs.sqlite``) when it starts, when its file begins to be stored, and when it ends. A job
a previous process left running is ended as failed when the server starts again, with a
message saying what became of its file (``Jobs(interrupted=...)`` decides it). Ids are
secrets: only their SHA-256 is stored. When the file cannot be used (an unwritable data
folder, a full disk), jobs are kept in memory alone: one warning, and uploads go on.

Used from the event loop, except :meth:`Jobs.storing`, called from the store's worker
thread: a lock covers both.
"""

from __future__ import annotations

import contextvars
import fcntl
import hashlib
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

__all__ = [
    "JOBS_FILE",
    "JOB_KEEP_SECONDS",
    "Job",
    "Jobs",
    "StoreStage",
    "UploadLink",
    "current_upload",
]

log = logging.getLogger("guaipeca.server")

#: How long a finished job's outcome is kept for its owner.
JOB_KEEP_SECONDS: Final = 3600.0
#: The jobs' file, in the server's data folder.
JOBS_FILE: Final = "jobs.sqlite"
# Finished jobs kept in all (the oldest go first); running ones are bounded by the write
# queue (server.max_queued_writes).
_MAX_KEPT: Final = 1000
_SCHEMA: Final = 1
_COLUMNS: Final = "key, owner, kind, started, state, status, body, finished, store"


@dataclass(frozen=True)
class StoreStage:
    """Where an upload's file goes, noted once its store begins: enough to tell, after a
    restart, whether the file landed (``target`` holds bytes of ``sha256``)."""

    target: str  # the file's path on the server (never shown)
    shown: str  # how messages name it ('a.pdf' in corpus 'docs')
    sha256: str
    new: bool  # no file was there before


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
    store: StoreStage | None = None
    #: What the file and the lookups know it by: the id's SHA-256 (the id is a secret).
    key: str = ""

    def __post_init__(self) -> None:
        self.key = self.key or _key(self.id)

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


@dataclass
class UploadLink:
    """Ties an upload's work to its job, which may not exist yet when its store begins:
    set in :data:`current_upload` before the work's task starts (the task and its worker
    threads see the same link)."""

    job: Job | None = None
    store: StoreStage | None = None


#: The link of the upload running in this context (None outside one).
current_upload: contextvars.ContextVar[UploadLink | None] = contextvars.ContextVar(
    "guaipeca_upload", default=None
)

#: Given a job a previous process left running, returns the error it ends with.
Interrupted = Callable[[Job], str]


def _key(job_id: str) -> str:
    return hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()


class Jobs:
    """The jobs of this server, by id: in memory, and in ``path`` when given (see the
    module's docstring). The file is opened at the first use, so a server that never
    answers 202 (stdio) makes none."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        interrupted: Interrupted | None = None,
        keep_seconds: float = JOB_KEEP_SECONDS,
    ) -> None:
        self.keep_seconds = keep_seconds
        self._path = path
        self._interrupted = interrupted
        self._jobs: OrderedDict[str, Job] = OrderedDict()  # by key, oldest finished first
        self._lock = threading.RLock()
        self._file: _JobFile | None = None
        self._opened = path is None

    def start(self, owner: str, kind: str, link: UploadLink | None = None) -> Job:
        """A new running job of ``owner``'s (tied to ``link``'s upload, when given)."""
        with self._lock:
            self._open()
            self._forget_old()
            job = Job(secrets.token_urlsafe(12), owner, kind)
            if link is not None:
                job.store, link.job = link.store, job
            self._jobs[job.key] = job
            self._write(lambda f: f.put(job))
            return job

    def storing(self, stage: StoreStage) -> None:
        """Note that the current upload (:data:`current_upload`) begins to store its file,
        so that a restart can tell what became of it. Called from the store's thread."""
        link = current_upload.get()
        if link is None:
            return
        with self._lock:
            link.store = stage
            job = link.job
            if job is not None and job.state == "running":
                job.store = stage
                self._write(lambda f: f.put(job))

    def finish(self, job: Job, status: int, body: dict[str, Any]) -> None:
        """Record ``job``'s outcome: the HTTP status and JSON body of its answer."""
        with self._lock:
            job.state = "done" if status < 400 else "failed"
            job.status, job.body, job.finished = status, body, time.time()
            if job.key in self._jobs:
                self._jobs.move_to_end(job.key)  # the most recently finished are kept longest
            self._write(lambda f: f.put(job))

    def get(self, job_id: str, owner: str) -> Job | None:
        """``owner``'s job ``job_id``, or None (unknown, expired or someone else's)."""
        with self._lock:
            self._open()
            self._forget_old()
            job = self._jobs.get(_key(job_id))
            # As bytes: compare_digest refuses str with non-ASCII characters (a JWT subject
            # may have them).
            if job is None or not secrets.compare_digest(job.owner.encode(), owner.encode()):
                return None
            job.id = job_id  # a job read back from the file knows only its key
            return job

    def running(self) -> int:
        with self._lock:
            return sum(1 for j in self._jobs.values() if j.state == "running")

    @property
    def persistent(self) -> bool:
        """True while jobs are written to the file."""
        with self._lock:
            self._open()
            return self._file is not None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- the file ----------------------------------------------------------------------
    def _open(self) -> None:
        """Open the file once: end the jobs a previous process left running, drop the
        expired ones, and load the rest."""
        if self._opened or self._path is None:
            return
        self._opened = True
        try:
            jobs = _JobFile(self._path)
        except (OSError, sqlite3.Error) as exc:
            self._give_up(exc)
            return
        try:
            jobs.prune(time.time() - self.keep_seconds, _MAX_KEPT)
            for job in jobs.load():
                if job.state == "running" and jobs.alone:
                    job.state, job.status, job.finished = "failed", 503, time.time()
                    job.body = {"error": self._end_interrupted(job)}
                    jobs.put(job)
                self._jobs[job.key] = job
        except (OSError, sqlite3.Error, ValueError, TypeError) as exc:  # also a damaged row
            jobs.close()
            self._give_up(exc)
            return
        self._file = jobs

    def _end_interrupted(self, job: Job) -> str:
        fallback = "the server restarted before the upload ended; send it again"
        if self._interrupted is None:
            return fallback
        try:
            return self._interrupted(job)
        except Exception:  # telling what became of the file must not stop the server
            log.exception("jobs: cannot tell what became of an interrupted upload")
            return fallback

    def _write(self, change: Callable[[_JobFile], None]) -> None:
        if self._file is None:
            return
        try:
            change(self._file)
        except (OSError, sqlite3.Error) as exc:
            self._file.close()
            self._file = None
            self._give_up(exc)

    def _give_up(self, exc: BaseException) -> None:
        log.warning(
            "jobs: cannot write %s (%s); jobs are kept in memory only from now on, "
            "and a restart forgets them",
            self._path,
            exc,
        )

    def _forget_old(self) -> None:
        now = time.time()
        gone: list[str] = []
        done = [j for j in self._jobs.values() if j.finished is not None]
        # Oldest finished first (loaded jobs, then this process's, in finishing order).
        done.sort(key=lambda j: j.finished or 0.0)
        for job in done[: max(0, len(done) - _MAX_KEPT)]:
            gone.append(job.key)
        for job in done[len(gone) :]:
            if job.finished is not None and now - job.finished <= self.keep_seconds:
                break
            gone.append(job.key)
        for key in gone:
            del self._jobs[key]
        if gone:
            self._write(lambda f: f.delete(gone))


class _JobFile:
    """The jobs' SQLite file. ``alone`` is True when no other live server uses it (a lock
    on ``<file>.lock``, held for the process's life): only then are its running jobs ours
    to end at start."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:  # alone now? then the running jobs in the file are a dead process's
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.alone = True
            except BlockingIOError:
                self.alone = False
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)  # tell later servers we are here
            # Owners and answers are nobody else's business (SQLite's journal copies the mode).
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except BaseException:
            os.close(self._lock_fd)
            raise
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA:
                raise sqlite3.DatabaseError(f"schema {version} is newer than this server")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS jobs (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                "kind TEXT NOT NULL, started REAL NOT NULL, state TEXT NOT NULL, "
                "status INTEGER NOT NULL, body TEXT NOT NULL, finished REAL, store TEXT)"
            )
            self._db.execute(f"PRAGMA user_version = {_SCHEMA}")
        except BaseException:
            self.close()
            raise

    def load(self) -> Iterator[Job]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM jobs ORDER BY finished IS NULL, finished, started"
        ).fetchall()
        for key, owner, kind, started, state, status, body, finished, store in rows:
            stage = StoreStage(**json.loads(store)) if store else None
            body = json.loads(body)
            yield Job("", owner, kind, started, state, status, body, finished, stage, key)

    def put(self, job: Job) -> None:
        store = json.dumps(job.store.__dict__) if job.store else None
        self._db.execute(
            f"INSERT OR REPLACE INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.key,
                job.owner,
                job.kind,
                job.started,
                job.state,
                job.status,
                json.dumps(job.body),
                job.finished,
                store,
            ),
        )

    def delete(self, keys: list[str]) -> None:
        self._db.executemany("DELETE FROM jobs WHERE key = ?", [(k,) for k in keys])

    def prune(self, before: float, keep: int) -> None:
        """Drop finished jobs older than ``before``, and all but the newest ``keep``."""
        self._db.execute("DELETE FROM jobs WHERE finished IS NOT NULL AND finished < ?", (before,))
        self._db.execute(
            "DELETE FROM jobs WHERE finished IS NOT NULL AND key NOT IN "
            "(SELECT key FROM jobs WHERE finished IS NOT NULL ORDER BY finished DESC LIMIT ?)",
            (keep,),
        )

    def close(self) -> None:
        self._db.close()
        os.close(self._lock_fd)  # the lock goes with it
