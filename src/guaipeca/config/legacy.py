"""The settings of the systems Guaipeca replaces, read as they were written: the original
Guaipeca's ``guaipeca.yaml`` keys and A-RAG-OG's ``.env`` variables.

Both are one table each (:data:`ORIGINAL_KEYS`, :data:`ARAGOG_VARIABLES`): a key either
maps onto a key of ours (``target``, its value converted when the meaning differs), or has
no equivalent and is accepted with one note saying what Guaipeca does instead. A key the
file also sets in our own words wins over the old one.

A-RAG-OG's variables come from the environment, then from a ``.env`` file in the working
folder (the environment wins, as with python-dotenv's ``load_dotenv``). They are read only
for keys the YAML file does not set, and only when one of A-RAG-OG's own variables is there
(``HOST`` and ``PORT`` alone are too common to mean A-RAG-OG).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from guaipeca.config.engine import DEFAULT_MODEL_ALIASES

__all__ = [
    "ARAGOG_VARIABLES",
    "EXPORTED",
    "ORIGINAL_KEYS",
    "Legacy",
    "Translated",
    "aragog_values",
    "translate",
]

Key = tuple[str, ...]
_ANY: Final = object()


@dataclass(frozen=True)
class Legacy:
    """One old key: where its value goes (``target``, converted by ``convert``) and the keys
    it implies (``also``), or, with no ``target``, the ``note`` saying what Guaipeca does
    instead. ``quiet_when``: the value that is simply what Guaipeca always does (no note)."""

    target: Key | None = None
    convert: Callable[[Any], Any] | None = None
    also: Mapping[Key, Any] = field(default_factory=dict)
    note: str = ""
    quiet_when: object = _ANY


def _hybrid(value: object) -> object:
    return {True: "hybrid", False: "dense"}.get(value, value) if isinstance(value, bool) else value


def _tokens_to_chars(value: object) -> object:
    # About four characters a token for the languages A-RAG-OG's bge-m3 tokenizer sees.
    try:
        return min(100_000, max(64, int(str(value)) * 4))
    except ValueError:
        return value


def _rerank_endpoint(value: object) -> object:
    # A-RAG-OG's RERANKER_URL is the vLLM base URL; the endpoint is its /rerank.
    url = str(value).rstrip("/")
    return url if url.endswith("/rerank") else f"{url}/rerank"


def _meta_fields(value: object) -> object:
    return bool(str(value).strip())


#: The original Guaipeca's keys that are not ours, by (section, key).
ORIGINAL_KEYS: Final[Mapping[Key, Legacy]] = MappingProxyType(
    {
        ("search", "hybrid"): Legacy(("search", "mode"), _hybrid),
        ("search", "toc_rerank_weight"): Legacy(("search", "toc_boost")),
        ("chunking", "table_aware"): Legacy(
            note="a table is always kept whole with its header row, which every chunk cut "
            "from it repeats",
            quiet_when=True,
        ),
        ("chunking", "split_on_headings"): Legacy(
            note="chunks always start at headings", quiet_when=True
        ),
        ("embedding", "cache_dir"): Legacy(
            note="models come with the package or from embedding.model's folder; fastembed "
            "ones are kept in <storage.data_dir>/models/fastembed"
        ),
        ("indexing", "data_dir"): Legacy(("storage", "data_dir")),
        ("indexing", "incremental"): Legacy(
            note="indexing is always incremental; 'guaipeca index --force' rebuilds a corpus",
            quiet_when=True,
        ),
        ("indexing", "max_file_size"): Legacy(
            note="big files are read up to the limits: section (pages, cells, characters)"
        ),
        ("indexing", "exclude_dirs"): Legacy(
            note="hidden folders are skipped; skip others with each corpus's exclude globs, "
            "e.g. exclude: ['node_modules/**']"
        ),
    }
)

#: Types the original listed (its upload default) that Guaipeca does not read: left out of
#: an extensions list with a note, not refused.
ORIGINAL_ONLY_EXTENSIONS: Final = frozenset({".doc", ".ppt", ".xls", ".csv"})

_NO_S3 = "documents are read from the corpus folders (corpora:), not from S3"
_CONVERTS = "Guaipeca converts documents itself (PDF, Office, HTML, images with OCR)"
_OFFLINE = "Guaipeca never downloads a model at run time"
_BM25 = "keyword search is Guaipeca's own BM25 index"

#: A-RAG-OG's ``.env`` variables (its README's full list).
ARAGOG_VARIABLES: Final[Mapping[str, Legacy]] = MappingProxyType(
    {
        "HF_HUB_OFFLINE": Legacy(note=_OFFLINE),
        "HF_HOME": Legacy(note=_OFFLINE),
        "FASTEMBED_CACHE_PATH": Legacy(
            note="fastembed models are kept in <storage.data_dir>/models/fastembed"
        ),
        "HOST": Legacy(("server", "host")),
        "PORT": Legacy(("server", "port")),
        "RATE_LIMIT_RPS": Legacy(("server", "rate_limit_rps")),
        "RATE_LIMIT_BURST": Legacy(("server", "rate_limit_burst")),
        "SEARCH_MAX_CONCURRENCY": Legacy(("server", "max_concurrent_searches")),
        "SEARCH_TIMEOUT": Legacy(("server", "search_timeout_seconds")),
        "JWT_SECRET": Legacy(("server", "jwt_secret")),
        "JWT_ALGORITHM": Legacy(
            note="server.jwt_secret verifies HS256 tokens; other algorithms come from an "
            "OpenID provider (server.oidc)",
            quiet_when="HS256",
        ),
        "MINIO_ENDPOINT": Legacy(note=_NO_S3),
        "MINIO_USER": Legacy(note=_NO_S3),
        "MINIO_PASSWORD": Legacy(note=_NO_S3),
        "MINIO_BUCKET": Legacy(note=_NO_S3),
        "MINIO_URL_EXPIRE": Legacy(
            note="sources are served by GET /download/{corpus}/{path}, behind the server's auth"
        ),
        "QDRANT_URL": Legacy(("storage", "qdrant", "url"), also={("storage", "backend"): "qdrant"}),
        "QDRANT_TOKEN": Legacy(("storage", "qdrant", "api_key")),
        "QDRANT_TIMEOUT": Legacy(("storage", "qdrant", "timeout")),
        "QDRANT_EMBEDDING_DIM": Legacy(("embedding", "dimensions")),
        "QDRANT_COLLECTION": Legacy(("storage", "qdrant", "collection_prefix")),
        "DOCLING_URL": Legacy(note=_CONVERTS),
        "DOCLING_TIMEOUT": Legacy(("limits", "convert_timeout_seconds")),
        "CHUNKER_TOKENIZER": Legacy(note="chunks are measured in characters (chunking.max_size)"),
        "CHUNKER_MAX_TOKENS": Legacy(("chunking", "max_size"), _tokens_to_chars),
        "ENRICHER_MAX_WORKERS": Legacy(("enrich", "workers")),
        "ENRICHER_MODEL": Legacy(("enrich", "model")),
        "ENRICHER_URL": Legacy(("enrich", "url")),
        "ENRICHER_TOKEN": Legacy(("enrich", "api_key")),
        "ENRICHER_TIMEOUT": Legacy(("enrich", "timeout_seconds")),
        "ENRICHER_LANGUAGE": Legacy(note="each corpus has its own language (corpora[].language)"),
        "DENSE_EMBEDDING_MODEL": Legacy(
            ("embedding", "model"), also={("embedding", "provider"): "openai"}
        ),
        "DENSE_EMBEDDING_URL": Legacy(
            ("embedding", "url"), also={("embedding", "provider"): "openai"}
        ),
        "DENSE_EMBEDDING_TOKEN": Legacy(
            ("embedding", "api_key_env"), lambda _: "DENSE_EMBEDDING_TOKEN"
        ),
        "DENSE_EMBEDDING_TIMEOUT": Legacy(("embedding", "timeout_seconds")),
        "SPARSE_EMBEDDING_MODEL": Legacy(note=_BM25),
        "SPARSE_EMBEDDING_LANGUAGE": Legacy(
            note=_BM25 + ", in each corpus's language (corpora[].language)"
        ),
        "SPARSE_EMBEDDING_DEVICE": Legacy(note="Guaipeca runs on the CPU", quiet_when="cpu"),
        "EMBEDDED_META_FIELDS": Legacy(("enrich", "embed"), _meta_fields),
        "RERANKER_MODEL": Legacy(("rerank", "model")),
        "RERANKER_URL": Legacy(
            ("rerank", "url"),
            _rerank_endpoint,
            also={
                ("rerank", "provider"): "http",
                ("rerank", "api"): "vllm",
                ("search", "rerank"): True,
            },
        ),
        "RERANKER_TOKEN": Legacy(("rerank", "api_key")),
        "RERANKER_TIMEOUT": Legacy(("rerank", "timeout_seconds")),
        "RERANKER_SCORE_THRESHOLD": Legacy(("rerank", "score_threshold")),
    }
)
#: Variables our settings name instead of holding (``embedding.api_key_env``): one found only
#: in ``.env`` is put in the process's environment, where the embedder reads it.
EXPORTED: Final = ("DENSE_EMBEDDING_TOKEN",)
#: Names too common to mean A-RAG-OG on their own.
_COMMON: Final = frozenset({"HOST", "PORT", "HF_HOME", "HF_HUB_OFFLINE"})
#: A-RAG-OG runs one HTTP server (streamable-http): so does Guaipeca from its settings.
_ARAGOG_IMPLIES: Final[Mapping[Key, Any]] = MappingProxyType({("server", "transport"): "http"})


@dataclass
class Translated:
    """A config mapping in our own keys; ``notes``: one line per old key not carried over
    (for a warning); ``origin``: which of our keys came from which old key or variable."""

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    origin: dict[Key, str] = field(default_factory=dict)


def _set(data: dict[str, Any], key: Key, value: object) -> bool:
    """Set ``key`` unless it is set already (our own key wins); False when it was."""
    node = data
    for part in key[:-1]:
        child = node.get(part)
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            return False  # the section itself is wrong: validation says so
        node[part] = child = dict(child)
        node = child
    if key[-1] in node:
        return False
    node[key[-1]] = value
    return True


def _carry(out: Translated, old: str, rule: Legacy, value: object) -> None:
    if rule.target is None:
        if rule.quiet_when is _ANY or value != rule.quiet_when:
            out.notes.append(f"{old}: not used: {rule.note}")
        return
    new = rule.convert(value) if rule.convert is not None else value
    if not _set(out.data, rule.target, new):
        out.notes.append(f"{old}: not used: {'.'.join(rule.target)} is set")
        return
    out.origin[rule.target] = old
    for key, implied in rule.also.items():
        if _set(out.data, key, implied):
            out.origin[key] = old


def _fastembed_model(out: Translated, base: Path | None) -> None:
    """The original's ``embedding.model`` was a fastembed catalogue name: without a
    ``provider``, a name that is neither the bundled model nor a folder means fastembed."""
    emb = out.data.get("embedding")
    if not isinstance(emb, dict) or "provider" in emb:
        return
    model = emb.get("model")
    if not isinstance(model, str) or model in DEFAULT_MODEL_ALIASES:
        return
    folder = Path(model).expanduser()
    if model.startswith((".", "/", "~")) or (base or Path.cwd()).joinpath(folder).is_dir():
        return
    out.data["embedding"] = {**emb, "provider": "fastembed"}
    out.origin[("embedding", "provider")] = "embedding.model"


def _readable_types(out: Translated, where: str, holder: dict[str, Any], key: str) -> None:
    """Leave out of ``holder[key]`` the types only the original listed (the key itself when
    nothing else is left: every type we read), with one note."""
    values = holder.get(key)
    if not isinstance(values, list):
        return
    # Only strings are types; anything else is left for validation to name.
    norm = [("." + v.strip().lower().lstrip(".")) if isinstance(v, str) else None for v in values]
    dropped = [v for v in norm if v in ORIGINAL_ONLY_EXTENSIONS]
    if not dropped:
        return
    kept = [v for v, n in zip(values, norm, strict=True) if n not in ORIGINAL_ONLY_EXTENSIONS]
    if kept:
        holder[key] = kept
    else:
        del holder[key]
    out.notes.append(f"{where}: {', '.join(dropped)} left out: Guaipeca does not read them")


def _extensions(out: Translated) -> None:
    corpora = out.data.get("corpora")
    if isinstance(corpora, list):
        for i, corpus in enumerate(corpora):
            if isinstance(corpus, dict):
                corpora[i] = corpus = dict(corpus)
                _readable_types(out, f"corpora.{i}.extensions", corpus, "extensions")
    upload = out.data.get("upload")
    if isinstance(upload, dict):
        _readable_types(out, "upload.allowed_extensions", upload, "allowed_extensions")


def translate(
    data: Mapping[str, Any], aragog: Mapping[str, str] | None = None, base: Path | None = None
) -> Translated:
    """``data`` (a parsed YAML file) with the original Guaipeca's keys moved to ours, then
    A-RAG-OG's variables (``aragog``, from :func:`aragog_values`) for the keys still unset.
    Keys in neither table are left as they are, for validation to refuse. ``base``: the
    file's folder, where a relative ``embedding.model`` folder is."""
    out = Translated(copy.deepcopy(dict(data)))
    _fastembed_model(out, base)
    _extensions(out)
    for (section, key), rule in ORIGINAL_KEYS.items():
        part = out.data.get(section)
        if not isinstance(part, dict) or key not in part:
            continue
        rest = {k: v for k, v in part.items() if k != key}
        if rest or section in ("search", "chunking", "embedding"):
            out.data[section] = rest
        else:
            del out.data[section]  # a section of the original's only (indexing:)
        _carry(out, f"{section}.{key}", rule, part[key])
    for name, value in (aragog or {}).items():
        _carry(out, name, ARAGOG_VARIABLES[name], value)
    if aragog:
        for implied_key, implied in _ARAGOG_IMPLIES.items():
            _set(out.data, implied_key, implied)
    return out


def aragog_values(env: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """A-RAG-OG's variables that are set (empty counts as unset): from ``env``, then from
    ``cwd/.env``; none unless one of A-RAG-OG's own names is among them."""
    from dotenv import dotenv_values

    dotenv = cwd / ".env"
    from_file = dotenv_values(dotenv) if os.path.isfile(dotenv) else {}
    values: dict[str, str] = {}
    for name in ARAGOG_VARIABLES:
        value = env.get(name) or from_file.get(name)
        if value:
            values[name] = value
    return values if set(values) - _COMMON else {}
