"""The commented YAML file ``guaipeca init`` writes: every section and key of
:class:`~guaipeca.config.settings.Settings` with its default and a one-line comment."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import yaml
from pydantic import (
    BaseModel,
    SecretStr,
)

from guaipeca.config.loading import ENV_OVERRIDES
from guaipeca.config.messages import annotation_at
from guaipeca.config.sections import CorpusSettings
from guaipeca.config.settings import Settings

__all__ = ["render_default_config"]

_HEADER = """\
# Guaipeca configuration.
#
# Every key shows its default: delete what you do not change. Precedence is
# command-line options > GUAIPECA_* environment variables > this file > defaults.
# Relative paths are relative to the folder of this file; ~ is your home folder.
#
# Secrets belong in environment variables, not in this file:
{secrets}
# These environment variables override the file as well:
{others}
# GUAIPECA_CONFIG names another config file; GUAIPECA_HOME moves ~/.guaipeca.
"""

_CORPORA = """\
# Document folders to index. While there is no `corpora` key (as here), Guaipeca
# indexes the folder it runs in, as one corpus named "default". To name your own
# folders, uncomment this list and add an entry per folder:
# corpora:
{items}
"""

_ACCESS = """\
# Who may read and write which corpora. While there is no `access` key (as here),
# every valid credential reads and writes every corpus. Each grant names whom
# (token, subject, group, role or scope of a JWT, or anyone: true), the corpora
# (or "*") and what they can (read; write includes read):
# access:
#   - who: {group: legal}
#     corpora: [contracts]
#     can: [read, write]
#   - who: {anyone: true}
#     corpora: [handbook]
#     can: [read]
"""

_SAMPLE_CORPUS: Final[Mapping[str, object]] = MappingProxyType(
    {"name": "notes", "path": "~/Documents", "topic": "my notes and papers"}
)


def _yaml_scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    text = str(value)
    # Plain when YAML reads it back as the same string, else JSON-style double quotes
    # (a valid YAML scalar).
    try:
        plain = yaml.safe_load(text) == text and not any(c in text for c in "#:,[]{}")
    except yaml.YAMLError:
        plain = False
    return text if plain and text else json.dumps(text, ensure_ascii=False)


_WIDTH = 100


def _key_lines(lead: str, name: str, value: object) -> list[str]:
    """``name: value`` after ``lead``; a list too long for one line is a flow sequence
    wrapped onto lines indented deeper than the key (valid YAML, within ``_WIDTH``)."""
    line = f"{lead}{name}: {_yaml_scalar(value)}"
    if len(line) <= _WIDTH or not isinstance(value, list | tuple) or not value:
        return [line]
    cont = lead.replace("-", " ") + "  "
    items = [_yaml_scalar(v) for v in value]
    out: list[str] = []
    current = f"{lead}{name}: ["
    for i, item in enumerate(items):
        piece = item + ("]" if i == len(items) - 1 else ",")
        if len(current) + 1 + len(piece) > _WIDTH and not current.endswith("["):
            out.append(current)
            current = cont + piece
        else:
            current += ("" if current.endswith("[") else " ") + piece
    out.append(current)
    return out


def _section_lines(model: type[BaseModel], instance: BaseModel, indent: str) -> list[str]:
    lines = []
    for name, field in model.model_fields.items():
        value = getattr(instance, name)
        lines.append(f"{indent}# {field.description}")
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines.extend(_section_lines(type(value), value, indent + "  "))
        else:
            lines.extend(_key_lines(indent, name, value))
    return lines


def render_default_config() -> str:
    """The commented YAML that ``guaipeca init`` writes.

    Every section and key appears with its default and a one-line comment; the corpus
    list is a commented-out sample, so the file loads as the defaults (one corpus at
    the current folder) until the user edits it, even where the sample folder does not
    exist.
    """
    rows: dict[bool, list[str]] = {True: [], False: []}  # secret or not
    for var, loc in ENV_OVERRIDES.items():
        secret = annotation_at(Settings, loc) is SecretStr
        rows[secret].append(f"#   {var:<24} {'.'.join(loc)}")
    header = _HEADER.format(secrets="\n".join(rows[True]), others="\n".join(rows[False]))
    item: list[str] = []
    for name, field in CorpusSettings.model_fields.items():
        value = _SAMPLE_CORPUS.get(name, field.get_default(call_default_factory=True))
        item.append(f"#     # {field.description}")
        lead = "#   - " if name == "name" else "#     "
        item.extend(_key_lines(lead, name, value))
    parts = [header, _CORPORA.format(items="\n".join(item))]
    defaults = Settings()
    for section in list(Settings.model_fields)[1:]:  # after corpora
        value = getattr(defaults, section)
        if not isinstance(value, BaseModel):  # access: a list, shown as a sample
            parts.append(_ACCESS)
            continue
        about = str(Settings.model_fields[section].description)
        lines = [f"# {about[0].upper()}{about[1:]}.", f"{section}:"]
        lines.extend(_section_lines(type(value), value, "  "))
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)
