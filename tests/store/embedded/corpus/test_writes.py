"""The corpus's write path (store/embedded/corpus/writes.py): slots freed by a delete are
written again by the next write."""

from __future__ import annotations

from pathlib import Path

from guaipeca import Index
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
