"""Reading the original Guaipeca's data folder (compat/original.py) from a fixture built with the
real faiss-cpu: the FAISS header as FAISS wrote it, the text stitched back whole, the backup
used when the index is damaged, and the documents embedded with our model."""

from __future__ import annotations

from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.compat.original import find_original_corpora, import_corpus, read_corpus
from guaipeca.errors import InvalidArgumentError
from support.legacy import ARCS, AUDIT, original_data

faiss = pytest.importorskip("faiss")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return original_data(tmp_path / "old", tmp_path / "docs")


def test_the_header_says_what_faiss_wrote(folder: Path) -> None:
    written = faiss.read_index(str(folder / "faiss_index.fai"))
    corpus = read_corpus(folder)
    assert (corpus.dimension, corpus.vectors) == (written.d, written.ntotal) == (384, 3)
    assert corpus.index_file == folder / "faiss_index.fai" and corpus.problems == []


def test_the_corpora_are_found_from_any_level_of_the_layout(folder: Path) -> None:
    home = folder.parents[2]
    for given in (home, home / "data", home / "data" / "corpora", folder):
        assert find_original_corpora(given) == [folder]
    assert find_original_corpora(home.parent / "docs") == []


def test_a_damaged_index_falls_back_to_its_backup_and_a_count_mismatch_is_said(
    folder: Path,
) -> None:
    (folder / "faiss_index.fai").write_bytes(b"not faiss at all, truncated")
    corpus = read_corpus(folder)
    assert corpus.index_file == folder / "faiss_index.fai.bak"
    assert corpus.problems == ["faiss_index.fai is not a FAISS index"]
    (folder / "faiss_index.fai.bak").unlink()
    assert read_corpus(folder).index_file is None  # the text is still there


def test_metadata_that_is_not_the_originals_is_one_clear_error(folder: Path) -> None:
    (folder / "metadata.json").write_text('{"chunks": 3}')
    with pytest.raises(InvalidArgumentError, match="not the original's list of chunks"):
        read_corpus(folder)


def test_import_keeps_text_and_metadata_and_embeds_with_our_model(
    folder: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    (docs / "close").mkdir(parents=True)
    (docs / "close" / "arcs.txt").write_text(ARCS)  # this one still exists; audit.md not
    with Index(tmp_path / "index") as index:
        report = import_corpus(index, read_corpus(folder), root=docs)
        assert (report.corpus, report.documents, report.chunks) == ("epm-docs", 2, 3)
        assert report.embedded > 0 and index.pending_chunks() == 0
        audit = index.get_document("audit.md", corpus="epm-docs")
        assert audit.text == AUDIT  # the overlap written once
        assert audit.metadata["filename"] == "audit.md" and audit.metadata["page"] == 1
        assert audit.metadata["original_corpus"] == "epm-docs"
        assert audit.source_path is None
        arcs = index.get_document("close/arcs.txt", corpus="epm-docs")
        assert arcs.source_path == str(docs / "close" / "arcs.txt")
        hits = index.search("reconciliations account balances", top_k=1, mode="dense")
        assert hits[0].doc_id == "close/arcs.txt"
