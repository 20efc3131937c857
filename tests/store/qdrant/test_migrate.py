"""Migration embedded -> Qdrant or PostgreSQL -> embedded: no re-embedding, same results,
resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca import Index, NewDocument
from guaipeca.store.transfer import migrate_corpus
from support import CountingEmbedder
from support.qdrant import open_index


def _docs() -> list[NewDocument]:
    return [
        NewDocument(
            f"d{i:02d}",
            f"# Title {i}\n\n## Part A\n\napple report {i} "
            + "filler words " * (i % 9)
            + f"\n\n## Part B\n\npear notes {i}",
            metadata={"n": i, "tags": ["x"] if i % 2 else []},
            source_path=f"folder/d{i}.md",
            modified=1_700_000_000.0 + i,
        )
        for i in range(40)
    ]


def _results(index: Index) -> list[list[tuple[str, str, float]]]:
    out = []
    for mode in ("dense", "keyword", "hybrid"):
        for where in (None, {"n": {"$gte": 20}}):
            hits = index.search("apple report 7 filler", mode=mode, top_k=10, where=where)
            out.append([(h.doc_id, h.text, round(h.score, 4)) for h in hits])
    return out


@pytest.fixture(params=["qdrant", "postgres"])
def target_backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_primary")
    return str(request.param)


def test_round_trip_keeps_results_without_embedding(tmp_path: Path, target_backend: str) -> None:
    embedder = CountingEmbedder()
    source = open_index("embedded", tmp_path / "a", embedder=embedder)
    source.add_documents(_docs())
    source.add_documents({"p": "maçãs"}, corpus="pt")
    embedded_before = len(embedder.passages)
    qdrant = open_index(target_backend, tmp_path / "b", embedder=embedder)
    for name in source.corpora:
        qdrant.create_corpus(name, language=source.store(name).language)
        report = migrate_corpus(
            source.store(name), qdrant.store(name), checkpoint=tmp_path / "c1", batch=7
        )
        assert report.skipped == 0
    assert len(embedder.passages) == embedded_before  # nothing was embedded again
    assert _results(qdrant) == _results(source)
    hit = source.search("pear notes 3", top_k=1)[0]
    assert qdrant.get_chunk(hit.chunk_id).text == hit.text  # chunk ids are kept
    assert qdrant.source_states("default") == source.source_states("default")
    back = open_index("embedded", tmp_path / "c", embedder=embedder)
    for name in qdrant.corpora:
        back.create_corpus(name, language=qdrant.store(name).language)
        migrate_corpus(qdrant.store(name), back.store(name), checkpoint=tmp_path / "c2")
    assert _results(back) == _results(source)
    assert back.get_document("d03") == source.get_document("d03")
    # Unchanged documents stay unchanged after the trip (hashes and source state kept).
    assert back.add_documents(_docs()).unchanged == len(_docs())
    assert len(embedder.passages) == embedded_before
    for index in (source, qdrant, back):
        index.close()


def test_an_interrupted_migration_resumes_where_it_stopped(
    tmp_path: Path, target_backend: str
) -> None:
    source = open_index("embedded", tmp_path / "a")
    source.add_documents(_docs())
    target = open_index(target_backend, tmp_path / "b")
    target.create_corpus("default")
    checkpoint = tmp_path / "checkpoint.jsonl"
    calls = []

    def stop_after_two_batches(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate_corpus(
            source.store("default"),
            target.store("default"),
            checkpoint=checkpoint,
            batch=8,
            progress=stop_after_two_batches,
        )
    assert target.stats().documents == 16
    # A torn last line (a crash while appending) is ignored: that batch is copied again.
    with checkpoint.open("a") as fh:
        fh.write('{"corpus": "default", "docs": ["d1')
    report = migrate_corpus(
        source.store("default"), target.store("default"), checkpoint=checkpoint, batch=8
    )
    assert (report.skipped, report.documents) == (16, 24)
    assert target.stats().documents == 40 and target.stats().chunks == source.stats().chunks
    assert _results(target) == _results(source)
    source.close()
    target.close()
