"""Loading the configuration (loading.py): where the file is found, precedence (env > file >
default), paths taken from the file's folder, YAML and file problems as one line naming the
file, and any input loading or failing with a one-line ConfigError."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, assert_type

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from guaipeca.config import (
    ENV_OVERRIDES,
    SUPPORTED_EXTENSIONS,
    AccessGrant,
    CorpusSettings,
    LoadedSettings,
    Settings,
    Who,
    check_corpus_paths,
    config_path,
    home_dir,
    load_settings,
    parse_settings,
)
from guaipeca.errors import ConfigError
from support.config import SECRET, config_error, setting_keys, write_config


# -- where the file is -------------------------------------------------------------------
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
    write_config(home, "search: {top_k: 3}")
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
    write_config(tmp_path, "chunking: {max_size: 800}", "my.yaml")
    loaded = load_settings("my.yaml", env={}, cwd=tmp_path)
    assert loaded.source == tmp_path / "my.yaml"
    assert loaded.settings.chunking.max_size == 800


@pytest.mark.parametrize("text", ["", "# only a comment\n", "server:\n  # port: 1\n", "corpora:\n"])
def test_file_without_corpora_means_the_cwd_corpus(tmp_path: Path, text: str) -> None:
    path = write_config(tmp_path, text)
    loaded = load_settings(path, env={}, cwd=tmp_path)
    assert loaded.source == path
    assert [(c.name, c.path) for c in loaded.settings.corpora] == [("default", tmp_path)]
    assert loaded.settings.server == Settings().server


def test_empty_corpora_list_means_no_corpora(tmp_path: Path) -> None:
    loaded = load_settings(write_config(tmp_path, "corpora: []"), env={}, cwd=tmp_path)
    assert loaded.settings.corpora == []
    assert loaded.settings.engine().language == "english"


# -- values and paths --------------------------------------------------------------------
def test_corpus_values_are_normalised_and_paths_resolved_from_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "notes").mkdir(parents=True)
    (tmp_path / "papers").mkdir()
    path = write_config(
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
    path = write_config(tmp_path, "corpora: [{name: home, path: ~/docs}]")
    settings = load_settings(path, env={}, cwd=tmp_path, check_paths=False).settings
    assert settings.corpora[0].path == Path("~/docs").expanduser()


def test_data_dir_comes_from_file_then_env(tmp_path: Path) -> None:
    path = write_config(tmp_path, "storage: {data_dir: /srv/from-file}\ncorpora: []")
    assert load_settings(path, env={}).data_dir == Path("/srv/from-file")
    env = {"GUAIPECA_DATA_DIR": "rel/data", "GUAIPECA_HOME": str(tmp_path / "h")}
    assert load_settings(path, env=env, cwd=tmp_path / "run").data_dir == (
        tmp_path / "run" / "rel" / "data"
    )
    assert home_dir({"GUAIPECA_HOME": str(tmp_path / "h")}) == tmp_path / "h"


def test_env_overrides_file_which_overrides_defaults(tmp_path: Path) -> None:
    path = write_config(
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
    path = write_config(tmp_path, "server: {auth_token: from-file}\ncorpora: []")
    settings = load_settings(path, env={"GUAIPECA_AUTH_TOKEN": "", "GUAIPECA_PORT": ""}).settings
    assert settings.server.auth_token == SecretStr("from-file")
    assert settings.server.port == 8090


def test_env_overrides_apply_without_a_file(tmp_path: Path) -> None:
    env = {"GUAIPECA_HOME": str(tmp_path), "GUAIPECA_PORT": "7000"}
    assert load_settings(env=env, cwd=tmp_path).settings.server.port == 7000


# -- the file and its folders ------------------------------------------------------------
def test_missing_corpus_folders_name_the_key_and_file(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    (tmp_path / "file.txt").write_text("x")
    path = write_config(
        tmp_path,
        "corpora: [{name: a, path: here}, {name: b, path: gone}, {name: c, path: file.txt}]",
    )
    message = config_error(path, env={}, cwd=tmp_path)
    assert message == (
        f"corpora.1.path: folder {tmp_path / 'gone'} does not exist (in {path}); "
        f"corpora.2.path: {tmp_path / 'file.txt'} is not a folder (in {path})"
    )


def test_missing_folders_do_not_stop_commands_that_do_not_read_them(tmp_path: Path) -> None:
    path = write_config(tmp_path, "corpora: [{name: usb, path: /media/unplugged/docs}]")
    loaded = load_settings(path, env={}, check_paths=False)
    assert loaded.settings.corpora[0].path == Path("/media/unplugged/docs")
    with pytest.raises(ConfigError, match=rf"^corpora\.0\.path: .* \(in {re.escape(str(path))}\)$"):
        check_corpus_paths(loaded)
    with pytest.raises(ConfigError, match=r"^corpora\.0\.path: folder \S+ does not exist$"):
        check_corpus_paths(loaded.settings)


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search:\n  top_k: 5\n  mode: [hybrid\n")
    message = config_error(path, env={})
    assert message.startswith(f"invalid YAML in {path}: line 4, column 1:")


def test_duplicate_yaml_key_is_an_error_with_its_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search:\n  top_k: 5\n  top_k: 6\n")
    assert (
        config_error(path, env={})
        == f"invalid YAML in {path}: line 3, column 3: duplicate key 'top_k'"
    )


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = write_config(tmp_path, "search:\n  <<: {top_k: 5, mode: dense}\n  top_k: 6\n")
    search = load_settings(path, env={}, cwd=tmp_path).settings.search
    assert (search.top_k, search.mode) == (6, "dense")


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b", "a list"), ("just text", "text")])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = write_config(tmp_path, text)
    message = config_error(path, env={})
    assert message.startswith("<root>: must be a mapping of sections (corpora, embedding")
    assert message.endswith(f"got {kind} (in {path})")


def test_unreadable_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    assert "is a folder" in config_error(tmp_path / "dir.yaml", env={})
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in config_error(tmp_path / "bin.yaml", env={})


# -- robustness --------------------------------------------------------------------------
_SECTIONS: dict[str, list[str]] = {
    "corpora": list(CorpusSettings.model_fields),
    "access": list(AccessGrant.model_fields) + [f"who.{k}" for k in Who.model_fields],
    **{
        name: setting_keys(field.annotation)  # type: ignore[arg-type]
        for name, field in Settings.model_fields.items()
        if name not in ("corpora", "access")
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
        st.lists(_section(_SECTIONS["access"]), max_size=3),
        *[_section(keys) for keys in _SECTIONS.values()],
    ),
    max_size=6,
)
_ENVS = st.dictionaries(st.sampled_from(sorted(ENV_OVERRIDES)), _INTERESTING | st.text())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_CONFIGS, env=_ENVS)
@example(data={"corpora": [{"name": None, "extensions": [[]]}]}, env={})  # a list as a type
@example(data={"upload": {"allowed_extensions": [{"a": 1}, ".doc"]}}, env={})
def test_any_mapping_loads_or_raises_a_one_line_config_error(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any], env: dict[str, str]
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    try:
        parse_settings(data, source=folder / "guaipeca.yaml", env=env, cwd=folder)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    path = write_config(folder, yaml.safe_dump(data, allow_unicode=True))
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
        load_settings(write_config(folder, text), env={}, cwd=folder)
    except ConfigError as exc:
        assert "\n" not in str(exc)
