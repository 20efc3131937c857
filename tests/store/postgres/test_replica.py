"""Searches on a streaming replica (``read_dsn``): a write shows there within a stated bound,
``status`` reports the lag, and a replica restart never fails a search (or gives a wrong
answer) while the primary is up. Real servers: a primary and its ``pg_basebackup -R`` copy."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import GuaipecaError
from guaipeca.store.postgres.backend import PostgresBackend
from support.postgres import PASSWORD, PgServer, open_backend
from support.qdrant import NO_PHRASES

#: The bound the README states for a write to show on a replica on the same network.
VISIBLE_WITHIN = 5.0


def _index(tmp_path: Path, replica: PgServer) -> tuple[Index, PostgresBackend]:
    backend = open_backend(tmp_path, read_dsn=replica.dsn())
    return Index(backend=backend, embedder=HashingEmbedder(64), settings=NO_PHRASES), backend


def _wait_for(index: Index, query: str, doc_id: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < VISIBLE_WITHIN:
        try:
            hits = index.search(query, mode="keyword", top_k=5)
        except GuaipecaError:  # the corpus's tables have not reached the replica yet
            hits = []
        if any(h.doc_id == doc_id for h in hits):
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"{doc_id} not visible on the replica after {VISIBLE_WITHIN} s")


def test_searches_read_the_replica_and_writes_show_there_in_time(
    tmp_path: Path, pg_primary: PgServer, pg_replica: PgServer
) -> None:
    index, backend = _index(tmp_path, pg_replica)
    on_replica = backend.run(
        lambda conn: conn.execute("SELECT pg_is_in_recovery()").fetchone()[0], read=True
    )
    assert on_replica is True
    index.add_documents({"a": "Alpacas graze on grass."})
    _wait_for(index, "alpacas grass", "a")
    index.add_documents({"b": "Llamas carry loads."})
    assert _wait_for(index, "llamas loads", "b") < VISIBLE_WITHIN
    lag = index.replication()
    assert lag is not None and lag["standby"] is True
    assert lag["lag_bytes"] >= 0 and lag["lag_seconds"] >= 0
    assert "replica" in lag["replica"] and PASSWORD not in repr(lag) + repr(backend)
    index.close()


@pytest.mark.slow
def test_a_replica_restart_falls_back_to_the_primary(
    tmp_path: Path,
    pg_primary: PgServer,
    pg_replica: PgServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    index, _ = _index(tmp_path, pg_replica)
    index.add_documents({"a": "Green tea is steeped at 80 degrees."})
    _wait_for(index, "green tea", "a")
    want = [(h.chunk_id, h.score) for h in index.search("green tea", top_k=3)]
    pg_replica.stop("fast")
    try:
        with caplog.at_level(logging.WARNING, logger="guaipeca"):
            got = [(h.chunk_id, h.score) for h in index.search("green tea", top_k=3)]
        assert got == want  # answered by the primary
        assert "replica" in caplog.text and "retrying on" in caplog.text
        assert PASSWORD not in caplog.text
    finally:
        pg_replica.start()
    _wait_for(index, "green tea", "a")
    index.close()


def test_status_reports_the_replica_lag(
    tmp_path: Path,
    pg_primary: PgServer,
    pg_replica: PgServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from guaipeca.cli import main
    from support.postgres import prefix_for

    config = tmp_path / "guaipeca.yaml"
    config.write_text(
        f"corpora: []\nstorage: {{backend: postgres, data_dir: {tmp_path / 'data'}, "
        f"postgres: {{dsn: '{pg_primary.dsn()}', read_dsn: '{pg_replica.dsn()}', "
        f"schema_prefix: {prefix_for(tmp_path)}}}}}\n"
    )
    assert main(["--config", str(config), "status"]) == 0
    out, err = capsys.readouterr()
    assert "replica  PostgreSQL at 127.0.0.1:" in out and "bytes of WAL behind" in out
    assert PASSWORD not in out + err
    assert main(["--config", str(config), "status", "--json"]) == 0
    lag = json.loads(capsys.readouterr().out)["replication"]
    assert lag["standby"] is True and lag["lag_bytes"] >= 0
