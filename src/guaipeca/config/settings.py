"""The whole configuration file: :class:`Settings`, every section with a safe default, the
checks that span sections (unique corpus names, upload corpora that exist, the reranker's
timeout under the search deadline), and :meth:`Settings.engine`, which maps it onto
:class:`~guaipeca.config.engine.EngineSettings`.

Reading it from YAML and the environment is loading.py's job.
"""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator, model_validator

from guaipeca.config.access import AccessGrant, AuditSettings, check_grants
from guaipeca.config.engine import (
    ChunkingSettings,
    EmbeddingSettings,
    EngineSettings,
    EnrichSettings,
    RerankSettings,
    SearchSettings,
)
from guaipeca.config.fields import FrozenModel
from guaipeca.config.sections import (
    CorpusSettings,
    LimitsSettings,
    OcrSettings,
    ServerSettings,
    StorageSettings,
    UploadSettings,
)
from guaipeca.errors import KeyProblems

__all__ = ["Settings"]


class Settings(FrozenModel):
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
    audit: AuditSettings = Field(
        default_factory=AuditSettings,
        description="the server's log of writes and denied requests (guaipeca audit reads it)",
    )
    access: list[AccessGrant] | None = Field(
        None,
        description="who may read and write which corpora (none: every credential, everything)",
    )

    @field_validator(
        "corpora", "embedding", "chunking", "search", "rerank", "server", "upload", "storage",
        "enrich", "limits", "ocr", "audit", mode="before",
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
        if self.access is not None:
            check_grants(self.access, names)
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
