"""The connection to PostgreSQL (a primary, an optional streaming replica for reads, optional
``postgres_fdw`` shards) and what every corpus shares.

Every thread gets its own connection to each server (psycopg connections serialise their
statements). :meth:`PostgresBackend.run` runs one unit of work in a transaction:

- writes go to the primary and are never retried here (a transaction cut short rolled back;
  the caller re-runs it, e.g. ``guaipeca index`` again);
- reads go to ``read_dsn`` when set. A lost connection is retried once, on a fresh
  connection; a read whose replica does not answer is retried on the primary, so a replica
  restart never fails a search while the primary is up. Then one clear, retryable
  :class:`~guaipeca.errors.BackendUnavailableError`.

Passwords never leave this module: targets are shown by :func:`~.dsn.describe` and every
message from the driver goes through :func:`~.dsn.scrub`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from guaipeca.errors import BackendUnavailableError, ConfigError, GuaipecaError
from guaipeca.store.contract import is_corpus_name, valid_corpus_name
from guaipeca.store.postgres.connection import Conn
from guaipeca.store.postgres.dsn import describe, scrub
from guaipeca.store.postgres.shards import drop_shard_tables, shard_error

if TYPE_CHECKING:
    import psycopg

    from guaipeca.config import PostgresSettings
    from guaipeca.store.postgres.corpus import PostgresCorpus

__all__ = ["PostgresBackend"]

log = logging.getLogger("guaipeca")
T = TypeVar("T")


class _Server:
    """One server's DSN and this process's connections to it (one per thread)."""

    def __init__(self, dsn: str, *, timeout: float, ef_search: int, role: str) -> None:
        self.dsn = dsn
        self.label = f"{describe(dsn)} ({role})"
        self.timeout = timeout
        self.ef_search = ef_search
        self._local = threading.local()
        self._all: list[Conn] = []
        self._guard = threading.Lock()

    def password(self) -> str | None:
        from psycopg.conninfo import conninfo_to_dict

        try:
            return conninfo_to_dict(self.dsn).get("password")  # type: ignore[return-value]
        except Exception:
            return None

    def connection(self) -> Conn:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed:
            return conn
        import psycopg

        ms = int(self.timeout * 1000)
        conn = psycopg.connect(
            self.dsn,
            connect_timeout=max(1, int(self.timeout)),
            options=f"-c statement_timeout={ms} -c hnsw.ef_search={self.ef_search}",
            application_name="guaipeca",
        )
        self._local.conn = conn
        with self._guard:
            self._all.append(conn)
        return conn

    def drop(self) -> None:
        """Forget this thread's connection (after it broke)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):  # already broken
                conn.close()

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()


