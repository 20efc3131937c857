"""The binary-quantised dense prefilter: its bit arithmetic, its candidate rule, and its
place in search (exact scores, fresh writes visible at once, same rankings on disk and in RAM)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from guaipeca import Index
from guaipeca.config import EngineSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.store.embedded.binary import candidate_count, hamming, pack_signs, prefilter
from support import beir_corpus


def test_pack_signs_pads_to_whole_words() -> None:
    rows = np.array([[1.0, -1.0, 0.0, 2.0] * 25], dtype=np.float32)  # 100 dims
    signs = pack_signs(rows)
    assert signs.shape == (1, 16)  # 100 bits -> two 64-bit words
    bits = np.unpackbits(signs[0])
    assert bits[:100].tolist() == [1, 0, 0, 1] * 25 and not bits[100:].any()


@given(hnp.arrays(np.float32, (12, 70), elements=st.floats(-1, 1, width=32)))
def test_hamming_counts_differing_signs(rows: np.ndarray) -> None:
    query = rows[0]
    expected = [int(((r > 0) != (query > 0)).sum()) for r in rows]
    assert hamming(pack_signs(rows), query).tolist() == expected


def test_prefilter_keeps_ties_at_the_cut_and_skips_dead_slots() -> None:
    rows = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1], [1, 1]], dtype=np.float32)
    query = np.array([1, 1], dtype=np.float32)
    live = np.array([True, True, True, True, False])
    # Distances 0, 1, 1, 2, (dead). m=2 cuts at distance 1: both ties come in.
    assert prefilter(pack_signs(rows), query, live, 2).tolist() == [0, 1, 2]
    assert prefilter(pack_signs(rows), query, live, 10).tolist() == [0, 1, 2, 3]
    assert candidate_count(10) == 2000 and candidate_count(500) == 10_000


class DenseEmbedder:
    """Hashing vectors through a fixed Gaussian projection: dense like a real model's (sparse
    hashing vectors have few informative signs), with cosine roughly preserved."""

    name = "hashing-projected-384"
    dimension = 384

    def __init__(self) -> None:
        self._inner = HashingEmbedder(128)
        self._proj = np.random.default_rng(7).standard_normal((128, 384)).astype(np.float32)

    def _project(self, vectors: np.ndarray) -> np.ndarray:
        out = np.asarray(vectors, dtype=np.float32) @ self._proj
        norms = np.linalg.norm(out, axis=-1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._project(self._inner.embed_passages(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._project(self._inner.embed_query(text))


def _settings(scan: str) -> EngineSettings:
    base = EngineSettings()
    return base.model_copy(
        update={"search": base.search.model_copy(update={"dense_scan": scan, "candidates": 20})}
    )


@pytest.fixture(scope="module")
def docs() -> dict[str, str]:
    corpus = beir_corpus("scifact", 2600)
    return {doc_id: f"{title}\n\n{text}" for doc_id, (title, text) in corpus.items()}


def test_binary_scan_finds_the_exact_top_hits_with_exact_scores(
    tmp_path: Path, docs: dict[str, str]
) -> None:
    emb = DenseEmbedder()
    exact = Index(tmp_path / "ix", embedder=emb, settings=_settings("exact"))
    exact.add_documents(docs)
    binary = Index(tmp_path / "ix", embedder=emb, settings=_settings("binary"))
    assert exact.stats().chunks > 1.5 * candidate_count(20)  # the prefilter really filters
    queries = ["vitamin D deficiency", "stem cells in the bone marrow", "malaria drug resistance"]
    for q in queries:
        want = exact.search(q, mode="dense", top_k=10)
        got = binary.search(q, mode="dense", top_k=10)
        # Scores are exact; a differing id may only swap with an equally scored one.
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
        assert len({h.chunk_id for h in got} & {h.chunk_id for h in want}) >= 9
    binary.close()
    exact.close()


def test_fresh_writes_reused_slots_and_other_processes_are_seen(
    tmp_path: Path, docs: dict[str, str]
) -> None:
    emb = HashingEmbedder(64)
    first = dict(list(docs.items())[:300])
    writer = Index(tmp_path / "ix", embedder=emb, settings=_settings("binary"))
    writer.add_documents(first)
    assert writer.search("zebrafish fin regeneration", mode="dense")  # builds the sign bits
    writer.add_documents({"new": "Zebrafish fin regeneration after amputation."})
    assert writer.search("zebrafish fin regeneration", mode="dense", top_k=1)[0].doc_id == "new"
    # Delete, then write a different document into the freed slots.
    writer.delete_document("new")
    writer.add_documents({"other": "Honeybee colony collapse and neonicotinoid pesticides."})
    top = writer.search("honeybee colony collapse pesticides", mode="dense", top_k=1)
    assert top[0].doc_id == "other"
    # A second process-like reader sees a write made through the first.
    reader = Index(tmp_path / "ix", embedder=emb, settings=_settings("binary"))
    assert reader.search("honeybee colony collapse", mode="dense", top_k=1)[0].doc_id == "other"
    writer.add_documents({"late": "Tardigrade desiccation tolerance proteins."})
    assert reader.search("tardigrade desiccation", mode="dense", top_k=1)[0].doc_id == "late"
    writer.close()
    reader.close()


def test_disk_and_memory_give_identical_binary_rankings(
    tmp_path: Path, docs: dict[str, str]
) -> None:
    emb = HashingEmbedder(64)
    subset = dict(list(docs.items())[:500])
    disk = Index(tmp_path / "ix", embedder=emb, settings=_settings("binary"))
    ram = Index(embedder=emb, settings=_settings("binary"))
    disk.add_documents(subset)
    ram.add_documents(subset)
    for q in ("insulin resistance", "tumour suppressor genes", "antibiotic use in children"):
        a = [(h.chunk_id, h.score) for h in disk.search(q, mode="hybrid")]
        b = [(h.chunk_id, h.score) for h in ram.search(q, mode="hybrid")]
        assert a == b
    disk.close()
