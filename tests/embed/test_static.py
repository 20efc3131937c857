"""The static (model2vec-format) embedder: the bundled model for real, and a folder built here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from guaipeca.config import EmbeddingSettings
from guaipeca.embed import Embedder, load_embedder
from guaipeca.embed.languages import model_fusion_weight
from guaipeca.embed.safetensors import read_safetensors, write_safetensors
from guaipeca.embed.static import DEFAULT_STATIC_MODEL_NAME, STATIC_FUSION_WEIGHT, StaticEmbedder
from guaipeca.errors import ConfigError, ModelError
from support.embed import assert_batch_equals_one_by_one

BUNDLED = Path(__file__).parents[2] / "src/guaipeca/data/static-minilm"
GOLDEN_TEXT = "Guaipeca indexes documents on one CPU."
# First 6 dimensions of GOLDEN_TEXT under the shipped static model (int8 rows x per-token
# scales, mean, L2), computed once with this code. A change means stored indexes drift.
GOLDEN_HEAD = [-0.060253, 0.222139, 0.227785, 0.074981, -0.030386, 0.042894]

TEXTS = [
    "short",
    "",
    "A somewhat longer sentence about rivers, fish and the guaipeca.",
    "word " * 800,  # beyond 512 tokens
    "Überprüfung der Einträge — naïve café, 東京, emoji 🐟.",
    "tab\tnew\nline\rreturn and a\x00nul, a\x0cform feed, \x1fa unit separator",
    "x" * 150 + " overlong-word-beyond-wordpiece's-100-characters",
    "A informação é útil: ação, coração, São Paulo.",
    "[CLS] literal special tokens [SEP] [UNK] in text",
    *[f"numbered passage {i} about topic {i % 3}" for i in range(12)],
]


@pytest.fixture(scope="module")
def model() -> StaticEmbedder:
    return StaticEmbedder()


def test_bundled_model_identity(model: StaticEmbedder) -> None:
    assert isinstance(model, Embedder)
    assert model.name == DEFAULT_STATIC_MODEL_NAME
    assert model.dimension == 256
    config = json.loads((BUNDLED / "config.json").read_text())
    assert config["model_type"] == "model2vec" and config["normalize"] is True
    # A few MB of package data: int8 rows plus a float32 scale per token.
    assert (BUNDLED / "model.safetensors").stat().st_size < 10_000_000


def test_golden_vector(model: StaticEmbedder) -> None:
    np.testing.assert_allclose(model.embed_query(GOLDEN_TEXT)[:6], GOLDEN_HEAD, atol=1e-5)


def test_vectors_are_unit_length_float32_and_never_zero(model: StaticEmbedder) -> None:
    vectors = model.embed_passages(TEXTS)
    assert vectors.shape == (len(TEXTS), 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.embed_passages([]).shape == (0, 256)


def test_batch_equals_one_by_one_exactly(model: StaticEmbedder) -> None:
    # Each text is pooled on its own, rows added in order: not close, identical (atol 0).
    together, _ = assert_batch_equals_one_by_one(model, TEXTS, atol=0)
    assert np.array_equal(model.embed_query(TEXTS[2]), together[2])


def test_deterministic_across_loads(model: StaticEmbedder) -> None:
    again = StaticEmbedder()
    assert np.array_equal(model.embed_passages(TEXTS), again.embed_passages(TEXTS))


def test_word_cache_gives_the_tokenizers_own_ids(model: StaticEmbedder) -> None:
    # The fast path (per-word ids, ASCII normalised in Python) must equal the tokenizer's
    # whole-text output, unknown pieces dropped, on every kind of text: the property the
    # vectors rest on. The second pass runs on a warm cache.
    reference = Tokenizer.from_file(str(BUNDLED / "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    unk = reference.token_to_id("[UNK]")
    texts = [
        *TEXTS,
        "MiXeD CaSe and Ünïcödé",
        "ｆｕｌｌｗｉｄｔｈ",
        "a\u00a0b\u2003c\u3000d",
        "e.g., U.S.A. (1999)--x_y@z.com #tag $5.00 ~50% a/b\\c 'q' \"dq\" [b]{c}<d>|e^f`g",
        "IL-6/IL-10 ratio (p<0.05); TNF-α ↑ 2-fold — « guillemets » ¿qué? 「括弧」",
    ]
    for _ in range(2):
        fast = model._token_ids(texts)
        for text, ids in zip(texts, fast, strict=True):
            want = [i for i in reference.encode(text, add_special_tokens=False).ids if i != unk]
            assert ids.tolist() == want[:512], text


def test_meaning(model: StaticEmbedder) -> None:
    query = model.embed_query("vaccine side effects")
    vaccine, stocks = model.embed_passages(
        ["Adverse reactions after immunisation were mild.", "Share prices fell on Monday."]
    )
    assert float(query @ vaccine) > float(query @ stocks)


def test_long_text_is_cut_at_512_tokens(model: StaticEmbedder) -> None:
    long = "alpha beta " * 600
    a, b = model.embed_passages([long, long + " and a different ending never seen"])
    assert np.array_equal(a, b)


def test_works_without_network() -> None:
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {probe.stderr.strip()}")
    code = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(("1.1.1.1", 443), timeout=2)
        except OSError:
            pass
        else:
            raise SystemExit("network is reachable: the test proves nothing")
        from guaipeca.embed.static import StaticEmbedder
        vector = StaticEmbedder().embed_query({GOLDEN_TEXT!r})
        print(" ".join(f"{{x:.6f}}" for x in vector[:6]))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose([float(x) for x in done.stdout.split()], GOLDEN_HEAD, atol=1e-5)


# -- any model2vec folder ----------------------------------------------------------------------


def _word_level_folder(tmp_path: Path, **tensors: np.ndarray) -> Path:
    """A tiny model2vec folder: a whitespace word-level tokenizer over five words."""
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0, "red": 1, "green": 2, "blue": 3, "fish": 4}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tiny-m2v"
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": True}))
    return folder


def test_a_model2vec_folder_loads_and_pools_as_specified(tmp_path: Path) -> None:
    table = np.array([[9, 9, 9], [1, 0, 0], [0, 2, 0], [0, 0, 3], [1, 1, 0]], dtype=np.float16)
    folder = _word_level_folder(tmp_path, embeddings=table)
    model = StaticEmbedder(folder)
    assert model.name == "static:tiny-m2v" and model.dimension == 3
    # "red fish zebra": zebra is unknown and dropped; mean of rows 1 and 4, normalised.
    expected = (table[1] + table[4]).astype(np.float32) / 2
    np.testing.assert_allclose(
        model.embed_query("red fish zebra"), expected / np.linalg.norm(expected), atol=1e-6
    )
    # Nothing known: the unknown token's row stands in (never a zero vector).
    np.testing.assert_allclose(model.embed_query("zebra"), np.ones(3) / np.sqrt(3), atol=1e-6)


def test_weights_and_mapping_tensors_are_applied(tmp_path: Path) -> None:
    # Vocabulary quantisation: 5 token ids share 3 rows; weights scale each token id.
    rows = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.int8)
    mapping = np.array([0, 0, 1, 2, 1], dtype=np.int64)
    weights = np.array([1.0, 1.0, 3.0, 0.5, 1.0], dtype=np.float32)
    folder = _word_level_folder(tmp_path, embeddings=rows, mapping=mapping, weights=weights)
    vector = StaticEmbedder(folder).embed_query("green blue")
    expected = (3.0 * np.array([0, 1]) + 0.5 * np.array([1, 1])) / 2
    np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)


def test_provider_setting_selects_the_static_model(tmp_path: Path) -> None:
    bundled = load_embedder(EmbeddingSettings(provider="static"))
    assert isinstance(bundled, StaticEmbedder) and bundled.name == DEFAULT_STATIC_MODEL_NAME
    copy = tmp_path / "my-potion"
    shutil.copytree(BUNDLED, copy)
    folder = load_embedder(EmbeddingSettings(provider="static", model=str(copy)))
    assert folder.name == "static:my-potion"
    assert np.array_equal(folder.embed_query("fish"), bundled.embed_query("fish"))
    with pytest.raises(ConfigError, match=r"embedding\.dimensions: 384"):
        load_embedder(EmbeddingSettings(provider="static", dimensions=384))
    with pytest.raises(ModelError, match=r"embedding\.model"):
        load_embedder(EmbeddingSettings(provider="static", model=str(tmp_path / "nope")))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("no-model", "lacks model.safetensors"),
        ("truncated", "does not fit its byte range"),
        ("not-safetensors", "not a safetensors file"),
        ("wrong-tensor", "no 2-D 'embeddings' tensor"),
        ("short-table", "tokenizer does not belong"),
    ],
)
def test_broken_folders_fail_with_one_clear_line(tmp_path: Path, damage: str, message: str) -> None:
    folder = _word_level_folder(tmp_path, embeddings=np.ones((5, 4), dtype=np.float32))
    target = folder / "model.safetensors"
    if damage == "no-model":
        target.unlink()
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[:-8])
    elif damage == "not-safetensors":
        target.write_bytes(b"\xff" * 64)
    elif damage == "wrong-tensor":
        write_safetensors(target, {"other": np.ones((5, 4), dtype=np.float32)})
    else:
        write_safetensors(target, {"embeddings": np.ones((3, 4), dtype=np.float32)})
    with pytest.raises(ModelError, match=message) as info:
        StaticEmbedder(folder)
    assert "\n" not in str(info.value)


def test_safetensors_round_trip(tmp_path: Path) -> None:
    tensors = {
        "a": np.arange(12, dtype=np.float16).reshape(3, 4),
        "b": np.array([-1, 0, 7], dtype=np.int8),
        "c": np.zeros((0, 2), dtype=np.float32),
    }
    write_safetensors(tmp_path / "t.safetensors", tensors, {"format": "np"})
    back = read_safetensors(tmp_path / "t.safetensors")
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)


def test_an_index_on_disk_searches_with_the_static_model(
    tmp_path: Path, model: StaticEmbedder
) -> None:
    from guaipeca.index import Index

    docs = {
        "fish": "# Rivers\n\nThe guaipeca is a small fish of southern Brazilian rivers.",
        "tax": "# Taxes\n\nIncome tax returns are due at the end of April.",
        "bread": "# Baking\n\nSourdough bread needs a starter, flour, water and time.",
    }
    with Index(tmp_path / "idx", embedder=model) as index:
        index.add_documents(docs)
        dense = index.search("freshwater species in Brazil", mode="dense", top_k=1)
        hybrid = index.search("when are income taxes due", mode="hybrid", top_k=1)
    assert dense[0].doc_id == "fish"
    assert hybrid[0].doc_id == "tax"
    with Index(tmp_path / "idx", embedder=StaticEmbedder()) as reopened:
        assert reopened.search("sourdough starter", mode="dense", top_k=1)[0].doc_id == "bread"


# -- the fusion weight a model carries ---------------------------------------------------------


def test_the_fusion_weight_is_read_from_the_folders_config(tmp_path: Path) -> None:
    assert StaticEmbedder().fusion_weight == STATIC_FUSION_WEIGHT == 0.1  # the bundled folder
    folder = _word_level_folder(tmp_path, embeddings=np.eye(5, dtype=np.float32))
    assert StaticEmbedder(folder).fusion_weight == STATIC_FUSION_WEIGHT  # none declared
    config = folder / "config.json"
    config.write_text(json.dumps({"normalize": True, "fusion_weight": 0.35}))
    model = StaticEmbedder(folder)
    assert model.fusion_weight == 0.35
    assert model_fusion_weight(model) == 0.35
    config.write_text(json.dumps({"fusion_weight": None}))
    assert StaticEmbedder(folder).fusion_weight == STATIC_FUSION_WEIGHT
    for bad in (-0.1, 1.5, "high", True, [0.5]):
        config.write_text(json.dumps({"fusion_weight": bad}))
        with pytest.raises(ModelError, match=r"config\.json: fusion_weight must be") as info:
            StaticEmbedder(folder)
        assert "\n" not in str(info.value)


def test_models_that_declare_no_fusion_weight_get_full_weight() -> None:
    from guaipeca.embed.hashing import HashingEmbedder

    assert model_fusion_weight(HashingEmbedder(16)) == 1.0


def _noise_folder(tmp_path: Path) -> Path:
    """The bundled model's tokenizer over a table of random vectors: a useless dense side."""
    folder = tmp_path / "noise-m2v"
    folder.mkdir()
    shutil.copyfile(BUNDLED / "tokenizer.json", folder / "tokenizer.json")
    rows = Tokenizer.from_file(str(BUNDLED / "tokenizer.json")).get_vocab_size(True)
    table = np.random.default_rng(7).standard_normal((rows, 16)).astype(np.float32)
    write_safetensors(folder / "model.safetensors", {"embeddings": table})
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec"}))
    return folder


