"""A model-free embedder for tests and demos of the layers above embedding.

:class:`HashingEmbedder` feature-hashes words and character trigrams into a small vector: it
is deterministic across processes and machines, needs no model file and embeds thousands of
texts per second, which is what tests of storage, search and the server want. It knows no
synonyms or meaning beyond shared spelling, so it is never the default and never for real use.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from guaipeca.embed.base import Vector, Vectors
from guaipeca.errors import InvalidArgumentError

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"\w+")
# Trigrams make "index"/"indexes"/"indexing" overlap; words alone would share nothing.
_TRIGRAM_WEIGHT = 0.5


@lru_cache(maxsize=1 << 16)
def _feature_hash(feature: str) -> int:
    # blake2b, not hash(): str hashes are salted per process (PYTHONHASHSEED), and vectors
    # stored by one process must match queries embedded by another.
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")


class HashingEmbedder:
    """Deterministic bag-of-features vectors: lowercase words plus their character trigrams.

    Each feature lands in one of ``dimension`` slots with a hash-chosen sign (signs make
    collisions cancel on average instead of piling up). Rows are L2-normalised; a text with no
    word characters gives the zero vector. For tests only — see the module docstring.
    """

    name: str
    dimension: int

    def __init__(self, dimension: int = 64, *, name: str | None = None) -> None:
        if dimension < 1:
            raise InvalidArgumentError(f"dimension must be at least 1, got {dimension}")
        self.dimension = dimension
        self.name = name if name is not None else f"hashing-{dimension}"

    def _vector(self, text: str) -> Vector:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            self._add(vector, "w:" + word, 1.0)
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                self._add(vector, "c:" + padded[i : i + 3], _TRIGRAM_WEIGHT)
        norm = float(np.linalg.norm(vector))
        if norm > 0:
            vector /= norm
        return vector

    def _add(self, vector: Vector, feature: str, weight: float) -> None:
        h = _feature_hash(feature)
        sign = 1.0 if h >> 63 else -1.0
        vector[h % self.dimension] += sign * weight

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidArgumentError("embed_passages takes a list of texts, not a single string")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._vector(text)
        return out

    def embed_query(self, text: str) -> Vector:
        return self._vector(text)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self.dimension}, name={self.name!r})"
