"""The configs of the systems Guaipeca replaces (config/legacy.py): the original Guaipeca's
documented sample ``guaipeca.yaml`` and A-RAG-OG's documented ``.env`` load, each old key
mapped to ours or noted once; an unknown key in neither is still an error."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from guaipeca.config import CorpusSettings, load_settings, parse_settings
from guaipeca.config.legacy import ARAGOG_VARIABLES, ORIGINAL_KEYS, aragog_values
from support.config import config_error, write_config
from support.legacy import ARAGOG_ENV, ORIGINAL_SAMPLE


@pytest.fixture
def original(tmp_path: Path) -> Path:
    (tmp_path / "epm").mkdir()
    (tmp_path / "finance").mkdir()
    return write_config(tmp_path, ORIGINAL_SAMPLE)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- the original Guaipeca -----------------------------------------------------------------
def test_the_original_sample_config_loads_with_its_values_and_no_warning(
    original: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = load_settings(original, env={}, cwd=original.parent).settings
    assert [(c.name, c.weight, c.topic) for c in s.corpora] == [
        ("epm-docs", 1.5, "EPM & Oracle HFM/ARCS"),
        ("finance-reference", 1.3, "Finance & Accounting Standards"),
    ]
    assert s.corpora[1].extensions == [".md", ".txt", ".pdf"]
    assert (s.embedding.model, s.embedding.dimensions, s.embedding.preprocess) == (
        "all-MiniLM-L6-v2",
        384,
        True,
    )
    assert (s.embedding.cache_ttl_seconds, s.embedding.cache_max_entries) == (3600, 10000)
    assert (s.chunking.max_size, s.chunking.overlap) == (2000, 200)
    assert (s.server.transport, s.server.port, s.server.host) == ("both", 8090, "127.0.0.1")
    assert s.upload.allow == ["epm-docs"] and s.upload.auto_index is True
    assert s.upload.max_file_size == 52428800
    # hybrid: false was the original's dense-only FAISS search
    assert s.search.mode == "dense"
    assert (s.search.bm25_weight, s.search.dense_weight, s.search.rrf_k) == (1.0, 1.0, 60)
    assert s.search.max_chars == 8000
    # table_aware and split_on_headings: true is what Guaipeca always does: nothing to say
    assert _warnings(caplog) == []


def test_each_original_key_with_no_equivalent_is_one_warning_line_saying_what_we_do(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(
        tmp_path,
        "chunking:\n  table_aware: false\n  split_on_headings: false\n"
        "embedding:\n  cache_dir: ~/.guaipeca/models\n"
        "indexing:\n  data_dir: ./old-data\n  incremental: true\n  max_file_size: 1000\n"
        "  exclude_dirs: [node_modules]\n"
        "search:\n  hybrid: true\n  toc_rerank_weight: 0.3\n",
    )
    s = load_settings(path, env={}, cwd=tmp_path).settings
    assert s.search.mode == "hybrid" and s.search.toc_boost == 0.3
    assert s.storage.data_dir == tmp_path / "old-data"
    lines = _warnings(caplog)
    named = sorted(line.split(":")[0] for line in lines)
    assert named == [
        "chunking.split_on_headings",
        "chunking.table_aware",
        "embedding.cache_dir",
        "indexing.exclude_dirs",
        "indexing.max_file_size",
    ]
    assert all("not used: " in line and f"(in {path})" in line for line in lines)
    assert any("header row" in line for line in lines)  # says what Guaipeca does instead


def test_every_key_of_the_original_is_in_the_table_or_ours() -> None:
    # The original's documented keys beyond corpora (its README and config loader).
    documented = {
        ("embedding", k)
        for k in ("model", "dimensions", "cache_dir", "preprocess", "cache_ttl_seconds")
    }
    documented |= {("chunking", k) for k in ("max_size", "overlap", "table_aware")}
    documented |= {("chunking", "split_on_headings"), ("embedding", "cache_max_entries")}
    documented |= {("indexing", k) for k in ("data_dir", "incremental", "max_file_size")}
    documented |= {("indexing", "exclude_dirs")}
    documented |= {("server", k) for k in ("transport", "port", "host", "auth_token")}
    documented |= {
        ("upload", k) for k in ("allow", "max_file_size", "allowed_extensions", "auto_index")
    }
    documented |= {
        ("search", k)
        for k in ("hybrid", "bm25_weight", "dense_weight", "rrf_k", "max_chars", "toc_rerank")
    }
    documented |= {("search", "toc_rerank_weight")}
    from guaipeca.config import Settings

    ours = {
        (section, key)
        for section, field in Settings.model_fields.items()
        for key in getattr(field.annotation, "model_fields", {})
    }
    assert documented - ours - set(ORIGINAL_KEYS) == set()


def test_our_own_key_wins_over_the_original_one_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path, "search:\n  mode: keyword\n  hybrid: true\n")
    assert load_settings(path, env={}, cwd=tmp_path).settings.search.mode == "keyword"
    assert _warnings(caplog) == [f"search.hybrid: not used: search.mode is set (in {path})"]


def test_a_key_in_neither_is_an_error_suggesting_the_original_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search:\n  hybird: true\n")
    assert "search.hybird: unknown key (did you mean 'hybrid'?)" in config_error(
        path, env={}, cwd=tmp_path
    )


def test_a_bad_value_of_an_original_key_names_the_key_it_was_written_as(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search:\n  hybrid: maybe\n")
    message = config_error(path, env={}, cwd=tmp_path)
    assert message.startswith("search.mode: must be one of")
    assert f"(written as search.hybrid in {path})" in message


def test_the_config_is_found_where_the_original_looked_after_our_places(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "config").mkdir(parents=True)
    env = {"GUAIPECA_HOME": str(home)}
    write_config(work / "config", "search:\n  top_k: 3\n")
    assert load_settings(env=env, cwd=work).source == work / "config" / "guaipeca.yaml"
    write_config(work, "search:\n  top_k: 4\n")
    assert load_settings(env=env, cwd=work).settings.search.top_k == 4
    home.mkdir()
    write_config(home, "search:\n  top_k: 5\n")  # ~/.guaipeca/guaipeca.yaml first, as before
    assert load_settings(env=env, cwd=work).settings.search.top_k == 5


# -- A-RAG-OG ---------------------------------------------------------------------------------
def test_every_aragog_variable_is_mapped_or_noted_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / ".env").write_text(ARAGOG_ENV)
    names = {line.split("=")[0] for line in ARAGOG_ENV.splitlines()}
    assert names == set(ARAGOG_VARIABLES)
    s = parse_settings({}, env={}, cwd=tmp_path)
    assert (s.server.host, s.server.port, s.server.transport) == ("0.0.0.0", 8000, "http")
    assert (s.server.rate_limit_rps, s.server.rate_limit_burst) == (5, 15)
    assert (s.server.max_concurrent_searches, s.server.search_timeout_seconds) == (16, 30)
    assert s.server.jwt_secret is not None
    assert s.server.jwt_secret.get_secret_value() == "an-openwebui-secret-of-enough-length-123"
    q = s.storage.qdrant
    assert (s.storage.backend, q.url, q.timeout, q.collection_prefix) == (
        "qdrant",
        "http://localhost:6333",
        30,
        "aragog",
    )
    assert q.api_key is not None and q.api_key.get_secret_value() == "qdrant-key"
    e = s.embedding
    assert (e.provider, e.url, e.model, e.dimensions, e.timeout_seconds) == (
        "openai",
        "http://localhost:8001/v1",
        "BAAI/bge-m3",
        1024,
        15,
    )
    assert e.api_key_env == "DENSE_EMBEDDING_TOKEN"
    r = s.rerank
    assert (r.provider, r.api, r.url, r.model, r.timeout_seconds, r.score_threshold) == (
        "http",
        "vllm",
        "http://localhost:8002/v1/rerank",
        "BAAI/bge-reranker-v2-m3",
        15,
        0.2,
    )
    assert s.search.rerank is True
    n = s.enrich
    assert (n.url, n.model, n.workers, n.timeout_seconds, n.embed) == (
        "http://localhost:11434/v1",
        "gemma4:31b",
        3,
        300,
        True,
    )
    assert s.chunking.max_size == 4000 and s.limits.convert_timeout_seconds == 600
    lines = _warnings(caplog)
    unused = sorted(line.split(":")[0] for line in lines if ": not used: " in line)
    quiet = {"JWT_ALGORITHM", "SPARSE_EMBEDDING_DEVICE"}  # HS256 and cpu are what we do
    assert unused == sorted(
        n for n, rule in ARAGOG_VARIABLES.items() if rule.target is None and n not in quiet
    )
    carried = [line for line in lines if line.startswith("A-RAG-OG settings")]
    assert len(carried) == 1 and "RATE_LIMIT_RPS" in carried[0] and "MINIO" not in carried[0]
    assert len(lines) == len(unused) + 1


def test_aragog_variables_fill_only_what_the_yaml_leaves_unset(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PORT=8000\nRATE_LIMIT_RPS=5\nSEARCH_TIMEOUT=30\n")
    s = parse_settings(
        {"server": {"port": 9000, "transport": "both"}},
        env={"SEARCH_TIMEOUT": "12"},  # the environment wins over .env
        cwd=tmp_path,
    )
    assert (s.server.port, s.server.transport) == (9000, "both")
    assert (s.server.rate_limit_rps, s.server.search_timeout_seconds) == (5, 12)


def test_host_and_port_alone_do_not_mean_aragog(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("HOST=0.0.0.0\nPORT=8000\n")
    assert aragog_values({"HOST": "0.0.0.0"}, tmp_path) == {}
    s = parse_settings({}, env={"PORT": "1234"}, cwd=tmp_path)
    assert (s.server.host, s.server.port, s.server.transport) == ("127.0.0.1", 8090, "stdio")


def test_a_bad_aragog_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(Exception) as info:
        parse_settings({}, env={"RATE_LIMIT_RPS": "fast"}, cwd=tmp_path)
    assert "server.rate_limit_rps" in str(info.value)
    assert "(from A-RAG-OG's RATE_LIMIT_RPS)" in str(info.value)


def test_the_dense_token_of_a_dotenv_reaches_the_embedder_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DENSE_EMBEDDING_TOKEN", "")  # restored after the test
    (tmp_path / ".env").write_text(
        "DENSE_EMBEDDING_URL=http://127.0.0.1:9/v1\nDENSE_EMBEDDING_TOKEN=from-dotenv\n"
    )
    s = parse_settings({}, cwd=tmp_path)
    assert s.embedding.api_key_env == "DENSE_EMBEDDING_TOKEN"
    assert os.environ["DENSE_EMBEDDING_TOKEN"] == "from-dotenv"


def test_the_originals_fastembed_model_name_means_the_fastembed_provider(tmp_path: Path) -> None:
    (tmp_path / "my-model").mkdir()
    for model, provider in (
        ("BAAI/bge-small-en-v1.5", "fastembed"),
        ("all-MiniLM-L6-v2", "bundled"),  # the original's default is our bundled model
        ("my-model", "bundled"),  # a folder beside the file stays a folder
    ):
        path = write_config(tmp_path, f"embedding:\n  model: {model}\n")
        assert load_settings(path, env={}, cwd=tmp_path).settings.embedding.provider == provider
    path = write_config(tmp_path, "embedding:\n  provider: onnx\n  model: BAAI/x\n")
    assert load_settings(path, env={}, cwd=tmp_path).settings.embedding.provider == "onnx"


def test_types_only_the_original_listed_are_left_out_with_one_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "docs").mkdir()
    path = write_config(
        tmp_path,
        "corpora:\n  - name: a\n    path: docs\n    extensions: [.md, .csv, DOC]\n"
        "  - name: b\n    path: docs\n    extensions: [.xls]\n"
        "upload:\n  allow: [a]\n  allowed_extensions: [.md, .txt, .markdown, .pdf, .docx, .doc,"
        " .pptx, .ppt, .xlsx, .xls, .html, .htm, .csv]\n",
    )
    s = load_settings(path, env={}, cwd=tmp_path).settings
    assert s.corpora[0].extensions == [".md"]
    assert s.corpora[1].extensions == CorpusSettings.model_fields["extensions"].default_factory()
    assert ".csv" not in s.upload.allowed_extensions and ".pptx" in s.upload.allowed_extensions
    assert sorted(line.split(":")[0] for line in _warnings(caplog)) == [
        "corpora.0.extensions",
        "corpora.1.extensions",
        "upload.allowed_extensions",
    ]
    assert config_error(
        write_config(tmp_path, "corpora:\n  - {name: a, path: docs, extensions: [.exe]}\n"),
        env={},
        cwd=tmp_path,
    ).startswith("corpora.0.extensions: unsupported extension '.exe'")
