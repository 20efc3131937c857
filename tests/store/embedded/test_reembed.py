"""Model identity per corpus, opening with another model, per-corpus models, and reembed
(resumable after kill -9, keyword search meanwhile, one atomic swap)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from guaipeca import Index
from guaipeca.embed import HashingEmbedder, identity_of
from guaipeca.errors import ModelError
from guaipeca.store.embedded.migrations import m005_vector_identity
from guaipeca.store.embedded.reembed import PROGRESS_FILE, WORK_FILE

DOCS = {f"d{i:03d}": f"document {i} about topic{i % 7} and subject{i % 5} words" for i in range(80)}


def _ranking(index: Index, query: str, mode: str) -> list[str]:
    return [h.doc_id for h in index.search(query, mode=mode, top_k=10)]  # type: ignore[arg-type]


def test_a_corpus_records_the_identity_of_its_vectors(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents({"a": "text"})
        (stats,) = index.stats().corpora
        assert stats.model == "custom hashing-64 (64-d)" and stats.model_mismatch is None
    db = sqlite3.connect(tmp_path / "idx/corpora/default/catalog.sqlite")
    row = db.execute("SELECT provider, model, dimension, query_prefix FROM vector_identity")
    assert row.fetchone() == ("custom", "hashing-64", 64, "")
    db.close()


def test_another_model_is_one_line_naming_both_and_the_fix_and_keyword_still_works(
    tmp_path: Path,
) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
        keyword = _ranking(index, "topic3 subject2", "keyword")
    with Index(tmp_path / "idx", embedder=HashingEmbedder(48)) as index:
        message = index.mismatched_corpora["default"]
        assert message == (
            "corpus 'default' holds vectors of custom hashing-64 (64-d), but the configured "
            "model is custom hashing-48 (48-d); run 'guaipeca reembed default' (keyword search "
            "works meanwhile) or set the corpus's embedding back"
        )
        assert index.broken_corpora == {}
        assert _ranking(index, "topic3 subject2", "keyword") == keyword
        for mode in ("hybrid", "dense"):
            with pytest.raises(ModelError, match="reembed default"):
                index.search("topic3", mode=mode)  # type: ignore[arg-type]
        with pytest.raises(ModelError, match="reembed default"):
            index.add_documents({"new": "more text"})
        (stats,) = index.stats().corpora
        assert stats.model_mismatch == message and stats.model.startswith("custom hashing-64")


def test_reembed_swaps_to_the_new_model_and_matches_a_fresh_index(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
        index.delete_document("d079")  # a freed slot at the top of the vector file
    new = HashingEmbedder(48)
    with Index(tmp_path / "idx", embedder=new) as index:
        seen: list[tuple[int, int]] = []
        report = index.reembed("default", progress=lambda done, total: seen.append((done, total)))
        assert (report.documents, report.chunks, report.resumed, report.changed) == (
            79,
            79,
            0,
            True,
        )
        assert seen[-1] == (79, 79)
        assert index.mismatched_corpora == {}
        assert _ranking(index, "topic3 subject2", "hybrid")
        dense = [
            (h.doc_id, round(h.score, 5)) for h in index.search("topic3 subject2", mode="dense")
        ]
        index.add_documents({"later": "topic3 subject2 added after the switch"})
        assert index.reembed("default").changed is False
    assert not (tmp_path / f"idx/corpora/default/{WORK_FILE}").exists()
    fresh_docs = {k: v for k, v in DOCS.items() if k != "d079"}
    with Index(tmp_path / "fresh", embedder=HashingEmbedder(48)) as fresh:
        fresh.add_documents(fresh_docs)
        # (keyword statistics differ: the reembedded index still counts its deleted document)
        hits = fresh.search("topic3 subject2", mode="dense")
        assert [(h.doc_id, round(h.score, 5)) for h in hits] == dense
    # Reopened: the new vectors pass the open-time check, the old model is now the stranger.
    with Index(tmp_path / "idx", embedder=HashingEmbedder(48)) as index:
        assert index.mismatched_corpora == {} and index.verify().ok
        assert "later" in _ranking(index, "topic3 subject2 added after", "dense")[:1]
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        assert "hashing-48 (48-d)" in index.mismatched_corpora["default"]


_SLOW_REEMBED = """
import sys, time
from guaipeca import Index
from guaipeca.embed import HashingEmbedder

class Slow(HashingEmbedder):
    def embed_passages(self, texts):
        time.sleep(0.15)
        return super().embed_passages(texts)

