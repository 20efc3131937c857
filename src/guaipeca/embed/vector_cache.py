"""An on-disk cache of passage vectors, for runs that index the same texts again
(``guaipeca eval --vector-cache``).

Tuning a configuration on a labelled set means indexing that set again and again with the
same model; embedding is most of that time (minutes on two cores), while a vector looked up
by its text's hash costs microseconds. The cache is one file pair per model identity in the
folder it is given: ``<identity hash>.npy`` (the vectors) and ``.keys.json`` (the SHA-256 of
each input text, in row order). A corpus index never uses it: passages are embedded once
there, and the vectors live in the corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from guaipeca.embed.base import Embedder, Vector, Vectors, check_texts
from guaipeca.embed.identity import identity_of
from guaipeca.errors import ConfigError

__all__ = ["VectorCache"]


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class VectorCache:
    """Wraps an embedder: passage vectors already in ``folder`` for this model are read,
    the others embedded and added; :meth:`save` writes the additions (atomically).

    Queries are passed through (they are cheap and the query cache covers repeats). Every
    other attribute (``identity``, ``languages``, ``fusion_weight``…) is the wrapped
    embedder's, so an index cannot tell the two apart.

    Raises:
        ConfigError: (at open) the cache files for this model exist but cannot be read, or
            do not match the model's dimension; the message names the file.
    """

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.name, self.dimension = inner.name, inner.dimension
        tag = hashlib.sha256(identity_of(inner).to_json().encode("utf-8")).hexdigest()[:16]
        self.path = Path(folder) / f"{tag}.npy"
        self.keys_path = self.path.with_suffix(".keys.json")
        self._row: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        #: vectors found in the cache, and embedded now, over this run
        self.hits = 0
        self.misses = 0
        if self.path.exists() or self.keys_path.exists():
            self._load()

    def _load(self) -> None:
        try:
            keys = json.loads(self.keys_path.read_text(encoding="utf-8"))
            matrix = np.load(self.path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"vector cache {self.path} is unreadable ({exc.__class__.__name__}); "
                "delete its .npy and .keys.json files to start it again"
            ) from None
        # Rows are only ever appended and the vectors are written before the keys, so a
        # run killed between the two leaves more rows than keys: the first rows still fit.
        if (
            not isinstance(keys, list)
            or matrix.ndim != 2
            or matrix.shape[1] != self.dimension
            or matrix.shape[0] < len(keys)
        ):
            raise ConfigError(
                f"vector cache {self.path} does not fit the model ({matrix.shape} for "
                f"{len(keys) if isinstance(keys, list) else '?'} texts of {self.dimension}-d); "
                "delete its .npy and .keys.json files to start it again"
            )
        self._row = {str(k): i for i, k in enumerate(keys)}
        self._rows = list(matrix[: len(keys)].astype(np.float32, copy=False))

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this class lacks: the wrapped model's own.
        return getattr(self.inner, name)

    @property
    def size(self) -> int:
        """How many texts have a vector here (no ``__len__``: an empty cache is no less an
        embedder)."""
        return len(self._row)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        check_texts(texts)
        keys = [_text_key(t) for t in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._row:
                missing.setdefault(key, text)
        if missing:
            vectors = self.inner.embed_passages(list(missing.values()))
            for key, vector in zip(missing, vectors, strict=True):
                self._row[key] = len(self._rows)
                self._rows.append(np.asarray(vector, dtype=np.float32))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out: Vectors = np.vstack([self._rows[self._row[k]] for k in keys]).astype(np.float32)
        return out

    def merge(self, keys: Sequence[str], vectors: Vectors) -> int:
        """Add vectors known by their text's SHA-256 (hex), e.g. another cache's files of the
        same model; keys already here are kept. Returns how many were added.

        Raises:
            ConfigError: ``vectors`` is not one row of this model's dimension per key.
        """
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape != (len(keys), self.dimension):
            raise ConfigError(
                f"vectors of shape {rows.shape} for {len(keys)} texts of {self.dimension}-d"
            )
        added = 0
        for key, row in zip(keys, rows, strict=True):
            if key not in self._row:
                self._row[key] = len(self._rows)
                self._rows.append(row)
                added += 1
        self.misses += added  # new rows: save() writes them
        return added

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def save(self) -> None:
        """Write the cache when this run added vectors: each file replaced whole, the keys
        last, so a run killed mid-way leaves a cache that reads (see :meth:`_load`)."""
        if self.misses == 0:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._row, key=self._row.__getitem__)
        tmp = self.path.with_name(self.path.stem + f".{os.getpid()}.tmp.npy")
        np.save(tmp, np.vstack(self._rows).astype(np.float32))
        tmp_keys = self.keys_path.with_name(self.keys_path.name + f".{os.getpid()}.tmp")
        tmp_keys.write_text(json.dumps(keys), encoding="utf-8")
        os.replace(tmp, self.path)
        os.replace(tmp_keys, self.keys_path)