NOISE_DOCS = {
    f"d{i}": text
    for i, text in enumerate(
        [
            "The guaipeca is a small fish of southern Brazilian rivers.",
            "Income tax returns are due at the end of April.",
            "Sourdough bread needs a starter, flour, water and time.",
            "River fish migrate upstream to spawn in spring.",
            "A tax on bread was repealed after the riots.",
            "Flour mills on the river ground wheat for the town.",
            "Spring floods carried the mill wheel away.",
            "Small fish hide among the reeds of slow rivers.",
            "The town raised a tax on flour to rebuild the mill.",
            "Bread and fish were sold at the market by the river.",
        ]
    )
}


def test_hybrid_with_a_useless_static_model_keeps_the_keyword_ranking_on_top(
    tmp_path: Path,
) -> None:
    """End to end: an index whose static model is noise. At the model's fusion weight (the
    static default), every hybrid search starts with keyword search's first hit and ranks
    every keyword hit above what keyword search did not find; the index fuses exactly by the
    library's rule. ``embedding.fusion_weight`` overrides the model's own weight."""
    from guaipeca.config import EngineSettings
    from guaipeca.index import Index
    from guaipeca.search.fusion import rrf_weights, weighted_rrf

    noise = StaticEmbedder(_noise_folder(tmp_path))
    assert noise.fusion_weight == STATIC_FUSION_WEIGHT
    queries = ["small fish", "tax on flour", "river mill", "bread market", "spring"]
    for override, factor in ((None, STATIC_FUSION_WEIGHT), (1.0, 1.0)):
        settings = EngineSettings.model_validate({"embedding": {"fusion_weight": override}})
        with Index(embedder=noise, settings=settings) as index:
            index.add_documents(NOISE_DOCS)
            for query in queries:
                run = {
                    # the rank fusion fusion auto gives a weak model's list, asked for by
                    # name so the full-weight case checks the same rule
                    mode: [
                        h.chunk_id for h in index.search(query, mode=mode, top_k=10, fusion="rrf")
                    ]
                    for mode in ("dense", "keyword", "hybrid")
                }
                pk = {c: int(c.rpartition(":")[2]) for c in run["dense"] + run["keyword"]}
                w_dense, w_bm25 = rrf_weights(1.0, 1.5, factor)
                expected = weighted_rrf(
                    [
                        ([pk[c] for c in run["dense"]], w_dense),
                        ([pk[c] for c in run["keyword"]], w_bm25),
                    ],
                    k=10.0,
                )
                assert [pk[c] for c in run["hybrid"]] == [p for p, _ in expected][:10]
                if override is None:
                    assert run["hybrid"][0] == run["keyword"][0]
                    found = set(run["keyword"])
                    assert run["hybrid"][: len(found)] == [c for c in run["hybrid"] if c in found]
