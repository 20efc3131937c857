"""The file's sections beyond the engine's: corpora (the folders indexed), server, upload,
OCR, storage (embedded or Qdrant) and limits on one big file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

from guaipeca.config.engine import EmbeddingSettings
from guaipeca.config.fields import (
    NAME_CHARS,
    SUPPORTED_EXTENSIONS,
    FrozenModel,
    GiB,
    MiB,
    absolute_path,
    check_extensions,
    check_host,
    check_language,
    check_origin,
    check_url,
    home_dir,
    non_empty_secret,
    not_empty_path,
)
from guaipeca.config.identity import ClaimSettings, OidcSettings
from guaipeca.errors import KeyProblems

__all__ = [
    "CorpusSettings",
    "LimitsSettings",
    "OcrSettings",
    "QdrantSettings",
    "ServerSettings",
    "StorageSettings",
    "UploadSettings",
]


class CorpusSettings(FrozenModel):
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
            or not set(value) <= NAME_CHARS
        ):
            raise ValueError(
                f"{value[:70]!r} is not a valid name: use 1-64 letters, digits, '_', '.' or "
                "'-', starting with a letter or digit"
            )
        return value

    _path_not_empty = field_validator("path", mode="before")(not_empty_path)
    _path_absolute = field_validator("path")(absolute_path)

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return check_language(value)

    @field_validator("extensions")
    @classmethod
    def _extensions(cls, value: list[str]) -> list[str]:
        return check_extensions(value)

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip():
                raise ValueError("a pattern must not be empty")
            if pattern.startswith(("/", "~")):
                raise ValueError(f"pattern {pattern[:60]!r} must be relative to the corpus folder")
        return value


class ServerSettings(FrozenModel):
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
    oidc: OidcSettings = Field(
        default_factory=OidcSettings, description="an OpenID provider's signed tokens"
    )
    claims: ClaimSettings = Field(
        default_factory=ClaimSettings, description="JWT claims holding groups, roles and scopes"
    )
    cors_origins: list[Annotated[str, AfterValidator(check_origin)]] = Field(
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
    allowed_hosts: list[Annotated[str, AfterValidator(check_host)]] = Field(
        default_factory=list,
        description="other Host names clients use, e.g. guaipeca, example.org:8443; '*': any",
    )
    max_sessions: int = Field(
        1000, ge=2, le=100_000, description="MCP sessions open at once, all identities together"
    )
    max_sessions_per_identity: int = Field(
        32,
        ge=1,
        le=100_000,
        description="of those, held by one identity (its oldest idle one closes to make room)",
    )
    session_idle_seconds: float = Field(
        300.0, gt=0, le=86_400, description="an MCP session with no request this long is closed"
    )
    max_streams: int = Field(
        256,
        ge=2,
        le=100_000,
        description="event streams open at once (GET /sse, GET /mcp); lowered to fit the "
        "open-files limit",
    )
    max_streams_per_identity: int = Field(
        16, ge=1, le=100_000, description="of those, open by one identity (then 429)"
    )
    watch: bool = Field(False, description="re-index the corpora when their files change")
    idle_trim_seconds: float = Field(
        5.0,
        ge=0,
        description="after this long with no request or tool call, give idle memory back to "
        "the OS (0: never)",
    )

    _auth_token = field_validator("auth_token", "jwt_secret")(non_empty_secret)

    @model_validator(mode="after")
    def _no_wildcard_with_auth(self) -> ServerSettings:
        if self.auth_token or self.jwt_secret or self.oidc.issuer:
            problems: list[tuple[tuple[str | int, ...], str]] = [
                (
                    ("cors_origins", i),
                    "'*' is not allowed when server.auth_token, server.jwt_secret or "
                    "server.oidc.issuer is set (list the origins)",
                )
                for i, origin in enumerate(self.cors_origins)
                if origin == "*"
            ]
            if problems:
                raise KeyProblems(problems)
        return self

    @model_validator(mode="after")
    def _shares_within_totals(self) -> ServerSettings:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.max_sessions_per_identity > self.max_sessions:
            problems.append((("max_sessions_per_identity",), "must not exceed server.max_sessions"))
        if self.max_streams_per_identity > self.max_streams:
            problems.append((("max_streams_per_identity",), "must not exceed server.max_streams"))
        if problems:
            raise KeyProblems(problems)
        return self


class OcrSettings(FrozenModel):
    enabled: bool | Literal["auto"] = Field(
        "auto",
        description="read scanned PDF pages and images with Tesseract: auto (when installed), "
        "true or false",
    )
    max_pages: int = Field(
        100, ge=0, le=100_000, description="most pages read with OCR per file (0: none)"
    )
    dpi: int = Field(300, ge=72, le=1200, description="resolution pages are rendered at for OCR")
    page_timeout_seconds: float = Field(
        60.0, gt=0, le=3600, description="seconds Tesseract may take on one page (then unread)"
    )


class UploadSettings(FrozenModel):
    allow: list[str] = Field(
        default_factory=list, description="corpora that accept uploads (none: uploads are off)"
    )
    max_file_size: int = Field(50 * MiB, ge=1, description="largest uploaded file (50 MiB)")
    allowed_extensions: list[str] = Field(
        default_factory=lambda: list(SUPPORTED_EXTENSIONS), description="file types accepted"
    )
    auto_index: bool = Field(True, description="index an uploaded file right away")
    max_bytes_per_identity: int = Field(
        2 * GiB,
        ge=0,
        description="bytes of uploaded files one identity may keep in corpus folders "
        "(2 GiB; 0: no limit)",
    )
    answer_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="an upload not done by then is answered 202 with a job to follow "
        "(GET /jobs/{id})",
    )

    @field_validator("allowed_extensions")
    @classmethod
    def _extensions(cls, value: list[str]) -> list[str]:
        return check_extensions(value)


class QdrantSettings(FrozenModel):
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

    _url = field_validator("url")(check_url)
    _path_not_empty = field_validator("path", mode="before")(not_empty_path)
    _path_absolute = field_validator("path")(absolute_path)
    _api_key = field_validator("api_key")(non_empty_secret)

    @field_validator("collection_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not set(value) <= NAME_CHARS - {"."}:
            raise ValueError("use only letters, digits, '_' and '-'")
        return value


class PostgresSettings(FrozenModel):
    """storage.backend: postgres (PostgreSQL with pgvector >= 0.8)."""

    dsn: SecretStr | None = Field(
        None,
        description="the primary, postgresql://user@host:5432/db; set GUAIPECA_POSTGRES_DSN "
        "or PGPASSWORD instead",
    )
    read_dsn: SecretStr | None = Field(
        None,
        description="a streaming replica for searches (null: the primary); "
        "GUAIPECA_POSTGRES_READ_DSN",
    )
    schema_prefix: str = Field(
        "guaipeca_", max_length=32, description="prefix of each corpus's schema (+ corpus name)"
    )
    vector_index: Literal["auto", "exact", "hnsw"] = Field(
        "auto", description="exact scan, HNSW, or HNSW from hnsw_threshold chunks on (auto)"
    )
    hnsw_threshold: int = Field(
        100_000, ge=1, description="chunks in a corpus from which auto builds an HNSW index"
    )
    ef_search: int = Field(100, ge=10, le=1000, description="HNSW candidates per search")
    shards: list[SecretStr] = Field(
        default_factory=list,
        description="shard DSNs for a new corpus's chunks (postgres_fdw); empty: on the primary",
    )
    partial_results: bool = Field(
        False,
        description="with a shard down, searches answer from the others, naming it (false: "
        "an error)",
    )
    timeout: float = Field(30.0, gt=0, description="seconds per statement")

    _dsn = field_validator("dsn", "read_dsn")(non_empty_secret)

    @field_validator("schema_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not set(value) <= NAME_CHARS - {"."}:
            raise ValueError("use only letters, digits, '_' and '-'")
        return value


class StorageSettings(FrozenModel):
    backend: Literal["embedded", "qdrant", "postgres"] = Field(
        "embedded", description="embedded (files in data_dir), qdrant or postgres"
    )
    data_dir: Path | None = Field(
        None, description="index and caches (null: $GUAIPECA_HOME/data or ~/.guaipeca/data)"
    )
    qdrant: QdrantSettings = Field(
        default_factory=QdrantSettings, description="used when backend is qdrant"
    )
    postgres: PostgresSettings = Field(
        default_factory=PostgresSettings, description="used when backend is postgres"
    )

    _path_not_empty = field_validator("data_dir", mode="before")(not_empty_path)
    _path_absolute = field_validator("data_dir")(absolute_path)

    @field_validator("qdrant", "postgres", mode="before")
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
        if self.backend == "postgres" and self.postgres.dsn is None:
            raise KeyProblems(
                [(("postgres", "dsn"), "set it (or GUAIPECA_POSTGRES_DSN) for backend postgres")]
            )
        return self

    def resolved_data_dir(self, env: Mapping[str, str] = os.environ) -> Path:
        """``data_dir`` when set, else ``data`` under :func:`home_dir`."""
        return self.data_dir if self.data_dir is not None else home_dir(env) / "data"


class LimitsSettings(FrozenModel):
    """How much of one big file is read; the rest is skipped with a warning naming the file
    and the limit, and what was read is indexed. An Office zip with more entries than
    ``max_zip_entries`` is refused instead (nothing of it can be read safely)."""

    max_pages: int = Field(5000, ge=1, description="PDF pages read from one file")
    max_cells: int = Field(
        5_000_000, ge=1, description="spreadsheet cells read from one workbook (empty included)"
    )
    max_chars: int = Field(20_000_000, ge=1000, description="characters kept of one converted file")
    # A 5,000-slide PPTX has about 10,000 entries; a zip bomb of empty entries, millions.
    max_zip_entries: int = Field(
        50_000,
        ge=100,
        le=1_000_000,
        description="entries of one Office zip (DOCX, PPTX, XLSX); more is refused",
    )
    max_image_pixels: int = Field(
        25_000_000,
        ge=1_000_000,
        le=1_000_000_000,
        description="pixels of one image: a larger one is refused unread; OCR renders pages "
        "within it",
    )
    convert_timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=86_400,
        description="seconds one file's conversion may take, OCR included; a slower file is "
        "skipped",
    )
