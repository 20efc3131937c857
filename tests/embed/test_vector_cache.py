"""The on-disk passage-vector cache of ``guaipeca eval --vector-cache``: the same vectors as
the model, nothing embedded twice, the model's identity kept, and a damaged cache named."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from guaipeca.embed import HashingEmbedder, identity_of
from guaipeca.embed.base import Vectors
from guaipeca.embed.vector_cache import VectorCache
from guaipeca.errors import ConfigError


class Counting(HashingEmbedder):
    """The real hashing embedder, counting the passages it was asked to embed."""

    def __init__(self, dimension: int = 32) -> None:
        super().__init__(dimension)
        self.embedded = 0

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.embedded += len(texts)
        return super().embed_passages(texts)


TEXTS = ["alpacas graze on grass", "green tea at 80 degrees", "alpacas graze on grass"]


def test_a_second_run_embeds_nothing_and_returns_the_same_vectors(tmp_path: Path) -> None:
    model = Counting()
    first = VectorCache(model, tmp_path)
    vectors = first.embed_passages(TEXTS)
    assert model.embedded == 2  # the repeated text once
    assert np.array_equal(vectors, model.embed_passages(TEXTS))
    assert (first.hits, first.misses) == (1, 2)
    first.save()

    again = Counting()
    second = VectorCache(again, tmp_path)
    assert second.size == 2
    assert np.array_equal(second.embed_passages(TEXTS[::-1]), vectors[::-1])
    assert again.embedded == 0 and second.misses == 0
    assert second.embed_passages([]).shape == (0, 32)
    mtime = second.path.stat().st_mtime_ns
    second.save()  # nothing new: nothing written
    assert second.path.stat().st_mtime_ns == mtime


def test_the_wrapped_model_shows_through(tmp_path: Path) -> None:
    model = Counting()
    cache = VectorCache(model, tmp_path)
    assert identity_of(cache) == identity_of(model)
    assert (cache.name, cache.dimension) == (model.name, model.dimension)
    assert np.array_equal(cache.embed_query("tea"), model.embed_query("tea"))
    with pytest.raises(AttributeError):
        _ = cache.no_such_attribute


def test_each_model_has_its_own_files(tmp_path: Path) -> None:
    a, b = VectorCache(Counting(32), tmp_path), VectorCache(Counting(16), tmp_path)
    a.embed_passages(TEXTS)
    b.embed_passages(TEXTS)
    a.save()
    b.save()
    assert a.path != b.path and len(list(tmp_path.glob("*.npy"))) == 2
    assert VectorCache(Counting(16), tmp_path).embed_passages(TEXTS).shape == (3, 16)


def test_a_run_killed_between_the_two_files_leaves_a_cache_that_reads(tmp_path: Path) -> None:
    cache = VectorCache(Counting(), tmp_path)
    cache.embed_passages(TEXTS[:1])
    cache.save()
    keys = cache.keys_path.read_text()
    cache.embed_passages(TEXTS[1:])
    cache.save()
    cache.keys_path.write_text(keys)  # the vectors written, the keys not yet
    reread = VectorCache(Counting(), tmp_path)
    assert reread.size == 1
    assert np.array_equal(reread.embed_passages(TEXTS), cache.embed_passages(TEXTS))


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: c.keys_path.write_text("{not json"),
        lambda c: c.path.write_bytes(b"not numpy"),
        lambda c: c.keys_path.write_text(json.dumps(["a", "b", "c", "d"])),
        lambda c: np.save(c.path, np.zeros((2, 7), dtype=np.float32)),
        lambda c: c.path.unlink(),
    ],
)
def test_a_damaged_cache_is_a_one_line_error_naming_the_file(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    cache = VectorCache(Counting(), tmp_path)
    cache.embed_passages(TEXTS)
    cache.save()
    damage(cache)
    with pytest.raises(ConfigError) as err:
        VectorCache(Counting(), tmp_path)
    message = str(err.value)
    assert str(cache.path) in message and "delete" in message and "\n" not in message


def test_merge_adds_another_caches_vectors_and_keeps_its_own(tmp_path: Path) -> None:
    source = VectorCache(Counting(), tmp_path / "a")
    vectors = source.embed_passages(TEXTS[:2])
    source.save()
    keys = json.loads(source.keys_path.read_text())
    target = VectorCache(Counting(), tmp_path / "b")
    target.embed_passages(TEXTS[:1])
    assert target.merge(keys, np.load(source.path)) == 1  # the first text was there
    target.save()
    model = Counting()
    again = VectorCache(model, tmp_path / "b")
    assert np.array_equal(again.embed_passages(TEXTS[:2]), vectors) and model.embedded == 0
    with pytest.raises(ConfigError):
        target.merge(keys, np.zeros((2, 5), dtype=np.float32))
