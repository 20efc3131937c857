"""The corpus's write path (store/embedded/corpus/writes.py): slots freed by a delete are
written again by the next write."""

from __future__ import annotations

from pathlib import Path

from guaipeca import Index
from guaipeca.store.embedded.vectors import backup_rows
from support import CountingEmbedder


def test_deleted_slots_are_reused_by_the_next_write(
    tmp_path: Path, counting_embedder: CountingEmbedder
) -> None:
    with Index(tmp_path / "idx", embedder=counting_embedder) as index:
        index.add_documents({f"d{i}": f"document number {i}" for i in range(10)})
        assert index.delete_document("d3") and index.delete_document("d4")
        assert not index.delete_document("d3")
        assert index.stats().corpora[0].deleted_slots == 2
        index.add_documents({"new1": "fresh words", "new2": "more fresh words"})
        assert index.stats().corpora[0].deleted_slots == 0
        assert index.stats().chunks == 10
        assert [h.doc_id for h in index.search("fresh", mode="keyword")] == ["new1", "new2"]
        assert index.search("document number 3", mode="keyword", top_k=1)[0].doc_id != "d3"


DOCS = {f"d{i:02}": f"# Note {i}\n\nA short note on topic {i} and its colour." for i in range(30)}


def test_the_backup_holds_every_vector_once_nothing_is_pending(tmp_path: Path) -> None:
    # Issue 38: after `index --force` of 30 vectors, vectors.backup held none (96 bytes),
    # so a zeroed vector file was embedded again in full.
    path = tmp_path / "idx"
    folder = path / "corpora" / "default"
    with Index(path, embedder=CountingEmbedder()) as index:
        for _ in range(2):  # a first index, then a forced rebuild (the corpus dropped)
            index.drop_corpus("default")
            index.add_documents(DOCS, wait=False)  # the CLI's two phases
            index.embed_pending("default")
            assert backup_rows(folder / "vectors.backup") == 30
        before = [h.chunk_id for h in index.search("topic 7 colour", top_k=5)]
    vectors = folder / "vectors.f32"
    vectors.write_bytes(b"\0" * vectors.stat().st_size)
    again = CountingEmbedder()
    with Index(path, embedder=again) as index:
        assert [h.chunk_id for h in index.search("topic 7 colour", top_k=5)] == before
    assert again.passages == []  # all 30 came from the backup
