"""Settings for the engine: chunking, embedding and search, validated and frozen.

The YAML file, corpora and server sections build on these (pydantic v2 gives errors
that carry the key path, which the loader turns into one-line messages).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError

__all__ = [
    "ChunkingSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "SearchSettings",
    "format_validation_error",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChunkingSettings(_Frozen):
    max_size: int = Field(1500, ge=64, le=100_000, description="most characters in one chunk")
    overlap: int = Field(
        0, ge=0, le=2000, description="characters of the previous chunk embedded as context"
    )


class EmbeddingSettings(_Frozen):
    model: str = Field("default", description="'default' (bundled MiniLM int8) or a folder")
    preprocess: bool = True
    preprocess_chars: int = Field(500, ge=50, le=20_000)
    batch_size: int = Field(16, ge=1, le=1024)
    threads: int | None = Field(None, ge=1, le=256)
    cache_max_entries: int = Field(10_000, ge=0, le=10_000_000)
    cache_ttl_seconds: float = Field(3600.0, gt=0)


class SearchSettings(_Frozen):
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    top_k: int = Field(10, ge=1, le=1000)
    candidates: int = Field(100, ge=1, le=10_000, description="depth of each retriever's list")
    rrf_k: float = Field(60.0, gt=0)
    dense_weight: float = Field(1.0, ge=0)
    bm25_weight: float = Field(1.0, ge=0)
    snippet_chars: int = Field(240, ge=40, le=5000)


class EngineSettings(_Frozen):
    language: str = "english"
    chunking: ChunkingSettings = ChunkingSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    search: SearchSettings = SearchSettings()


def format_validation_error(err: ValidationError, source: str | None = None) -> str:
    """One line per problem: ``key.path: message (in FILE)``."""
    where = f" (in {source})" if source else ""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        parts.append(f"{loc}: {e['msg']}{where}")
    return "; ".join(parts)


def engine_settings(**values: object) -> EngineSettings:
    """Build settings from keyword values, raising ConfigError with the key on a bad one."""
    try:
        return EngineSettings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
