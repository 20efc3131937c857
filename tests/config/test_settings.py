"""The whole file's settings (settings.py) and the engine's (engine.py): the engine's
settings taken from the sections and the first corpus, their defaults, one-line errors of
keyword values, and settings that cannot change once made."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import assert_type

import pytest

from guaipeca.chunk import chunk_text
from guaipeca.config import (
    ChunkingSettings,
    CorpusSettings,
    EmbeddingSettings,
    EngineSettings,
    SearchSettings,
    Settings,
    engine_settings,
)
from guaipeca.errors import ConfigError


def test_engine_settings_come_from_the_sections_and_first_corpus(tmp_path: Path) -> None:
    settings = Settings(
        corpora=[
            CorpusSettings(name="pt", path=tmp_path, language="portuguese"),
            CorpusSettings(name="en", path=tmp_path),
        ],
        chunking=ChunkingSettings(max_size=900, overlap=100),
        embedding=EmbeddingSettings(query_prefix="query: ", dimensions=384),
        search=SearchSettings(mode="keyword", top_k=5, max_chars=100, rerank=True),
    )
    engine = settings.engine()
    assert_type(engine, EngineSettings)
    assert engine.language == "portuguese"
    assert engine.chunking == settings.chunking
    assert engine.embedding.query_prefix == "query: "
    assert (engine.search.mode, engine.search.top_k, engine.search.rerank) == ("keyword", 5, True)


def test_engine_settings_keep_their_defaults_and_accept_new_fields() -> None:
    engine = EngineSettings()
    assert (engine.language, engine.chunking.max_size, engine.chunking.overlap) == (
        "english",
        2000,
        0,
    )
    # The chunker's own default is the same, for callers of chunk_text without settings.
    assert inspect.signature(chunk_text).parameters["max_size"].default == 2000
    assert (engine.embedding.preprocess_chars, engine.embedding.batch_size) == (500, 16)
    assert (engine.search.mode, engine.search.top_k, engine.search.rrf_k) == ("hybrid", 10, 10.0)
    extended = engine_settings(embedding={"passage_prefix": "p: "}, search={"toc_rerank": True})
    assert extended.embedding.passage_prefix == "p: "
    assert extended.search.toc_rerank


def test_engine_settings_errors_are_one_line_with_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        engine_settings(search={"top_k": 0}, chunking={"max_sise": 10})
    assert str(info.value) == (
        "chunking.max_sise: unknown key (did you mean 'max_size'?); "
        "search.top_k: must be >= 1, got 0"
    )


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="frozen"):
        settings.search = SearchSettings()  # type: ignore[misc]
