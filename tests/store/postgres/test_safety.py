"""Passwords stay out of reprs, errors and logs; filter values and field names never reach
the SQL text (checked on the real server: the injection strings match only themselves)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from guaipeca import Index, NewDocument
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import BackendUnavailableError, InvalidFilterError
from guaipeca.store.postgres.backend import PostgresBackend
from guaipeca.store.postgres.dsn import describe, scrub
from guaipeca.store.postgres.filters import compile_pg_where
from support.postgres import PASSWORD, PgServer, free_port, open_backend
from support.qdrant import NO_PHRASES

INJECTIONS = ("x'); DROP TABLE documents; --", "a' OR '1'='1", "%s", "?", "$1", "\\'")


def test_dsns_are_described_without_their_password() -> None:
    url = f"postgresql://guaipeca:{PASSWORD}@db.example:5433/rag"
    assert describe(url) == "PostgreSQL at db.example:5433/rag"
    kv = f"host=db port=5432 dbname=rag user=u password='{PASSWORD}'"
    assert PASSWORD not in describe(kv) and PASSWORD not in scrub(f"failed: {kv}")
    assert scrub(f"see {url}") == "see postgresql://guaipeca:***@db.example:5433/rag"
    assert PASSWORD not in repr(PostgresBackend(url, read_dsn=url))


def test_an_unreachable_server_is_named_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/postgres"
    backend = PostgresBackend(dsn, timeout=2)
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendUnavailableError) as err:
        backend.corpus_names()
    assert "127.0.0.1" in str(err.value) and PASSWORD not in str(err.value) + caplog.text


def test_filter_values_and_names_stay_out_of_the_sql() -> None:
    for value in INJECTIONS:
        text, params = compile_pg_where(
            {"author": value, "info.lang": {"$in": [value]}}, corpus="c"
        )
        assert value in params and (len(value) < 4 or value not in text)  # "%s" is a mark
    with pytest.raises(InvalidFilterError):
        compile_pg_where({"a'); DROP TABLE x; --": 1}, corpus="c")


def test_injection_strings_match_only_themselves(tmp_path: Path, pg_primary: PgServer) -> None:
    index = Index(backend=open_backend(tmp_path), embedder=HashingEmbedder(64), settings=NO_PHRASES)
    index.add_documents(
        [
            NewDocument(f"d{i}", f"note {i} words", metadata={"author": v})
            for i, v in enumerate(INJECTIONS)
        ]
    )
    for i, value in enumerate(INJECTIONS):
        for where in ({"author": value}, {"author": {"$contains": value}}, {"doc_id": value}):
            hits = index.search("note words", mode="keyword", top_k=20, where=where)
            expected = {f"d{i}"} if "author" in where else set()
            if "$contains" in str(where):  # a substring may sit inside another value
                assert f"d{i}" in {h.doc_id for h in hits}
            else:
                assert {h.doc_id for h in hits} == expected
    assert index.stats().documents == len(INJECTIONS)  # nothing dropped
    index.close()
