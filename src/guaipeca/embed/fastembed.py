"""Models from fastembed's catalogue (extra ``[fastembed]``), offline after one explicit download.

``guaipeca check-model --download`` is the only thing that fetches a model: it asks fastembed
to download it into ``<data_dir>/models/fastembed`` (the Hugging Face cache layout fastembed
uses). Every other load passes ``local_files_only=True``, so nothing touches the network at
run time; a model that is not there is a one-line error with the command to run.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from guaipeca.embed.base import Vector, Vectors, check_texts, unit_rows
from guaipeca.embed.identity import EmbedderIdentity, file_sha256, model_prefixes
from guaipeca.errors import ConfigError, InvalidArgumentError, ModelError

__all__ = ["FastembedEmbedder", "download_fastembed", "fastembed_cache", "model_prefixes"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DOWNLOAD_HINT = "guaipeca check-model --download"


def fastembed_cache(data_dir: Path) -> Path:
    """Where fastembed models live: under the data folder, beside the indexes."""
    return data_dir / "models" / "fastembed"


def _import_text_embedding(where: str) -> Any:
    try:
        from fastembed import TextEmbedding
    except ImportError:
        raise ConfigError(
            "embedding.provider: fastembed is not installed; install the extra with "
            f"pip install 'guaipeca[fastembed]'{where}"
        ) from None
    try:  # fastembed logs a missing model at ERROR level before we get to explain it
        from loguru import logger

        logger.disable("fastembed")
    except ImportError:
        pass
    return TextEmbedding


def _description(text_embedding: Any, model: str, where: str) -> dict[str, Any]:
    for desc in text_embedding.list_supported_models():
        if str(desc["model"]).lower() == model.lower():
            return dict(desc)
    raise ConfigError(
        f"embedding.model: {model!r:.80} is not in fastembed's catalogue (see "
        f"fastembed.TextEmbedding.list_supported_models()){where}"
    )


def download_fastembed(model: str, cache: Path) -> Path:
    """Download ``model`` into ``cache`` (the one network access); returns its folder."""
    text_embedding = _import_text_embedding("")
    desc = _description(text_embedding, model, "")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        loaded = text_embedding(model_name=desc["model"], cache_dir=str(cache))
    except Exception as exc:  # fastembed raises bare exceptions of many kinds here
        raise ModelError(f"could not download {model}: {_first_line(exc)}") from None
    return _model_dir(loaded)


class FastembedEmbedder:
    """:class:`~guaipeca.embed.base.Embedder` over ``fastembed.TextEmbedding``, offline only.

    ``query_prefix`` / ``passage_prefix``: None means the model's own (see
    :func:`model_prefixes`). ``threads``: ONNX Runtime threads (None: fastembed's default).
    """

    name: str
    dimension: int
    provider = "fastembed"

    def __init__(
        self,
        model: str,
        cache: Path,
        *,
        threads: int | None = None,
        batch_size: int = 16,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        source: str | None = None,
    ) -> None:
        where = f" (in {source})" if source else ""
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        started = time.perf_counter()
        text_embedding = _import_text_embedding(where)
        desc = _description(text_embedding, model, where)
        try:
            self._model = text_embedding(
                model_name=desc["model"],
                cache_dir=str(cache),
                threads=threads,
                local_files_only=True,
            )
        except Exception:  # fastembed raises ValueError, OSError or hub errors when absent
            raise ModelError(
                f"fastembed model {desc['model']} is not in {cache}; download it once with "
                f"'{_DOWNLOAD_HINT}'"
            ) from None
        model_dir = _model_dir(self._model)
        weights = model_dir / desc["model_file"]
        own = model_prefixes(desc["model"])
        self.name = str(desc["model"])
        self.query_prefix = own[0] if query_prefix is None else query_prefix
        self.passage_prefix = own[1] if passage_prefix is None else passage_prefix
        self.batch_size = batch_size
        self.source = str(model_dir)
        self.weights_sha256 = _weights_sha256(weights)
        self._lock = threading.Lock()
        self.dimension = int(desc["dim"])
        self.load_seconds = time.perf_counter() - started

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(
            provider=self.provider,
            model=self.name,
            dimension=self.dimension,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            weights_sha256=self.weights_sha256,
        )

    def _embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            rows = list(self._model.embed(texts, batch_size=self.batch_size))
        return unit_rows(np.vstack(rows), self.dimension, f"fastembed {self.name}")

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed([self.passage_prefix + t for t in check_texts(texts)])

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        vector: Vector = self._embed([self.query_prefix + text])[0]
        return vector

    def __repr__(self) -> str:
        return f"FastembedEmbedder(model={self.name!r}, source={self.source!r})"


def _model_dir(loaded: Any) -> Path:
    # fastembed has no public accessor for the folder it loaded from; its model keeps it here.
    return Path(loaded.model._model_dir)


def _weights_sha256(path: Path) -> str:
    """The hub cache names each large file's blob by its sha256: read it there, else hash."""
    target = path.resolve()
    if target.parent.name == "blobs" and _SHA256.match(target.name):
        return target.name
    return file_sha256(target)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
