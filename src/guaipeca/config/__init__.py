"""Settings: the YAML file's models and loading (settings), problems worded for people
(messages), and the commented file that ``guaipeca init`` writes (template).

Everything else in the package imports its settings from here."""

from guaipeca.config.settings import (
    DEFAULT_CORPUS,
    ENV_OVERRIDES,
    SUPPORTED_EXTENSIONS,
    ChunkingSettings,
    CorpusSettings,
    EmbeddingSettings,
    EngineSettings,
    EnrichSettings,
    LimitsSettings,
    LoadedSettings,
    QdrantSettings,
    SearchSettings,
    ServerSettings,
    Settings,
    StorageSettings,
    UploadSettings,
    check_corpus_paths,
    config_path,
    engine_settings,
    format_validation_error,
    home_dir,
    load_settings,
    parse_settings,
)
from guaipeca.config.template import render_default_config

__all__ = [
    "DEFAULT_CORPUS",
    "ENV_OVERRIDES",
    "SUPPORTED_EXTENSIONS",
    "ChunkingSettings",
    "CorpusSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "EnrichSettings",
    "LimitsSettings",
    "LoadedSettings",
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
    "render_default_config",
]