class PostgresBackend:
    """PostgreSQL with pgvector holding the corpora, one schema each."""

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        read_dsn: str | None = None,
        prefix: str = "guaipeca_",
        vector_index: str = "auto",
        hnsw_threshold: int = 100_000,
        ef_search: int = 100,
        shards: tuple[str, ...] = (),
        partial_results: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self.primary = _Server(dsn, timeout=timeout, ef_search=ef_search, role="primary")
        self.replica = (
            _Server(read_dsn, timeout=timeout, ef_search=ef_search, role="replica")
            if read_dsn
            else None
        )
        self.prefix = prefix
        self.vector_index = vector_index
        self.hnsw_threshold = hnsw_threshold
        self.shards = tuple(shards)
        #: Searches may answer without the shards that do not answer, naming them.
        self.partial_results = partial_results
        self.target = self.primary.label
        self._secrets = tuple(
            p
            for p in (
                self.primary.password(),
                self.replica.password() if self.replica else None,
            )
            if p
        )

    def __repr__(self) -> str:
        replica = f", reads from {self.replica.label}" if self.replica else ""
        return f"PostgresBackend({self.primary.label}{replica})"

    @classmethod
    def from_settings(cls, ps: PostgresSettings) -> PostgresBackend:
        """Connect as ``storage.postgres`` says (no connection is made until first use).

        Raises:
            ConfigError: psycopg is not installed or no DSN is set.
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ConfigError(
                "storage.backend: postgres needs the PostgreSQL extra: "
                "pip install 'guaipeca[postgres]'"
            ) from None
        if ps.dsn is None:
            raise ConfigError("storage.postgres.dsn: set it (or GUAIPECA_POSTGRES_DSN)")
        return cls(
            ps.dsn.get_secret_value(),
            read_dsn=ps.read_dsn.get_secret_value() if ps.read_dsn else None,
            prefix=ps.schema_prefix,
            vector_index=ps.vector_index,
            hnsw_threshold=ps.hnsw_threshold,
            ef_search=ps.ef_search,
            shards=tuple(s.get_secret_value() for s in ps.shards),
            partial_results=ps.partial_results,
            timeout=ps.timeout,
        )

    # -- running work ---------------------------------------------------------------------
    def clean(self, exc: BaseException) -> str:
        """The driver's message, one line, passwords masked."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return scrub(text, *self._secrets)[:300]

    def run(self, work: Callable[[Conn], T], *, read: bool = False) -> T:
        """``work(conn)`` in a transaction on the primary (or, ``read``, on the replica).

        Raises:
            BackendUnavailableError: the server did not answer (reads: twice).
            GuaipecaError: the server refused the statement.
        """
        import psycopg

        servers = [self.replica, self.primary] if read and self.replica else [self.primary]
        attempts = servers if len(servers) > 1 else servers * (2 if read else 1)
        last: Exception | None = None
        for n, server in enumerate(attempts):
            assert server is not None
            try:
                conn = server.connection()
                with conn.transaction():
                    return work(conn)
            except psycopg.Error as exc:
                lost = shard_error(self, exc)
                if lost is not None:
                    raise lost from None
                if not isinstance(exc, psycopg.OperationalError):
                    raise GuaipecaError(
                        f"{server.label} refused the request: {self.clean(exc)}"
                    ) from None
                server.drop()
                last = exc
                if n + 1 < len(attempts):
                    log.warning(
                        "%s: %s; retrying on %s",
                        server.label,
                        self.clean(exc),
                        attempts[n + 1].label,
                    )
        raise BackendUnavailableError(
            f"{attempts[-1].label if attempts[-1] else self.target} is not answering "
            f"({self.clean(last) if last else 'no answer'}); check that it is running and "
            "reachable, then retry"
        ) from None

    def check(self) -> None:
        """One statement on the primary (and the replica), no retries."""
        self.run(lambda conn: conn.execute("SELECT 1").fetchone())
        if self.replica is not None:
            self.run(lambda conn: conn.execute("SELECT 1").fetchone(), read=True)

    # -- corpora --------------------------------------------------------------------------
    def schema(self, corpus: str) -> str:
        return self.prefix + valid_corpus_name(corpus)

    def corpus_names(self) -> list[str]:
        def names(conn: Conn) -> list[str]:
            rows = conn.execute(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name = 'meta' AND starts_with(table_schema, %s)",
                (self.prefix,),
            ).fetchall()
            return [r[0][len(self.prefix) :] for r in rows]

        return sorted(n for n in self.run(names) if is_corpus_name(n))

    def open_corpus(
        self, name: str, *, language: str | None, model: str, dim: int
    ) -> PostgresCorpus:
        from guaipeca.store.postgres.corpus import PostgresCorpus

        return PostgresCorpus(self, name, language=language, model=model, dim=dim)

    def drop_corpus(self, name: str) -> None:
        from psycopg import sql

        schema = self.schema(name)
        drop_shard_tables(self, schema)
        self.run(
            lambda conn: conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
        )

    # -- status ---------------------------------------------------------------------------
    def replication(self) -> dict[str, Any] | None:
        """The replica's lag behind the primary (bytes of WAL not replayed yet, and the
        replay lag in seconds the primary reports); None without a replica.

        Raises:
            BackendUnavailableError: a server does not answer.
        """
        if self.replica is None:
            return None
        current = self.run(
            lambda conn: conn.execute(
                "SELECT pg_current_wal_lsn()::text, "
                "(SELECT EXTRACT(epoch FROM max(replay_lag)) FROM pg_stat_replication)"
            ).fetchone()
        )

        def replayed(conn: Conn) -> Any:
            return conn.execute(
                "SELECT pg_is_in_recovery(), pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())",
                (current[0],),
            ).fetchone()

        assert self.replica is not None
        conn = self.replica.connection()
        try:
            with conn.transaction():
                standby, behind = replayed(conn)
        except Exception as exc:
            self.replica.drop()
            raise BackendUnavailableError(
                f"{self.replica.label} is not answering ({self.clean(exc)})"
            ) from None
        return {
            "replica": self.replica.label,
            "standby": bool(standby),
            "lag_bytes": max(0, int(behind or 0)),
            "lag_seconds": float(current[1]) if current[1] is not None else 0.0,
        }

    def close(self) -> None:
        self.primary.close()
        if self.replica is not None:
            self.replica.close()


def connect_once(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A plain autocommit connection (DDL that cannot run in a transaction)."""
    import psycopg

    return psycopg.connect(dsn, autocommit=True)
