"""The embedding models of an :class:`~guaipeca.index.Index`: its default one and those of
the corpora configured with another, each with its query cache, identity and writer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guaipeca.config import EmbeddingSettings, EngineSettings
from guaipeca.embed import (
    CachedEmbedder,
    Embedder,
    EmbedderIdentity,
    QueryCache,
    identity_of,
)
from guaipeca.embed.languages import model_fusion_weight, model_languages
from guaipeca.index.checks import check_vectors
from guaipeca.index.write import DocumentWriter
from guaipeca.store.contract import CorpusStore

__all__ = ["Model", "Models"]


@dataclass(frozen=True)
class Model:
    """One embedding model as the index uses it: cached queries, identity, writer."""

    embedder: Embedder
    name: str
    identity: EmbedderIdentity
    writer: DocumentWriter
    #: The factor on ``search.dense_weight`` for this model's dense list in hybrid fusion:
    #: ``embedding.fusion_weight``, else the model's own (1 but for static models).
    fusion_weight: float

    @classmethod
    def of(cls, base: Embedder, settings: EngineSettings) -> Model:
        emb = settings.embedding
        embedder: Embedder = (
            CachedEmbedder(base, QueryCache(emb.cache_max_entries, emb.cache_ttl_seconds))
            if emb.cache_max_entries > 0
            else base
        )
        return cls(
            embedder,
            base.name,
            identity_of(base),
            DocumentWriter(settings, embedder, base.name),
            model_fusion_weight(base) if emb.fusion_weight is None else emb.fusion_weight,
        )


class Models:
    """The default model and, by corpus name, the corpora's own models.

    Args:
        base: the default model (uncached; the query cache wraps it here).
        settings: the index's settings.
        corpus_embedders: corpora that use another model, by name.
        corpus_embedding: those corpora's embedding settings (default: ``settings``').
    """

    def __init__(
        self,
        base: Embedder,
        settings: EngineSettings,
        corpus_embedders: Mapping[str, Embedder] | None,
        corpus_embedding: Mapping[str, EmbeddingSettings] | None,
    ) -> None:
        self._settings = settings
        self.default = Model.of(base, settings)
        overrides = corpus_embedding or {}
        self._by_corpus = {
            name: Model.of(
                model,
                settings.model_copy(update={"embedding": overrides.get(name, settings.embedding)}),
            )
            for name, model in (corpus_embedders or {}).items()
        }

    def of(self, corpus: str) -> Model:
        """The model corpus ``corpus`` uses."""
        return self._by_corpus.get(corpus, self.default)

    def query_vectors(self, query: str, stores: Sequence[CorpusStore]) -> dict[str, Any]:
        """The query embedded once per model among ``stores``, by corpus name.

        Raises:
            ModelError: a corpus's vectors are another model's.
        """
        by_model: dict[int, Any] = {}
        out: dict[str, Any] = {}
        for store in stores:
            check_vectors(store)
            model = self.of(store.name)
            if id(model) not in by_model:
                by_model[id(model)] = model.embedder.embed_query(query)
            out[store.name] = by_model[id(model)]
        return out

    def dense_languages(self, corpus: str) -> frozenset[str] | None:
        """ISO codes of the languages the corpus's dense model knows (None: any)."""
        declared = self._settings.embedding.languages
        if declared is not None:
            return frozenset(declared)
        return model_languages(self.of(corpus).embedder)

    def fusion_weight(self, corpus: str) -> float:
        """The factor on the dense weight the corpus's model carries (1: full weight)."""
        return self.of(corpus).fusion_weight

    def close(self) -> None:
        """Close every model's writer once."""
        for model in {id(m): m for m in [self.default, *self._by_corpus.values()]}.values():
            model.writer.close()
