"""The hybrid list of one corpus, and the reranking stage over the merged list.

Fusion (search/fusion.py) with the model's fusion weight and the language rule: the dense
list weighs what the model's expected quality allows, and nothing on a corpus whose language
the embedding model does not know. Reranking: the ToC boost and the lexical
reranker (index/results.py), or an HTTP cross-encoder whose failure leaves the fused order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from guaipeca.config import EngineSettings, RerankSettings
from guaipeca.index import results
from guaipeca.index.results import Scored
from guaipeca.search.fusion import (
    ListScore,
    dense_weight_for,
    explain_scores,
    fuse_scores,
    rrf_weights,
)
from guaipeca.search.rerank_http import HttpReranker
from guaipeca.store.contract import CorpusStore
from guaipeca.text.languages import iso_code
from guaipeca.types import Explanation, ListExplanation

__all__ = [
    "AUTO_FUSION",
    "FORMULAS",
    "HybridPlan",
    "explain_hybrid",
    "explain_single",
    "fuse_hybrid",
    "http_reranker",
    "hybrid_plan",
    "reranked",
]


#: What ``fusion: auto`` does (bench/fusion.py ``transfer``, docs/benchmarks-quality.md): CombMNZ
#: over min-max scores, the best worst case over held-out sets for every model with a full
#: fusion weight; a weak model's list (its fusion weight below 1, static models) enters by
#: rank instead, at that weight, since any score fusion of it fell below keyword search.
AUTO_FUSION, WEAK_MODEL_FUSION = "combmnz", "rrf"

Lists = list[tuple[list[tuple[int, float]], float]]


@dataclass(frozen=True, slots=True)
class HybridPlan:
    """How one corpus's two lists are fused: the method, the (dense, keyword) lists with
    their weights, and why the dense weight is what it is."""

    method: str
    lists: Lists
    note: str


def hybrid_plan(
    dense: list[tuple[int, float]],
    lexical: list[tuple[int, float]],
    weights: tuple[float, float],
    fusion: str,
    model_languages: frozenset[str] | None,
    corpus_language: str,
    model_quality: float = 1.0,
) -> HybridPlan:
    """The method (``auto`` resolved) and the weights of one corpus's hybrid fusion: the
    dense weight scaled by the model's fusion weight ``model_quality``, and 0 when the model
    does not know the corpus's language (its Snowball name). RRF keeps the two weights'
    total (rrf_weights), so every corpus's RRF scores stay on one scale."""
    method = fusion
    if fusion == "auto":
        method = AUTO_FUSION if model_quality >= 1.0 else WEAK_MODEL_FUSION
    w_dense = dense_weight_for(
        weights[0], model_languages, iso_code(corpus_language), model_quality
    )
    w_lexical = weights[1]
    if method == "rrf":
        w_dense, w_lexical = rrf_weights(weights[0], weights[1], w_dense)
    if w_dense == 0.0 and weights[0] > 0:
        note = f"0: the model does not know the corpus's language ({corpus_language})"
    elif model_quality < 1.0:
        note = f"{weights[0]:g} x the model's fusion weight {model_quality:g}"
    else:
        note = f"search.dense_weight {weights[0]:g}"
    return HybridPlan(method, [(dense, w_dense), (lexical, w_lexical)], note)


def fuse_hybrid(plan: HybridPlan, k: float) -> list[tuple[int, float]]:
    """One corpus's hybrid list, best first."""
    return fuse_scores(plan.method, plan.lists, k=k)


def explain_hybrid(
    plan: HybridPlan, k: float, fused: dict[int, float], corpus_weight: float
) -> dict[int, Explanation]:
    """The explanation of each of ``fused``'s chunk keys (its fused score by key)."""
    parts = explain_scores(plan.method, plan.lists, list(fused), k=k)
    formula = FORMULAS[plan.method]
    return {
        pk: Explanation(
            fusion=plan.method,
            formula=formula,
            dense=_listed(parts[pk][0]),
            keyword=_listed(parts[pk][1]),
            dense_weight_note=plan.note,
            fused=score,
            corpus_weight=corpus_weight,
            score=score * corpus_weight,
        )
        for pk, score in fused.items()
    }


def explain_single(
    mode: str, items: list[tuple[int, float]], corpus_weight: float
) -> dict[int, Explanation]:
    """A one-retriever search's explanations: the raw score is the fused one."""
    out = {}
    for rank, (pk, score) in enumerate(items, start=1):
        part = ListExplanation(rank, score, score, 1.0, score)
        out[pk] = Explanation(
            fusion=mode,
            formula="raw",
            dense=part if mode == "dense" else None,
            keyword=part if mode == "keyword" else None,
            dense_weight_note="",
            fused=score,
            corpus_weight=corpus_weight,
            score=score * corpus_weight,
        )
    return out


#: How each fusion turns the sum of the lists' contributions into the fused score
#: (search/fusion.py combine; present = how many lists returned the chunk).
FORMULAS = {
    "rrf": "sum(weight / (k + rank))",
    "zscore": "logistic(sum(share * zscore))",
    "minmax": "sum(share * minmax)",
    "dbsf": "sum(share * dbsf)",
    "combmnz": "present * sum(share * minmax)",
}


def _listed(p: ListScore) -> ListExplanation:
    return ListExplanation(p.rank, p.raw, p.normalised, p.weight, p.contribution)


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
