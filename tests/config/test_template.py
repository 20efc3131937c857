"""The commented file ``guaipeca init`` writes (template.py): it loads as the defaults, shows
every key with a comment, and its sample corpus loads once uncommented."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import yaml

from guaipeca.config import ENV_OVERRIDES, CorpusSettings, Settings, load_settings
from guaipeca.config.template import render_default_config
from support.config import setting_keys, write_config


def test_template_loads_as_the_defaults() -> None:
    template = render_default_config()
    assert Settings.model_validate(yaml.safe_load(template)) == Settings()


def test_template_file_loads_like_no_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    without = load_settings(env={"GUAIPECA_HOME": str(home)}, cwd=tmp_path)
    write_config(home, render_default_config())
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
    # corpora and access are lists: commented-out samples.
    expected = {f for f in setting_keys(Settings) if not f.startswith(("corpora", "access"))}
    sections = set(Settings.model_fields) - {"corpora", "access"}
    nested = {"storage.qdrant", "storage.postgres", "server.oidc", "server.claims"}
    assert _keys(data) == expected | nested | sections
    assert "# access:\n#   - who: {group: legal}" in template
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
    settings = load_settings(write_config(tmp_path, text), env={}).settings
    assert [(c.name, c.path, c.topic) for c in settings.corpora] == [
        ("notes", tmp_path, "my notes and papers")
    ]