with Index(sys.argv[1], embedder=Slow(48, name="hashing-48")) as index:
    index.reembed("default", progress=lambda done, total: print(done, flush=True))
"""


def test_reembed_resumes_after_kill_9_and_keyword_search_works_meanwhile(tmp_path: Path) -> None:
    docs = {f"d{i:04d}": f"document {i} topic{i % 11} words" for i in range(32 * 8)}
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents(docs)
        keyword = _ranking(index, "topic4 document", "keyword")
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(_SLOW_REEMBED))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "idx")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        assert int(proc.stdout.readline()) == 32
        assert int(proc.stdout.readline()) == 64  # two batches done and saved
        # Another process searches by keyword while the run holds the write lock.
        with Index(tmp_path / "idx", embedder=HashingEmbedder(48)) as reader:
            assert _ranking(reader, "topic4 document", "keyword") == keyword
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
    folder = tmp_path / "idx/corpora/default"
    assert (folder / WORK_FILE).exists() and (folder / PROGRESS_FILE).exists()
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        # Killed before the swap: the old vectors are whole and still in charge.
        assert index.mismatched_corpora == {}
        assert _ranking(index, "topic4 document", "dense")
    with Index(tmp_path / "idx", embedder=HashingEmbedder(48)) as index:
        report = index.reembed("default")
        assert report.resumed >= 64 and report.documents == len(docs)
        dense = _ranking(index, "topic4 document", "dense")
    with Index(tmp_path / "fresh", embedder=HashingEmbedder(48)) as fresh:
        fresh.add_documents(docs)
        assert _ranking(fresh, "topic4 document", "dense") == dense


def test_progress_of_another_model_is_not_resumed(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
    folder = tmp_path / "idx/corpora/default"
    (folder / PROGRESS_FILE).write_text('{"identity": "other", "generation": 1, "done_doc_pk": 50}')
    (folder / WORK_FILE).write_bytes(b"junk")
    with Index(tmp_path / "idx", embedder=HashingEmbedder(48)) as index:
        assert index.reembed("default").resumed == 0


def test_a_corpus_written_before_identities_is_upgraded_in_place(tmp_path: Path) -> None:
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        index.add_documents(DOCS)
    path = tmp_path / "idx/corpora/default/catalog.sqlite"
    db = sqlite3.connect(path)
    # As an older Guaipeca left it (no identity table), then the migration's own script.
    db.executescript("DROP TABLE vector_identity;")
    db.executescript(m005_vector_identity())
    assert db.execute("SELECT provider, model, query_prefix FROM vector_identity").fetchone() == (
        None,
        "hashing-64",
        None,
    )
    db.close()
    with Index(tmp_path / "idx", embedder=HashingEmbedder(64)) as index:
        assert index.mismatched_corpora == {}
        assert _ranking(index, "topic3", "hybrid")
    db = sqlite3.connect(path)
    assert db.execute("SELECT provider, model, dimension FROM vector_identity").fetchone() == (
        "custom",
        "hashing-64",
        64,
    )
    db.close()


def test_corpora_on_different_models_search_together(tmp_path: Path) -> None:
    english, portuguese = HashingEmbedder(64), HashingEmbedder(40, name="pt-model")
    with Index(tmp_path / "idx", embedder=english, corpus_embedders={"pt": portuguese}) as index:
        index.add_documents({"en1": "the tax law of 2020", "en2": "a cat on a roof"}, corpus="en")
        index.add_documents({"pt1": "a lei do imposto de 2020", "pt2": "o gato"}, corpus="pt")
        assert identity_of(index.embedder_for("pt")).model == "pt-model"
        models = {c.name: c.model for c in index.stats().corpora}
        assert models == {"en": "custom hashing-64 (64-d)", "pt": "custom pt-model (40-d)"}
        for mode in ("hybrid", "dense"):
            hits = index.search("imposto lei 2020 tax law", mode=mode, top_k=4)  # type: ignore[arg-type]
            assert {h.doc_id for h in hits[:2]} == {"en1", "pt1"}
        assert np.isclose(
            index.search("gato", corpora=["pt"], mode="dense")[0].score,
            float(portuguese.embed_query("gato") @ portuguese.embed_passages(["o gato"])[0]),
            atol=1e-5,
        )
    # Reopened with the English model for every corpus, the Portuguese one is refused densely.
    with Index(tmp_path / "idx", embedder=english) as index:
        assert list(index.mismatched_corpora) == ["pt"]
