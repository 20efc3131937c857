"""Helpers of the configuration tests: writing a config file, the one-line error of loading
one, and every key path of a settings model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from guaipeca.config import load_settings
from guaipeca.errors import ConfigError

#: A secret value that must never show in a repr or an error message.
SECRET = "s3cr3t-Token-value"


def write_config(folder: Path, text: str, name: str = "guaipeca.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path, **kw: Any) -> str:
    """The message of the ConfigError loading ``path`` raises, checked to be one line."""
    with pytest.raises(ConfigError) as info:
        load_settings(path, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


def setting_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key below ``model``, dotted (``server.port``)."""
    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(setting_keys(annotation, f"{prefix}{name}."))
        else:
            out.append(f"{prefix}{name}")
    return out
