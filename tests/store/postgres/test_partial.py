"""Partial results from a sharded corpus (``storage.postgres.partial_results``): with a shard
down, a search asked for them answers from the live shard and names the lost one, in the
library's hits, on the CLI's stderr and in the MCP search tool's JSON; without them, and for
every write, the lost shard is an error naming it. Real servers: the primary and two
shards, started once per session (tests/store/conftest.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from guaipeca import Index
from guaipeca.cli import main
from guaipeca.config import load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import ShardUnavailableError
from guaipeca.server import Service, build_server
from support.mcp import tool_data
from support.postgres import PASSWORD, PgServer, open_backend, prefix_for, shard_docs
from support.qdrant import NO_PHRASES

pytestmark = pytest.mark.slow  # three servers' worth of set-up on first use

QUERY = "apple report 7 filler"
FILTERS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"n": {"$gte": 12}},
    {"tags": {"$contains": "odd"}},
)


def _open(folder: Path, shards: list[PgServer], *, partial: bool) -> Index:
    backend = open_backend(
        folder,
        shards=tuple(s.dsn() for s in shards),
        partial_results=partial,
        vector_index="auto",  # asks the shards whether an HNSW index exists
    )
    return Index(backend=backend, embedder=HashingEmbedder(64), settings=NO_PHRASES)


def _pks(index: Index, shard: PgServer) -> set[int]:
    """The chunk ids a shard holds."""
    schema = index.store("default").schema  # type: ignore[attr-defined]
    with psycopg.connect(shard.dsn()) as conn:
        return {r[0] for r in conn.execute(f'SELECT chunk_pk FROM "{schema}".chunks')}


def _pk(chunk_id: str) -> int:
    return int(chunk_id.rsplit(":", 1)[1])


@pytest.fixture
def down(pg_shards: list[PgServer]) -> Iterator[list[PgServer]]:
    """Stops the shards a test appends; starts them again after it."""
    stopped: list[PgServer] = []
    yield stopped
    for shard in stopped:
        shard.start()


@pytest.mark.parametrize("lost", [0, 1])
def test_partial_results_come_from_the_live_shard_and_name_the_lost_one(
    tmp_path: Path,
    pg_primary: PgServer,
    pg_shards: list[PgServer],
    down: list[PgServer],
    lost: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="guaipeca")
    index = _open(tmp_path, pg_shards, partial=True)
    index.add_documents(shard_docs())
    strict = _open(tmp_path, pg_shards, partial=False)  # the same corpus, not asking
    live_pks = _pks(index, pg_shards[1 - lost])
    assert live_pks and _pks(index, pg_shards[lost])  # both shards hold chunks
    complete = {
        json.dumps(where): index.search(QUERY, mode="dense", top_k=60, where=where)
        for where in FILTERS
    }
    assert all(not hits.partial and hits.missing_shards == () for hits in complete.values())
    pg_shards[lost].stop("fast")
    down.append(pg_shards[lost])
    name = f"shard {lost + 1} of 2"
    for where in FILTERS:
        for mode in ("dense", "keyword", "hybrid"):
            caplog.clear()
            hits = index.search(QUERY, mode=mode, top_k=10, where=where)
            assert hits.partial, (mode, where)
            tries = [r for r in caplog.records if "answering from the other" in r.getMessage()]
            assert len(tries) == 1  # the search's later reads leave the shard out at once
            assert len(hits.missing_shards) == 1
            missing = hits.missing_shards[0]
            assert missing.startswith(name) and f":{pg_shards[lost].port}/" in missing
            assert PASSWORD not in missing
            assert hits and {_pk(h.chunk_id) for h in hits} <= live_pks, (mode, where)
            if mode == "dense":  # exactly the complete ranking's chunks on the live shard
                whole = complete[json.dumps(where)]
                expected = [(h.chunk_id, h.score) for h in whole if _pk(h.chunk_id) in live_pks]
                assert [(h.chunk_id, h.score) for h in hits] == expected[:10]
            with pytest.raises(ShardUnavailableError) as err:  # not asked: an error
                strict.search(QUERY, mode=mode, top_k=10, where=where)
            assert str(err.value).startswith(f"{name} (PostgreSQL at 127.0.0.1:")
    shaped: list[dict[str, Any]] = [
        {"section_mode": True},
        {"return_mode": "documents"},
        {"budget": 400},
    ]
    for options in shaped:  # the hits' shaping reads chunks too: from the live shard
        hits = index.search(QUERY, **options)
        assert hits and hits.missing_shards and hits.missing_shards[0].startswith(name)
    index.close()
    strict.close()


def test_writes_and_reads_outside_a_search_fail_with_a_shard_down_even_when_partial(
    tmp_path: Path, pg_primary: PgServer, pg_shards: list[PgServer], down: list[PgServer]
) -> None:
    index = _open(tmp_path, pg_shards, partial=True)
    index.add_documents(shard_docs(12))
    before = index.stats().documents
    hit = index.search("pear notes", mode="keyword", top_k=1)[0]
    pg_shards[1].stop("fast")
    down.append(pg_shards[1])
    with pytest.raises(ShardUnavailableError, match=r"^shard 2 of 2 \("):
        index.add_documents(shard_docs(8, first=40))
    with pytest.raises(ShardUnavailableError, match=r"^shard 2 of 2 \("):
        index.delete_document("d01")
    with pytest.raises(ShardUnavailableError, match=r"^shard 2 of 2 \("):
        index.neighbors(hit.chunk_id)  # reads outside a search are never partial
    assert index.stats().documents == before  # nothing written
    pg_shards[1].start()
    down.clear()
    hits = index.search("pear notes", mode="keyword", top_k=50)
    assert not hits.partial and len({h.doc_id for h in hits}) == 12  # whole again
    index.close()


def _config(tmp_path: Path, primary: PgServer, shards: list[PgServer], *, partial: bool) -> str:
    config = tmp_path / f"guaipeca-{partial}.yaml"
    dsns = ", ".join(f"'{s.dsn()}'" for s in shards)
    config.write_text(
        "corpora: [{name: notes, path: notes}]\n"
        f"storage: {{backend: postgres, data_dir: {tmp_path / 'data'}, "
        f"postgres: {{dsn: '{primary.dsn()}', "
        f"schema_prefix: {prefix_for(tmp_path)}, vector_index: exact, "
        f"shards: [{dsns}], partial_results: {str(partial).lower()}}}}}\n"
    )
    return str(config)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_cli_says_on_stderr_which_shard_its_results_miss(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    pg_primary: PgServer,
    pg_shards: list[PgServer],
    down: list[PgServer],
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for doc in shard_docs(12):
        (notes / f"{doc.doc_id}.md").write_text(doc.text)
    partial = _config(tmp_path, pg_primary, pg_shards, partial=True)
    strict = _config(tmp_path, pg_primary, pg_shards, partial=False)
    code, _, err = _cli(capsys, "--config", partial, "index")
    assert code == 0, err
    search = ("search", "apple report", "--mode", "keyword", "--json")
    code, out, err = _cli(capsys, "--config", partial, *search)
    assert code == 0 and "partial" not in err and len(json.loads(out)) == 5
    pg_shards[0].stop("fast")
    down.append(pg_shards[0])
    code, out, err = _cli(capsys, "--config", partial, *search)
    assert code == 0, err
    told = err.splitlines()  # once, however many statements left the shard out
    assert len(told) == 1, err
    assert told[0].startswith("warning: partial results: shard 1 of 2 (PostgreSQL at 127.0.0.1:")
    assert told[0].endswith("did not answer; its chunks are left out") and PASSWORD not in err
    assert json.loads(out)  # stdout stays the hits' JSON
    code, out, err = _cli(capsys, "--config", strict, *search)
    assert code == 1 and "shard 1 of 2" in err and "is not answering" in err and not out


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_search_tools_name_the_shards_their_hits_miss(
    tmp_path: Path, pg_primary: PgServer, pg_shards: list[PgServer], down: list[PgServer]
) -> None:
    (tmp_path / "notes").mkdir()
    loaded = load_settings(
        Path(_config(tmp_path, pg_primary, pg_shards, partial=True)), env={}, cwd=tmp_path
    )
    index = _open(tmp_path, pg_shards, partial=True)
    index.add_documents(shard_docs(12), corpus="notes")
    schema = index.store("notes").schema  # type: ignore[attr-defined]
    with psycopg.connect(pg_shards[0].dsn()) as conn:
        live = {f"notes:{r[0]}" for r in conn.execute(f'SELECT chunk_pk FROM "{schema}".chunks')}
    args = {"query": "apple report", "mode": "hybrid", "where": {"n": {"$gte": 2}}}
    async with Client(build_server(Service(index, loaded))) as client:
        out = tool_data(await client.call_tool("search", args))
        assert out["missing_shards"] == [] and out["count"] == 10
        pg_shards[1].stop("fast")
        down.append(pg_shards[1])
        out = tool_data(await client.call_tool("search", args))
        agent = tool_data(await client.call_tool("keyword_search", {"query": "apple report"}))
        seed = {"chunk_ids": [sorted(live)[0]], "query": "pear notes"}
        related = tool_data(await client.call_tool("find_related", seed))
    for result in (out, agent, related):  # the agentic tools say it too
        assert len(result["missing_shards"]) == 1
        assert result["missing_shards"][0].startswith("shard 2 of 2 (PostgreSQL at 127.0.0.1:")
        assert result["hits"] and {h["chunk_id"] for h in result["hits"]} <= live
    index.close()
