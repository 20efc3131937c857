"""Faults on a real server: kill -9 of the primary while indexing (committed documents stay
whole, a re-run finishes the rest), a connection dropped mid-search (retried once, then a
clear retryable error), and never a password in a message or a log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from guaipeca import Index, NewDocument
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import BackendUnavailableError
from guaipeca.store.postgres.backend import PostgresBackend
from support.postgres import PASSWORD, PgServer, discard, start_server
from support.qdrant import NO_PHRASES


@pytest.fixture(scope="module")
def victim() -> Iterator[PgServer]:
    """A server of this module's own: these tests kill and stop it."""
    server = start_server("victim")
    yield server
    discard(server)


def _index(server: PgServer) -> tuple[Index, PostgresBackend]:
    backend = PostgresBackend(server.dsn(), vector_index="exact", timeout=5)
    return Index(backend=backend, embedder=HashingEmbedder(64), settings=NO_PHRASES), backend


def _doc(i: int) -> NewDocument:
    body = "\n\n".join(f"## Part {j}\n\nrecord {i} section {j} " * 20 for j in range(4))
    return NewDocument(f"doc{i:03d}", f"# Record {i}\n\n{body}")


@pytest.mark.slow
def test_kill_9_while_indexing_keeps_committed_documents_and_a_rerun_finishes(
    victim: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    index, _ = _index(victim)
    docs = [_doc(i) for i in range(240)]  # far more than are written before the kill
    committed: list[str] = []
    failure: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(0, len(docs), 4):  # one transaction per call
                index.add_documents(docs[i : i + 4])
                committed.extend(d.doc_id for d in docs[i : i + 4])
        except BaseException as exc:
            failure.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 60
    while len(committed) < 12 and time.monotonic() < deadline:
        time.sleep(0.01)
    victim.kill9()
    writer.join(60)
    assert failure and isinstance(failure[0], BackendUnavailableError), failure
    assert PASSWORD not in str(failure[0]) and PASSWORD not in caplog.text
    index.close()
    victim.start()
    index, _ = _index(victim)
    stored = {d.doc_id for d in index.list_documents(limit=1000)}
    assert set(committed) <= stored and len(stored) < len(docs)
    for doc_id in stored:  # every stored document is whole: all its chunks are there
        doc = index.get_document(doc_id)
        assert doc.text == next(d.text for d in docs if d.doc_id == doc_id)
        assert len(index.store("default").catalog.document_chunks(doc_id)) == doc.chunk_count
    report = index.add_documents(docs)
    assert report.unchanged == len(stored) and report.added == len(docs) - len(stored)
    assert index.stats().documents == len(docs)
    index.close()


def test_a_dropped_connection_is_retried_once_then_reported(
    victim: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    index, backend = _index(victim)
    index.add_documents({"a": "Alpacas graze on grass and hay."})
    want = index.search("alpacas", top_k=1)[0].chunk_id
    mine = backend.run(
        lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0], read=True
    )
    with psycopg.connect(victim.dsn(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (mine,))
    with caplog.at_level(logging.WARNING, logger="guaipeca"):
        assert index.search("alpacas", top_k=1)[0].chunk_id == want  # the one retry
    assert "retrying" in caplog.text
    victim.stop("fast")
    try:
        with pytest.raises(BackendUnavailableError) as err:
            index.search("alpacas", mode="keyword")
        message = str(err.value)
        assert "is not answering" in message and "retry" in message and "\n" not in message
        assert PASSWORD not in message + caplog.text + repr(backend)
    finally:
        victim.start()
    index.close()
