"""Embeddings: the :class:`Embedder` protocol, the default ONNX model, a query cache and a
model-free embedder for tests.

Importing this package does not import onnxruntime or tokenizers; :class:`OnnxEmbedder`
loads them when the first model is constructed.
"""

from guaipeca.embed.base import Embedder, embedding_input
from guaipeca.embed.cache import CachedEmbedder, QueryCache
from guaipeca.embed.hashing import HashingEmbedder
from guaipeca.embed.onnx import OnnxEmbedder, default_embedder
from guaipeca.embed.select import load_embedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "QueryCache",
    "default_embedder",
    "embedding_input",
    "load_embedder",
]
