"""HashingEmbedder: the model-free stand-in used by tests of the layers above embedding."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from guaipeca.embed import Embedder, HashingEmbedder
from guaipeca.errors import InvalidArgumentError


def test_protocol_and_shapes() -> None:
    emb = HashingEmbedder()
    assert isinstance(emb, Embedder)
    assert emb.dimension == 64
    assert emb.name == "hashing-64"
    out = emb.embed_passages(["one", "two three"])
    assert out.shape == (2, 64)
    assert out.dtype == np.float32
    assert emb.embed_query("one").shape == (64,)
    empty = emb.embed_passages([])
    assert empty.shape == (0, 64)
    assert empty.dtype == np.float32


def test_normalised_and_zero_for_empty() -> None:
    emb = HashingEmbedder(dimension=16)
    rows = emb.embed_passages(["The cat sat on the mat.", "x", "", "  ...  "])
    np.testing.assert_allclose(np.linalg.norm(rows[:2], axis=1), 1.0, atol=1e-6)
    assert not rows[2].any()
    assert not rows[3].any()
    assert rows.dtype == np.float32


def test_deterministic_within_and_across_processes() -> None:
    text = "Guaipeca indexes documents on one CPU."
    emb = HashingEmbedder()
    here = emb.embed_query(text)
    np.testing.assert_array_equal(here, HashingEmbedder().embed_query(text))
    np.testing.assert_array_equal(here, emb.embed_passages([text])[0])
    # A different PYTHONHASHSEED would change hash(); blake2b must not care.
    code = (
        "from guaipeca.embed import HashingEmbedder\n"
        f"print(HashingEmbedder().embed_query({text!r}).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    assert out == here.tobytes().hex()


def test_similar_texts_are_closer() -> None:
    emb = HashingEmbedder()
    query, near, far = emb.embed_passages(
        [
            "indexing documents on a CPU",
            "Guaipeca indexes documents on one CPU",
            "the orchestra played a symphony by Brahms",
        ]
    )
    assert float(query @ near) > float(query @ far) + 0.2


def test_case_insensitive() -> None:
    emb = HashingEmbedder()
    np.testing.assert_array_equal(emb.embed_query("Hello World"), emb.embed_query("hello world"))


def test_rejects_bad_input() -> None:
    with pytest.raises(InvalidArgumentError):
        HashingEmbedder(dimension=0)
    with pytest.raises(InvalidArgumentError):
        HashingEmbedder().embed_passages("a string")
