"""``Index.verify()`` finds each kind of disagreement between the catalog, the vectors and
the lexical index (made here on purpose through the stores' own APIs), and passes a healthy
index, in memory and on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guaipeca import Index
from guaipeca.embed import HashingEmbedder


def _index(path: Path | None) -> Index:
    index = Index(path, embedder=HashingEmbedder())
    index.add_documents({f"d{i}": f"# D{i}\n\nriver stone number {i} quartz" for i in range(12)})
    index.delete_document("d3")
    return index


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_healthy_index_passes(on_disk: bool, tmp_path: Path) -> None:
    with _index(tmp_path / "i" if on_disk else None) as index:
        report = index.verify()
        assert report.ok, report.to_dict()
        assert report.corpora[0].documents == 11


def test_a_chunk_missing_from_the_lexical_index(tmp_path: Path) -> None:
    with _index(tmp_path / "i") as index:
        corpus = index.store("default")
        pk = corpus.catalog.all_slots_in_order()[0][0]
        corpus.lexical.delete([pk])
        corpus.lexical.commit()
        problems = index.verify().corpora[0].problems
        assert any("lexical: the index holds 10 chunks, the catalog 11" in p for p in problems)
        assert any("cannot be found by their own words" in p for p in problems)


def test_a_damaged_vector_row(tmp_path: Path) -> None:
    with _index(tmp_path / "i") as index:
        corpus = index.store("default")
        slot = corpus.catalog.live_hashes()[0][0]
        corpus._vectors.write(np.asarray([slot]), np.full((1, 64), 7.0, dtype=np.float32))
        problems = index.verify().corpora[0].problems
        assert problems == ("vectors: 1 of 11 chunk vectors are damaged (not unit vectors)",)


def test_a_zeroed_vector_row(tmp_path: Path) -> None:
    with _index(tmp_path / "i") as index:
        corpus = index.store("default")
        slot = corpus.catalog.live_hashes()[0][0]
        corpus._vectors.write(np.asarray([slot]), np.zeros((1, 64), dtype=np.float32))
        assert not index.verify().ok
    with Index(tmp_path / "i", embedder=HashingEmbedder()) as index:  # reopened: restored
        assert index.verify().ok


def test_catalog_disagreements(tmp_path: Path) -> None:
    with _index(tmp_path / "i") as index:
        catalog = index.store("default").catalog
        catalog._db.execute("UPDATE documents SET chunk_count = 5 WHERE doc_id = 'd1'")
        catalog._db.execute("DELETE FROM free_slots")
        catalog._db.execute("UPDATE documents SET text = 'changed' || text WHERE doc_id = 'd2'")
        problems = "\n".join(index.verify().corpora[0].problems)
        assert "1 documents do not have the chunks they list (d1)" in problems
        assert "vector slots are neither used nor free" in problems
        assert "no longer matches its checksum (d2)" in problems
