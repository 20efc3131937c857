"""A corpus hash-partitioned over two shard servers through postgres_fdw: search, filters and
deletes give what one server gives, and a lost shard is a clear error naming it. Real
servers: the primary and two shards, started once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import ShardUnavailableError
from support.postgres import PASSWORD, PgServer, open_backend, shard_docs
from support.qdrant import NO_PHRASES

pytestmark = pytest.mark.slow  # four servers' worth of set-up on first use


def _results(index: Index) -> list[list[tuple[str, float]]]:
    out = []
    for mode in ("dense", "keyword", "hybrid"):
        for where in (None, {"n": {"$gte": 12}}, {"tags": {"$contains": "odd"}}):
            hits = index.search("apple report 7 filler", mode=mode, top_k=10, where=where)
            out.append([(h.chunk_id, round(h.score, 5)) for h in hits])
    return out


def _open(folder: Path, shards: list[PgServer]) -> Index:
    backend = open_backend(folder, shards=tuple(s.dsn() for s in shards))
    return Index(backend=backend, embedder=HashingEmbedder(64), settings=NO_PHRASES)


def test_sharded_corpus_answers_as_one_server(
    tmp_path: Path, pg_primary: PgServer, pg_shards: list[PgServer]
) -> None:
    single = Index(
        backend=open_backend(tmp_path / "one"), embedder=HashingEmbedder(64), settings=NO_PHRASES
    )
    sharded = _open(tmp_path / "two", pg_shards)
    for index in (single, sharded):
        index.add_documents(shard_docs())
    assert _results(sharded) == _results(single)
    counts = []
    for shard in pg_shards:  # both shards hold part of the chunks
        import psycopg

        with psycopg.connect(shard.dsn()) as conn:
            schema = f"{sharded.store('default').schema}"  # type: ignore[attr-defined]
            counts.append(conn.execute(f'SELECT count(*) FROM "{schema}".chunks').fetchone()[0])  # type: ignore[index]
    assert all(c > 0 for c in counts) and sum(counts) == sharded.stats().chunks
    for index in (single, sharded):
        assert all(index.delete_document(d) for d in ("d03", "d07", "d11"))
    assert _results(sharded) == _results(single)
    single.close()
    sharded.close()


def test_a_lost_shard_is_a_clear_error_naming_it(
    tmp_path: Path, pg_primary: PgServer, pg_shards: list[PgServer]
) -> None:
    index = _open(tmp_path, pg_shards)
    index.add_documents(shard_docs()[:6])
    pg_shards[1].stop("fast")
    try:
        for mode in ("dense", "keyword"):
            with pytest.raises(ShardUnavailableError) as err:
                index.search("apple report", mode=mode)
            message = str(err.value)
            assert "shard 2 of 2" in message and f":{pg_shards[1].port}/" in message
            assert PASSWORD not in message and "\n" not in message
    finally:
        pg_shards[1].start()
    assert index.search("apple report", mode="keyword")  # back: answers again
    index.close()
