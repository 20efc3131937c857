"""Partial results without a server: the statements rewritten to leave lost shards out, and
the search-scoped list of what a search missed (tests/store/postgres/test_partial.py runs
them against real shards)."""

from __future__ import annotations

import threading

from guaipeca.store import partial
from guaipeca.store.postgres.live import without_shards

S = '"guaipeca_notes"'


def test_only_the_live_shards_partitions_are_named_each_with_its_alias() -> None:
    statement = (
        f"SELECT c.chunk_pk FROM {S}.chunks c JOIN {S}.postings p ON p.chunk_pk = c.chunk_pk "
        f"JOIN {S}.documents d ON d.doc_pk = c.doc_pk, {S}.chunks_shard1 x, {S}.chunk_pk_seq"
    )
    one = without_shards(statement, S, 2, [1])
    assert one == (
        f"SELECT c.chunk_pk FROM {S}.chunks_shard0 c JOIN {S}.postings_shard0 p ON "
        f"p.chunk_pk = c.chunk_pk JOIN {S}.documents d ON d.doc_pk = c.doc_pk, "
        f"{S}.chunks_shard1 x, {S}.chunk_pk_seq"
    )
    two = without_shards(f"SELECT * FROM {S}.chunks c", S, 3, [1])
    assert two == (
        f"SELECT * FROM (SELECT * FROM {S}.chunks_shard0 UNION ALL "
        f"SELECT * FROM {S}.chunks_shard2) c"
    )
    other = '"guaipeca_other".chunks c'
    assert without_shards(other, S, 2, [0]) == other  # another corpus's tables: untouched


def test_missing_parts_are_told_only_to_a_listening_search_in_its_own_thread() -> None:
    partial.report_missing("shard 1 of 2")  # nobody listens: dropped
    assert not partial.listening() and partial.reported() == ()
    elsewhere: list[bool] = []
    with partial.collecting() as missing:
        assert partial.listening()
        partial.report_missing("shard 2 of 2")
        partial.report_missing("shard 2 of 2")  # named once
        thread = threading.Thread(target=lambda: elsewhere.append(partial.listening()))
        thread.start()
        thread.join()
        assert partial.reported() == ("shard 2 of 2",)
    assert missing == ["shard 2 of 2"] and elsewhere == [False]
    assert not partial.listening()
    with partial.collecting() as outer:  # a tool around a search is told what it missed
        partial.report_missing("shard 1 of 2")
        with partial.collecting() as inner:
            partial.report_missing("shard 1 of 2")
            partial.report_missing("shard 2 of 2")
    assert inner == ["shard 1 of 2", "shard 2 of 2"] and outer == inner
