"""The hybrid list of one corpus, and the reranking stage over the merged list.

Fusion (search/fusion.py) with the model's fusion weight and the language rule: the dense
list weighs what the model's expected quality allows, and nothing on a corpus whose language
the embedding model does not know. Reranking: the ToC boost and the lexical
reranker (index/results.py), or an HTTP cross-encoder whose failure leaves the fused order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from guaipeca.config import EngineSettings, RerankSettings
from guaipeca.index import results
from guaipeca.index.results import Scored
from guaipeca.search.fusion import dense_weight_for, rrf_weights, weighted_rrf, zscore_fusion
from guaipeca.search.rerank_http import HttpReranker
from guaipeca.store.contract import CorpusStore
from guaipeca.text.languages import iso_code

__all__ = ["fuse_hybrid", "http_reranker", "reranked"]


def fuse_hybrid(
    dense: list[tuple[int, float]],
    lexical: list[tuple[int, float]],
    weights: tuple[float, float],
    fusion: str,
    k: float,
    model_languages: frozenset[str] | None,
    corpus_language: str,
    model_quality: float = 1.0,
) -> list[tuple[int, float]]:
    """One corpus's hybrid list by ``fusion`` (``rrf`` or ``zscore``) with the (dense,
    keyword) ``weights``; the dense weight is scaled by the model's fusion weight
    ``model_quality``, and is 0 when the model does not know the corpus's language (its
    Snowball name)."""
    w_dense = dense_weight_for(
        weights[0], model_languages, iso_code(corpus_language), model_quality
    )
    if fusion == "rrf":
        w_dense, w_lexical = rrf_weights(weights[0], weights[1], w_dense)
        return weighted_rrf(
            [([pk for pk, _ in dense], w_dense), ([pk for pk, _ in lexical], w_lexical)], k=k
        )
    return zscore_fusion([(dense, w_dense), (lexical, weights[1])])


def http_reranker(settings: RerankSettings) -> HttpReranker:
    """The HTTP reranker ``rerank`` configures (its url is checked by the settings)."""
    assert settings.url is not None
    return HttpReranker(
        settings.url,
        api=settings.api,
        model=settings.model,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        timeout=settings.timeout_seconds,
    )


def reranked(
    scored: list[Scored],
    stores: Mapping[str, CorpusStore],
    weights: Mapping[str, float],
    settings: EngineSettings,
    http: Callable[[], HttpReranker],
    query: str,
    before: int,
    top_k: int,
    *,
    lexical: bool,
    toc: bool,
) -> tuple[list[Scored], str | None]:
    """The ToC boost and the configured reranker over the fused list (``http`` gives the
    HTTP reranker when one is configured); with an HTTP reranker that fails, the fused
    (ToC-boosted) list and why it failed."""
    remote = lexical and settings.rerank.provider == "http"
    if toc or (lexical and not remote):
        scored = results.rerank(
            scored, stores, weights, settings.search, query, before, lexical=not remote, toc=toc
        )
    if not remote:
        return scored, None
    # The reranker's order is the result, so it sees at least top_k candidates.
    return results.http_rerank(
        scored, stores, http(), query, max(before, top_k), settings.rerank.score_threshold
    )
