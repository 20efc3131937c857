"""Settings: the YAML file's models, its loading, problems worded for people, and the
commented file that ``guaipeca init`` writes.

- ``fields``: shared limits (``MAX_TOP_K``, ``SUPPORTED_EXTENSIONS``), the frozen base model,
  field checks and path handling (``~``, relative paths, ``GUAIPECA_HOME``);
- ``engine``: the engine's sections (chunking, embedding, search, rerank, enrich) and
  ``EngineSettings``, what ``Index`` needs;
- ``sections``: the file's other sections (corpora, server, upload, OCR, storage, limits);
- ``identity``: the server's identity sources (JWT claim names, an OpenID provider);
- ``access``: the ``access:`` grants (who reads and writes which corpora) and ``audit:``;
- ``settings``: ``Settings``, the whole file, and the checks that span sections;
- ``loading``: finding, reading and validating the file with ``GUAIPECA_*`` overrides;
- ``legacy``: the original Guaipeca's keys and A-RAG-OG's ``.env`` variables, as ours;
- ``messages``: each problem as one line naming the key and the file;
- ``template``: the commented file ``guaipeca init`` writes.

Everything else in the package imports its settings from here."""

from guaipeca.config.access import (
    ALL_CORPORA,
    AccessGrant,
    AuditSettings,
    Who,
    audit_path,
)
from guaipeca.config.engine import (
    ChunkingSettings,
    EmbeddingSettings,
    EngineSettings,
    EnrichSettings,
    RerankSettings,
    SearchSettings,
)
from guaipeca.config.fields import MAX_TOP_K, SUPPORTED_EXTENSIONS, home_dir
from guaipeca.config.identity import ClaimSettings, OidcSettings
from guaipeca.config.loading import (
    DEFAULT_CORPUS,
    ENV_OVERRIDES,
    LoadedSettings,
    check_corpus_paths,
    config_path,
    engine_settings,
    format_validation_error,
    load_settings,
    parse_settings,
)
from guaipeca.config.messages import did_you_mean
from guaipeca.config.sections import (
    CorpusSettings,
    LimitsSettings,
    OcrSettings,
    PostgresSettings,
    QdrantSettings,
    ServerSettings,
    StorageSettings,
    UploadSettings,
)
from guaipeca.config.settings import Settings
from guaipeca.config.template import render_default_config

__all__ = [
    "ALL_CORPORA",
    "DEFAULT_CORPUS",
    "ENV_OVERRIDES",
    "MAX_TOP_K",
    "SUPPORTED_EXTENSIONS",
    "AccessGrant",
    "AuditSettings",
    "ChunkingSettings",
    "ClaimSettings",
    "CorpusSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "EnrichSettings",
    "LimitsSettings",
    "LoadedSettings",
    "OcrSettings",
    "OidcSettings",
    "PostgresSettings",
    "QdrantSettings",
    "RerankSettings",
    "SearchSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "UploadSettings",
    "Who",
    "audit_path",
    "check_corpus_paths",
    "config_path",
    "did_you_mean",
    "engine_settings",
    "format_validation_error",
    "home_dir",
    "load_settings",
    "parse_settings",
    "render_default_config",
]
