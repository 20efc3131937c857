"""Pick the embedder the settings ask for: the bundled default or a local ONNX folder."""

from __future__ import annotations

from pathlib import Path

from ..config import EmbeddingSettings
from ..errors import ConfigError, ModelError
from .base import Embedder
from .onnx import OnnxEmbedder

__all__ = ["DEFAULT_MODEL_ALIASES", "load_embedder"]

DEFAULT_MODEL_ALIASES = ("default", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


def load_embedder(settings: EmbeddingSettings, *, source: str | None = None) -> OnnxEmbedder:
    """Load the configured model; nothing is downloaded.

    Raises:
        ModelError: the model cannot be loaded offline.
        ConfigError: ``embedding.dimensions`` does not match the model.
    """
    common = {
        "threads": settings.threads,
        "batch_size": settings.batch_size,
        "query_prefix": settings.query_prefix,
        "passage_prefix": settings.passage_prefix,
    }
    if settings.model in DEFAULT_MODEL_ALIASES:
        embedder = OnnxEmbedder(**common)  # type: ignore[arg-type]
    else:
        folder = Path(settings.model).expanduser()
        if not folder.is_dir():
            raise ModelError(
                f"embedding.model: {settings.model!r:.80} is neither 'default' nor a folder with "
                "model.onnx and tokenizer.json; only those load without a network"
            )
        embedder = OnnxEmbedder.from_folder(folder, **common)
    check_dimension(embedder, settings, source=source)
    return embedder


def check_dimension(
    embedder: Embedder, settings: EmbeddingSettings, *, source: str | None = None
) -> None:
    if settings.dimensions is not None and settings.dimensions != embedder.dimension:
        where = f" (in {source})" if source else ""
        raise ConfigError(
            f"embedding.dimensions: {settings.dimensions} does not match model "
            f"{embedder.name} ({embedder.dimension}){where}"
        )
