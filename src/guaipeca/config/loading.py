"""Loading: one YAML file, ``GUAIPECA_*`` environment overrides, validated and frozen (§1).

Precedence is command-line arguments (applied by the CLI) > environment variables > the
YAML file > defaults. Every problem becomes one line ``key.path: message (in FILE)``, all
problems of one file joined with ``"; "``, and no secret value is ever echoed: secrets are
:class:`pydantic.SecretStr`, whose ``repr`` shows only stars.

Here: where the file is (:func:`config_path`), reading it (:func:`load_settings`,
:func:`parse_settings`), the corpus folder check, and the one-line errors of a bad value
(:func:`format_validation_error`, :func:`engine_settings`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml
from pydantic import BaseModel, ValidationError

from guaipeca.config.engine import (
    ChunkingSettings,
    EmbeddingSettings,
    EngineSettings,
    EnrichSettings,
    RerankSettings,
    SearchSettings,
)
from guaipeca.config.fields import expand_user, home_dir
from guaipeca.config.identity import ClaimSettings, OidcSettings
from guaipeca.config.legacy import EXPORTED, aragog_values, translate
from guaipeca.config.messages import format_problems, value_kind
from guaipeca.config.sections import (
    CorpusSettings,
    OcrSettings,
    PostgresSettings,
    QdrantSettings,
    ServerSettings,
    StorageSettings,
    UploadSettings,
)
from guaipeca.config.settings import Settings
from guaipeca.errors import ConfigError

__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT_CORPUS",
    "ENV_OVERRIDES",
    "LoadedSettings",
    "check_corpus_paths",
    "config_path",
    "engine_settings",
    "format_validation_error",
    "load_settings",
    "parse_settings",
]

log = logging.getLogger("guaipeca")

CONFIG_FILENAME: Final = "guaipeca.yaml"
#: Where the original Guaipeca also looked, after the home folder's file: the working
#: folder, then its config/ folder (a checkout of the original keeps its sample there).
FALLBACK_CONFIGS: Final = (Path(CONFIG_FILENAME), Path("config") / CONFIG_FILENAME)
DEFAULT_CORPUS: Final = "default"

#: Environment variables that override a key of the file (env > file > default).
ENV_OVERRIDES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "GUAIPECA_AUTH_TOKEN": ("server", "auth_token"),
        "GUAIPECA_JWT_SECRET": ("server", "jwt_secret"),
        "GUAIPECA_HOST": ("server", "host"),
        "GUAIPECA_PORT": ("server", "port"),
        "GUAIPECA_QDRANT_API_KEY": ("storage", "qdrant", "api_key"),
        "GUAIPECA_POSTGRES_DSN": ("storage", "postgres", "dsn"),
        "GUAIPECA_POSTGRES_READ_DSN": ("storage", "postgres", "read_dsn"),
        "GUAIPECA_ENRICH_API_KEY": ("enrich", "api_key"),
        "GUAIPECA_RERANK_API_KEY": ("rerank", "api_key"),
        "GUAIPECA_DATA_DIR": ("storage", "data_dir"),
    }
)


_MODELS: Final[Mapping[str, type[BaseModel]]] = MappingProxyType(
    {
        m.__name__: m
        for m in (
            Settings,
            EngineSettings,
            CorpusSettings,
            ChunkingSettings,
            EmbeddingSettings,
            SearchSettings,
            RerankSettings,
            ServerSettings,
            UploadSettings,
            StorageSettings,
            QdrantSettings,
            PostgresSettings,
            EnrichSettings,
            OcrSettings,
            OidcSettings,
            ClaimSettings,
        )
    }
)


def format_validation_error(
    err: ValidationError, source: str | os.PathLike[str] | None = None
) -> str:
    """One line per problem, ``key.path: message (in FILE)``, joined with ``"; "`` (no
    message contains ``"; "`` itself, so the line splits back into problems).

    Pydantic's wording is rewritten for people ("must be >= 0, got -1", "unknown key (did
    you mean 'model'?)"), and values of secret keys and unknown keys are never shown.
    """
    return format_problems(err, source, root=_MODELS.get(err.title))


def engine_settings(**values: object) -> EngineSettings:
    """Build settings from keyword values, raising ConfigError with the key on a bad one.

    Raises:
        ConfigError: a value is unknown, of the wrong type or out of range.
    """
    try:
        return EngineSettings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


@dataclass(frozen=True)
class LoadedSettings:
    """Settings with where they came from: ``source`` is None when no file was read."""

    settings: Settings
    source: Path | None
    data_dir: Path


def _locate(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[Path, str | None]:
    if explicit is not None and os.fspath(explicit) != "":
        given, origin = Path(explicit), "--config"
    elif env.get("GUAIPECA_CONFIG"):
        given, origin = Path(env["GUAIPECA_CONFIG"]), "GUAIPECA_CONFIG"
    else:
        return home_dir(env) / CONFIG_FILENAME, None
    try:
        return expand_user(given), origin
    except ValueError as exc:
        raise ConfigError(f"{origin}: {exc}") from None


def config_path(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] = os.environ
) -> Path:
    """The config file to read: ``--config PATH`` > ``$GUAIPECA_CONFIG`` >
    ``$GUAIPECA_HOME/guaipeca.yaml`` > ``~/.guaipeca/guaipeca.yaml`` (``~`` expanded; the
    file need not exist). When that last one does not exist, :func:`load_settings` reads
    ``./guaipeca.yaml`` or ``./config/guaipeca.yaml`` instead, as the original Guaipeca
    did (``FALLBACK_CONFIGS``)."""
    return _locate(explicit, env)[0]


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key written twice in one mapping (PyYAML keeps the last,
    silently dropping the first — almost always a mistake in a config file)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {str(key)[:60]!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise ConfigError(f"invalid YAML in {path}: {at}{what}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {path}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"invalid YAML in {path}: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer too long for Python to convert
        raise ConfigError(f"invalid YAML in {path}: {' '.join(str(exc).split())}") from None


def _apply_env(
    data: dict[Any, Any], env: Mapping[str, str], cwd: Path
) -> dict[tuple[Any, ...], str]:
    """Write ``GUAIPECA_*`` overrides into ``data`` (copying the sections it touches);
    return which key came from which variable. Empty variables count as unset."""
    applied: dict[tuple[Any, ...], str] = {}
    for var, loc in ENV_OVERRIDES.items():
        value = env.get(var)
        if not value:
            continue
        target = data
        for key in loc[:-1]:
            child = target.get(key)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                break  # the section itself is wrong; validation says so
            target[key] = child = dict(child)
            target = child
        else:
            if loc == ("storage", "data_dir") and not value.startswith("~"):
                # Relative to where the command runs, not to the config file.
                value = os.path.normpath(cwd / value)
            target[loc[-1]] = value
            applied[loc] = var
    return applied


def parse_settings(
    data: object,
    *,
    source: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
    aragog: bool = True,
) -> Settings:
    """Validate a mapping (a parsed YAML file) with the environment's overrides.

    Relative paths in ``data`` are taken from ``source``'s folder (else from ``cwd``). A
    missing or null ``corpora`` key means one corpus named ``default`` at ``cwd`` (the
    quick start); ``corpora: []`` means none. The original Guaipeca's keys are read as ours
    and, with ``aragog``, A-RAG-OG's variables fill keys left unset (config/legacy.py);
    each one not carried over is one warning line.

    Raises:
        ConfigError: ``data`` is not a mapping, or any key is unknown, of the wrong type,
            out of range or inconsistent with another; one line per problem.
    """
    cwd = Path(os.path.abspath(cwd if cwd is not None else Path.cwd()))
    where = f" (in {os.fspath(source)})" if source is not None else ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"<root>: must be a mapping of sections ({', '.join(Settings.model_fields)}), "
            f"got {value_kind(data)}{where}"
        )
    old_env = aragog_values(env, cwd) if aragog else {}
    for name in EXPORTED:
        if name in old_env and env is os.environ and not os.environ.get(name):
            os.environ[name] = old_env[name]
    base = Path(os.path.abspath(Path(source).parent)) if source is not None else cwd
    moved = translate(data, old_env, base)
    data = moved.data
    for note in moved.notes:
        log.warning("%s%s", note, where)
    carried = sorted({old for old in moved.origin.values() if old.isupper()})
    if carried:
        log.warning("A-RAG-OG settings read from the environment or ./.env: %s", ", ".join(carried))
    if data.get("corpora") is None:
        data["corpora"] = [{"name": DEFAULT_CORPUS, "path": str(cwd)}]
    from_env = _apply_env(data, env, cwd)
    try:
        return Settings.model_validate(data, context={"base_dir": base})
    except ValidationError as exc:
        raise ConfigError(format_problems(exc, source, from_env, Settings, moved.origin)) from None
    except RecursionError:
        raise ConfigError(f"<root>: nested too deeply{where}") from None


def load_settings(
    explicit: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
    check_paths: bool = True,
) -> LoadedSettings:
    """Find, read and validate the configuration (see :func:`config_path`).

    A missing file at the default location means defaults with one corpus named
    ``default`` at ``cwd`` (the current folder); so does a file without a ``corpora`` key
    (an empty or all-comments file, or the template :func:`render_default_config`).
    ``check_paths=False`` skips :func:`check_corpus_paths`, for commands such as
    ``status`` that must work while a corpus's disk is unplugged.

    Raises:
        ConfigError: a file named by ``--config`` or ``GUAIPECA_CONFIG`` does not exist,
            the file is not valid YAML, a key is invalid, or (with ``check_paths``) a
            corpus folder is missing. The message names the key and the file.
    """
    cwd = Path(os.path.abspath(cwd if cwd is not None else Path.cwd()))
    path, origin = _locate(explicit, env)
    path = Path(os.path.abspath(cwd / path))
    if origin is None and not path.exists():  # then where the original Guaipeca looked
        path = next((cwd / p for p in FALLBACK_CONFIGS if (cwd / p).is_file()), path)
    source: Path | None = path
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, ValueError) as exc:  # no permission, a NUL byte in the name
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    if not exists:
        if origin is not None:
            raise ConfigError(f"config file {path} not found (from {origin})")
        source, data = None, None
    elif is_dir:
        raise ConfigError(f"config file {path} is a folder, not a file")
    else:
        data = _read_yaml(path)
    settings = parse_settings(data, source=source, env=env, cwd=cwd)
    if check_paths:
        check_corpus_paths(settings, source)
    return LoadedSettings(settings, source, settings.storage.resolved_data_dir(env))


def check_corpus_paths(
    settings: Settings | LoadedSettings, source: str | os.PathLike[str] | None = None
) -> None:
    """Check every corpus folder exists and is readable.

    Separate from loading so that commands which do not read the folders keep working
    while a USB disk is unplugged. Given :class:`LoadedSettings`, errors name its file.

    Raises:
        ConfigError: one line per missing, non-folder or unreadable path, naming the key
            (``corpora.1.path``) and the file.
    """
    if isinstance(settings, LoadedSettings):
        source = settings.source if source is None else source
        settings = settings.settings
    where = f" (in {os.fspath(source)})" if source is not None else ""
    problems = []
    for i, corpus in enumerate(settings.corpora):
        try:
            if not corpus.path.exists():
                problem = f"folder {corpus.path} does not exist"
            elif not corpus.path.is_dir():
                problem = f"{corpus.path} is not a folder"
            elif not os.access(corpus.path, os.R_OK | os.X_OK):
                problem = f"folder {corpus.path} is not readable"
            else:
                continue
        except (OSError, ValueError) as exc:
            problem = f"cannot open folder {corpus.path}: {exc}"
        problems.append(f"corpora.{i}.path: {problem}{where}")
    if problems:
        raise ConfigError("; ".join(problems))
