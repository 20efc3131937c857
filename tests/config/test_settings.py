"""Configuration: where the file is found, precedence (env > file > default), one-line
errors that name the key and the file, secrets that never show, and the `init` template."""

from __future__ import annotations

import inspect
import itertools
import re
from pathlib import Path
from typing import Any, assert_type

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from guaipeca.chunk import chunk_text
from guaipeca.config import (
    ENV_OVERRIDES,
    SUPPORTED_EXTENSIONS,
    ChunkingSettings,
    CorpusSettings,
    EmbeddingSettings,
    EngineSettings,
    LoadedSettings,
    SearchSettings,
    Settings,
    check_corpus_paths,
    config_path,
    engine_settings,
    home_dir,
    load_settings,
    parse_settings,
)
from guaipeca.config.template import render_default_config
from guaipeca.errors import ConfigError

SECRET = "s3cr3t-Token-value"


def _write(folder: Path, text: str, name: str = "guaipeca.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, **kw: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- where the file is --------------------------------------------------------------------
def test_config_path_prefers_flag_then_env_then_home_then_user_folder(tmp_path: Path) -> None:
    env = {"GUAIPECA_CONFIG": str(tmp_path / "env.yaml"), "GUAIPECA_HOME": str(tmp_path / "h")}
    assert config_path(tmp_path / "flag.yaml", env) == tmp_path / "flag.yaml"
    assert config_path(None, env) == tmp_path / "env.yaml"
    assert config_path(None, {"GUAIPECA_HOME": str(tmp_path / "h")}) == (
        tmp_path / "h" / "guaipeca.yaml"
    )
    assert config_path(None, {}) == Path.home() / ".guaipeca" / "guaipeca.yaml"
    assert config_path("~/x.yaml", {}) == Path.home() / "x.yaml"


def test_missing_default_file_gives_defaults_and_one_corpus_at_cwd(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "docs"
    cwd.mkdir()
    loaded = load_settings(env={"GUAIPECA_HOME": str(home)}, cwd=cwd)
    assert_type(loaded, LoadedSettings)
    assert loaded.source is None
    assert loaded.data_dir == home / "data"
    assert [(c.name, c.path) for c in loaded.settings.corpora] == [("default", cwd)]
    assert loaded.settings.model_copy(update={"corpora": []}) == Settings()


def test_file_in_guaipeca_home_is_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _write(home, "search: {top_k: 3}")
    loaded = load_settings(env={"GUAIPECA_HOME": str(home)}, cwd=tmp_path)
    assert loaded.source == home / "guaipeca.yaml"
    assert loaded.settings.search.top_k == 3


@pytest.mark.parametrize("via", ["flag", "env"])
def test_named_config_file_that_does_not_exist_is_an_error(tmp_path: Path, via: str) -> None:
    missing = tmp_path / "nope.yaml"
    env = {"GUAIPECA_CONFIG": str(missing)} if via == "env" else {}
    with pytest.raises(ConfigError, match=r"config file .*nope\.yaml not found") as info:
        load_settings(missing if via == "flag" else None, env=env, cwd=tmp_path)
    assert ("GUAIPECA_CONFIG" in str(info.value)) == (via == "env")


def test_relative_config_path_is_taken_from_cwd(tmp_path: Path) -> None:
    _write(tmp_path, "chunking: {max_size: 800}", "my.yaml")
    loaded = load_settings("my.yaml", env={}, cwd=tmp_path)
    assert loaded.source == tmp_path / "my.yaml"
    assert loaded.settings.chunking.max_size == 800


@pytest.mark.parametrize("text", ["", "# only a comment\n", "server:\n  # port: 1\n", "corpora:\n"])
def test_file_without_corpora_means_the_cwd_corpus(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    loaded = load_settings(path, env={}, cwd=tmp_path)
    assert loaded.source == path
    assert [(c.name, c.path) for c in loaded.settings.corpora] == [("default", tmp_path)]
    assert loaded.settings.server == Settings().server


def test_empty_corpora_list_means_no_corpora(tmp_path: Path) -> None:
    loaded = load_settings(_write(tmp_path, "corpora: []"), env={}, cwd=tmp_path)
    assert loaded.settings.corpora == []
    assert loaded.settings.engine().language == "english"


# -- values and paths ---------------------------------------------------------------------
def test_corpus_values_are_normalised_and_paths_resolved_from_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "notes").mkdir(parents=True)
    (tmp_path / "papers").mkdir()
    path = _write(
        conf,
        """
corpora:
  - name: notes
    path: notes
    extensions: [MD, txt, .PDF, md]
    language: Portuguese
    exclude: ["drafts/**"]
  - name: papers
    path: ../papers
    topic: research
    weight: 0.5
storage:
  data_dir: state
  backend: qdrant
  qdrant: {path: qdrant-local}
""",
    )
    settings = load_settings(path, env={}, cwd=tmp_path / "elsewhere").settings
    notes, papers = settings.corpora
    assert notes.path == conf / "notes"
    assert notes.extensions == [".md", ".txt", ".pdf"]
    assert notes.language == "portuguese"
    assert notes.exclude == ["drafts/**"]
    assert (papers.path, papers.topic, papers.weight) == (tmp_path / "papers", "research", 0.5)
    assert papers.extensions == list(SUPPORTED_EXTENSIONS)
    assert settings.storage.data_dir == conf / "state"
    assert settings.storage.qdrant.path == conf / "qdrant-local"


def test_tilde_is_expanded_in_paths(tmp_path: Path) -> None:
    path = _write(tmp_path, "corpora: [{name: home, path: ~/docs}]")
    settings = load_settings(path, env={}, cwd=tmp_path, check_paths=False).settings
    assert settings.corpora[0].path == Path("~/docs").expanduser()


def test_data_dir_comes_from_file_then_env(tmp_path: Path) -> None:
    path = _write(tmp_path, "storage: {data_dir: /srv/from-file}\ncorpora: []")
    assert load_settings(path, env={}).data_dir == Path("/srv/from-file")
    env = {"GUAIPECA_DATA_DIR": "rel/data", "GUAIPECA_HOME": str(tmp_path / "h")}
    assert load_settings(path, env=env, cwd=tmp_path / "run").data_dir == (
        tmp_path / "run" / "rel" / "data"
    )
    assert home_dir({"GUAIPECA_HOME": str(tmp_path / "h")}) == tmp_path / "h"


def test_env_overrides_file_which_overrides_defaults(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "server: {host: 10.0.0.1, port: 9000, auth_token: from-file}\n"
        "storage: {qdrant: {api_key: file-key}}\ncorpora: []",
    )
    from_file = load_settings(path, env={}).settings.server
    assert (from_file.host, from_file.port, from_file.transport) == ("10.0.0.1", 9000, "stdio")
    assert from_file.auth_token == SecretStr("from-file")
    env = {
        "GUAIPECA_HOST": "0.0.0.0",
        "GUAIPECA_PORT": "9100",
        "GUAIPECA_AUTH_TOKEN": SECRET,
        "GUAIPECA_JWT_SECRET": "jwt-" + SECRET,
        "GUAIPECA_QDRANT_API_KEY": "qdrant-" + SECRET,
        "GUAIPECA_ENRICH_API_KEY": "enrich-" + SECRET,
        "GUAIPECA_PORT_UNRELATED": "x",
    }
    settings = load_settings(path, env=env).settings
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 9100)
    assert settings.server.auth_token is not None
    assert settings.server.auth_token.get_secret_value() == SECRET
    assert settings.server.jwt_secret == SecretStr("jwt-" + SECRET)
    assert settings.storage.qdrant.api_key == SecretStr("qdrant-" + SECRET)
    assert settings.enrich.api_key == SecretStr("enrich-" + SECRET)


def test_empty_env_variable_counts_as_unset(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {auth_token: from-file}\ncorpora: []")
    settings = load_settings(path, env={"GUAIPECA_AUTH_TOKEN": "", "GUAIPECA_PORT": ""}).settings
    assert settings.server.auth_token == SecretStr("from-file")
    assert settings.server.port == 8090


def test_env_overrides_apply_without_a_file(tmp_path: Path) -> None:
    env = {"GUAIPECA_HOME": str(tmp_path), "GUAIPECA_PORT": "7000"}
    assert load_settings(env=env, cwd=tmp_path).settings.server.port == 7000


# -- errors: one line, key path, file ---------------------------------------------------
ERRORS = [
    ("embedding: {modle: x}", "embedding.modle: unknown key (did you mean 'model'?)"),
    ("search: {top_k: many}", "search.top_k: must be a whole number, got 'many'"),
    ("search: {mode: fuzzy}", "search.mode: must be one of 'hybrid', 'dense' or 'keyword'"),
    ("corpora: [{name: a, path: ., weight: -1}]", "corpora.0.weight: must be >= 0, got -1"),
    ("chunking: {max_size: .inf}", "chunking.max_size: must be a finite number"),
    ("server: {port: 70000}", "server.port: must be <= 65535, got 70000"),
    ("server: [1, 2]", "server: must be a section"),
    ("corpora: [{name: a, path: .}, {name: A, path: .}]", "corpora.1.name: 'A' is already"),
    ("corpora: [{name: 'a b', path: .}]", "corpora.0.name: 'a b' is not a valid name"),
    ("corpora: [{name: 2024, path: .}]", "corpora.0.name: must be text, got 2024 (put it in"),
    ("corpora: [{path: .}]", "corpora.0.name: required key is missing"),
    ("corpora: [{name: a, path: ''}]", "corpora.0.path: must not be empty"),
    ("corpora: [{name: a, path: ., extensions: [.exe]}]", "corpora.0.extensions: unsupported"),
    ("corpora: [{name: a, path: ., language: klingon}]", "corpora.0.language: unknown language"),
    ("corpora: [{name: a, path: ., exclude: [/abs]}]", "corpora.0.exclude: pattern '/abs'"),
    ("corpora: [{name: a, path: .}]\nupload: {allow: [a, b]}", "upload.allow.1: 'b' is not a"),
    ("upload: {allowed_extensions: [exe]}", "upload.allowed_extensions: unsupported"),
    ("storage: {backend: qdrant}", "storage.qdrant: set exactly one of url or path"),
    (
        "storage: {backend: qdrant, qdrant: {url: 'http://q:6333', path: /q}}",
        "storage.qdrant: set exactly one of url or path when backend is qdrant (not both)",
    ),
    ("storage: {qdrant: {url: 'q:6333'}}", "storage.qdrant.url: must be an http:// or https://"),
    (
        "server: {auth_token: tok, cors_origins: ['https://a.org', '*']}",
        "server.cors_origins.1: '*' is not allowed when server.auth_token",
    ),
    ("server: {jwt_secret: k, cors_origins: ['*']}", "server.cors_origins.0: '*' is not allowed"),
    ("server: {cors_origins: ['https://a.org/']}", "server.cors_origins.0: 'https://a.org/' is"),
    ("server: {auth_token: '  '}", "server.auth_token: must not be empty"),
    ("enrich: {url: 'http://localhost:11434/v1'}", "enrich.model: required when enrich.url"),
    ("7: x", "7: unknown key (valid keys: corpora, embedding"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_each_problem_is_one_line_naming_key_and_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = _write(tmp_path, text)
    message = _error(path, env={}, cwd=tmp_path)
    assert expected in message
    assert f"(in {path})" in message


def test_wildcard_cors_is_fine_without_auth(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {cors_origins: ['*']}")
    assert load_settings(path, env={}, cwd=tmp_path).settings.server.cors_origins == ["*"]


def test_wildcard_cors_with_auth_from_env_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {cors_origins: ['*']}")
    message = _error(path, env={"GUAIPECA_AUTH_TOKEN": SECRET}, cwd=tmp_path)
    assert "server.cors_origins.0" in message
    assert SECRET not in message


def test_several_problems_are_joined_on_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "search: {top_k: 0, mode: x}\nserver: {prot: 1}")
    parts = _error(path, env={}, cwd=tmp_path).split("; ")
    assert [p.split(":")[0] for p in parts] == ["search.mode", "search.top_k", "server.prot"]
    assert all(p.endswith(f"(in {path})") for p in parts)


def test_missing_corpus_folders_name_the_key_and_file(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    (tmp_path / "file.txt").write_text("x")
    path = _write(
        tmp_path,
        "corpora: [{name: a, path: here}, {name: b, path: gone}, {name: c, path: file.txt}]",
    )
    message = _error(path, env={}, cwd=tmp_path)
    assert message == (
        f"corpora.1.path: folder {tmp_path / 'gone'} does not exist (in {path}); "
        f"corpora.2.path: {tmp_path / 'file.txt'} is not a folder (in {path})"
    )


def test_missing_folders_do_not_stop_commands_that_do_not_read_them(tmp_path: Path) -> None:
    path = _write(tmp_path, "corpora: [{name: usb, path: /media/unplugged/docs}]")
    loaded = load_settings(path, env={}, check_paths=False)
    assert loaded.settings.corpora[0].path == Path("/media/unplugged/docs")
    with pytest.raises(ConfigError, match=rf"^corpora\.0\.path: .* \(in {re.escape(str(path))}\)$"):
        check_corpus_paths(loaded)
    with pytest.raises(ConfigError, match=r"^corpora\.0\.path: folder \S+ does not exist$"):
        check_corpus_paths(loaded.settings)


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    path = _write(tmp_path, "corpora: []")
    message = _error(path, env={"GUAIPECA_PORT": "eighty"})
    assert message == (
        "server.port: must be a whole number, got 'eighty' "
        "(from environment variable GUAIPECA_PORT)"
    )
    message = _error(path, env={"GUAIPECA_PORT": "0"})
    assert "GUAIPECA_PORT" in message
    assert "must be >= 1" in message


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "search:\n  top_k: 5\n  mode: [hybrid\n")
    message = _error(path, env={})
    assert message.startswith(f"invalid YAML in {path}: line 4, column 1:")


def test_duplicate_yaml_key_is_an_error_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "search:\n  top_k: 5\n  top_k: 6\n")
    assert (
        _error(path, env={}) == f"invalid YAML in {path}: line 3, column 3: duplicate key 'top_k'"
    )


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = _write(tmp_path, "search:\n  <<: {top_k: 5, mode: dense}\n  top_k: 6\n")
    search = load_settings(path, env={}, cwd=tmp_path).settings.search
    assert (search.top_k, search.mode) == (6, "dense")


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b", "a list"), ("just text", "text")])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = _write(tmp_path, text)
    message = _error(path, env={})
    assert message.startswith("<root>: must be a mapping of sections (corpora, embedding")
    assert message.endswith(f"got {kind} (in {path})")


def test_unreadable_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    assert "is a folder" in _error(tmp_path / "dir.yaml", env={})
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in _error(tmp_path / "bin.yaml", env={})


# -- secrets --------------------------------------------------------------------------------
def test_secrets_never_appear_in_reprs(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"server: {{auth_token: {SECRET}}}\nenrich: {{api_key: e-{SECRET}}}\ncorpora: []",
    )
    env = {"GUAIPECA_JWT_SECRET": f"j-{SECRET}", "GUAIPECA_QDRANT_API_KEY": f"q-{SECRET}"}
    loaded = load_settings(path, env=env)
    for text in (repr(loaded), str(loaded.settings), loaded.settings.model_dump_json()):
        assert SECRET not in text
    assert "**********" in repr(loaded.settings.server)


@pytest.mark.parametrize(
    "text",
    [
        f"server: {{auth_tokn: {SECRET}}}",  # misspelt key: its value is still a secret
        f"server: {{auth_token: [{SECRET}]}}",
        f"server: {{jwt_secret: {{k: {SECRET}}}}}",
        f"server: {{auth_token: {SECRET}, cors_origins: ['*']}}",
        f"storage: {{qdrant: {{api_key: {SECRET}, nope: 1}}}}",
        SECRET,  # a token pasted into the wrong file
    ],
)
def test_secrets_never_appear_in_error_messages(tmp_path: Path, text: str) -> None:
    message = _error(_write(tmp_path, text), env={}, cwd=tmp_path)
    assert SECRET not in message


# -- the engine's settings ------------------------------------------------------------------
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


# -- the template ---------------------------------------------------------------------------
def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(_fields(annotation, f"{prefix}{name}."))
        else:
            out.append(f"{prefix}{name}")
    return out


def test_template_loads_as_the_defaults() -> None:
    template = render_default_config()
    assert Settings.model_validate(yaml.safe_load(template)) == Settings()


def test_template_file_loads_like_no_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    without = load_settings(env={"GUAIPECA_HOME": str(home)}, cwd=tmp_path)
    _write(home, render_default_config())
    with_template = load_settings(env={"GUAIPECA_HOME": str(home)}, cwd=tmp_path)
    assert with_template.source == home / "guaipeca.yaml"
    assert with_template.settings == without.settings


def _keys(data: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for key, value in data.items():
        out.add(prefix + key)
        if isinstance(value, dict):
            out |= _keys(value, f"{prefix}{key}.")
    return out


def _uncommented_sample(template: str, folder: Path) -> str:
    lines = template.splitlines()
    start = lines.index("# corpora:")
    end = lines.index("", start)
    sample = [line[2:] for line in lines[start:end]]
    return "\n".join(lines[:start] + sample + lines[end:]).replace("~/Documents", str(folder))


def test_template_shows_every_key_with_a_comment_above_it(tmp_path: Path) -> None:
    template = render_default_config()
    data = yaml.safe_load(template)
    expected = {f for f in _fields(Settings) if not f.startswith("corpora")}
    assert _keys(data) == expected | {"storage.qdrant"} | set(Settings.model_fields) - {"corpora"}
    sample = yaml.safe_load(_uncommented_sample(template, tmp_path))["corpora"]
    assert len(sample) == 1
    assert set(sample[0]) == set(CorpusSettings.model_fields)
    lines = _uncommented_sample(template, tmp_path).splitlines()
    for before, line in itertools.pairwise(lines):
        if re.match(r"^[\s-]*\w+:", line):
            assert re.match(r"^\s*# \S", before), line
    assert all(len(line) <= 100 for line in template.splitlines())


def test_template_says_secrets_come_from_env() -> None:
    template = render_default_config()
    assert "Secrets belong in environment variables" in template
    for var in ENV_OVERRIDES:
        assert var in template


def test_uncommented_sample_corpus_loads(tmp_path: Path) -> None:
    text = _uncommented_sample(render_default_config(), tmp_path)
    settings = load_settings(_write(tmp_path, text), env={}).settings
    assert [(c.name, c.path, c.topic) for c in settings.corpora] == [
        ("notes", tmp_path, "my notes and papers")
    ]


# -- robustness ----------------------------------------------------------------------------
_SECTIONS: dict[str, list[str]] = {
    "corpora": list(CorpusSettings.model_fields),
    **{
        name: _fields(field.annotation)  # type: ignore[arg-type]
        for name, field in Settings.model_fields.items()
        if name != "corpora"
    },
}
_INTERESTING = st.sampled_from(
    ["", ".", "*", "~", "~nosuchuser/x", "md", ".pdf", "qdrant", "http://x", "english",
     "portuguese", "hybrid", "http", "a\x00b", "-1", "1e999", "default", "notes"]
)  # fmt: skip
_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | _INTERESTING
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


def _section(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    names = [k.split(".")[-1] for k in keys]
    return st.dictionaries(st.sampled_from([*names, "bogus"]), _VALUES, max_size=5)


_CONFIGS = st.dictionaries(
    st.sampled_from([*_SECTIONS, "extra"]),
    st.one_of(
        _VALUES,
        st.lists(_section(_SECTIONS["corpora"]), max_size=3),
        *[_section(keys) for keys in _SECTIONS.values()],
    ),
    max_size=6,
)
_ENVS = st.dictionaries(st.sampled_from(sorted(ENV_OVERRIDES)), _INTERESTING | st.text())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_CONFIGS, env=_ENVS)
def test_any_mapping_loads_or_raises_a_one_line_config_error(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any], env: dict[str, str]
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    try:
        parse_settings(data, source=folder / "guaipeca.yaml", env=env, cwd=folder)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    path = _write(folder, yaml.safe_dump(data, allow_unicode=True))
    try:
        load_settings(path, env=env, cwd=folder)
    except ConfigError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80))
def test_any_text_loads_or_raises_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    folder = tmp_path_factory.mktemp("text")
    try:
        load_settings(_write(folder, text), env={}, cwd=folder)
    except ConfigError as exc:
        assert "\n" not in str(exc)
