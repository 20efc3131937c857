"""Property test: any sequence of writes leaves the in-memory and the on-disk index (and a
reopened copy of it) returning identical rankings, with every hit an exact span."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guaipeca import Index
from guaipeca.embed import HashingEmbedder

WORDS = ["alpha", "beta", "gamma", "delta", "river", "stone", "ação", "tax", "law", "cat"]
text = st.lists(st.sampled_from([*WORDS, "\n\n", "## Part\n\n", "# Title\n\n"]), max_size=40).map(
    " ".join
)
op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 7), text, st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 7)),
    st.tuples(st.just("meta"), st.integers(0, 7), st.integers(0, 3)),
    st.tuples(st.just("compact")),
)


def _rankings(index: Index) -> list[list[tuple[str, int, int, float]]]:
    out = []
    for query in ("alpha river", "tax law", "cat", "acao gamma"):
        for mode in ("hybrid", "dense", "keyword"):
            for where in (None, {"v": {"$gte": 2}}):
                hits = index.search(query, top_k=5, mode=mode, where=where)  # type: ignore[arg-type]
                for h in hits:
                    assert index.resolve(h) == h.text
                out.append([(h.doc_id, h.start, h.end, round(h.score, 6)) for h in hits])
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=12))
def test_any_sequence_of_writes_keeps_memory_disk_and_reopened_identical(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    embedder = HashingEmbedder(32)
    with tempfile.TemporaryDirectory() as tmp:
        memory = Index(embedder=embedder)
        disk = Index(Path(tmp) / "idx", embedder=embedder)
        for step in ops:
            for index in (memory, disk):
                if step[0] == "add":
                    index.add_documents({f"d{step[1]}": step[2]}, metadata={"v": step[3]})
                elif step[0] == "delete":
                    index.delete_document(f"d{step[1]}")
                elif step[0] == "meta":
                    if f"d{step[1]}" in {d.doc_id for d in index.list_documents()}:
                        index.update_metadata(f"d{step[1]}", {"v": step[2]})
                else:
                    index.compact()
        if not memory.corpora:
            return
        expected = _rankings(memory)
        assert _rankings(disk) == expected
        assert memory.stats().chunks == disk.stats().chunks
        disk.close()
        with Index(Path(tmp) / "idx", embedder=embedder) as reopened:
            assert _rankings(reopened) == expected
