"""Getting set up: ``guaipeca init`` writes the config file, ``guaipeca check-model`` loads
the model it names (downloading it first with ``--download``) and reports each corpus's model."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from guaipeca.cli.context import current_settings, err, open_index, out, state
from guaipeca.config import LoadedSettings, config_path
from guaipeca.errors import GuaipecaError


def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented config file with every setting and its default."""
    from guaipeca.config.template import render_default_config

    path = config_path(state.config)
    if path.exists() and not force:
        raise GuaipecaError(f"{path} already exists; use --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_default_config(), encoding="utf-8")
    out.print(f"wrote {path}; edit its corpora, then run 'guaipeca index'")


def check_model(
    download: Annotated[
        bool,
        typer.Option(
            "--download",
            help="Download the configured fastembed model into the data folder first (the "
            "only command that uses the network for a model).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Load the embedding model and report what it is, where it loads from, and how fast."""
    from guaipeca.embed import identity_of, load_embedder

    loaded = current_settings()
    source = str(loaded.source) if loaded.source else None
    emb = loaded.settings.embedding
    if download:
        _download_model(loaded)
    started = time.perf_counter()
    model = load_embedder(emb, source=source, data_dir=loaded.data_dir)
    load_seconds = float(getattr(model, "load_seconds", time.perf_counter() - started))
    vector = model.embed_query("check")
    ident = identity_of(model)
    remote = emb.provider == "openai"
    data = {
        "provider": ident.provider,
        "model": model.name,
        "dimension": model.dimension,
        "prefixes": f"{ident.query_prefix!r} / {ident.passage_prefix!r}",
        "weights_sha256": ident.weights_sha256 or "unknown (remote)",
        "source": getattr(model, "source", "?"),
        "licence": getattr(model, "licence", None) or "see README: 'Choosing a model'",
        "tokenizer": getattr(model, "tokenizer_source", "inside the model package"),
        "weights": "int8 in memory" if getattr(model, "int8_weights", False) else "as stored",
        "load_seconds": round(load_seconds, 3),
        "first_query_seconds": round(time.perf_counter() - started - load_seconds, 3),
        "norm": round(float((vector**2).sum() ** 0.5), 4),
        "network": f"the server at {getattr(model, 'url', '?')}"
        if remote
        else "not used: the model and tokenizer are local files",
    }
    corpora = _corpus_models(loaded)
    if as_json:
        out.print_verbatim(json.dumps({**data, "corpora": corpora}))
        return
    for key, value in data.items():
        out.print(f"{key:<20}{value}")
    for name, entry in corpora.items():
        out.print(f"corpus {name}: configured {entry['configured']}")
        if entry["stored"] and entry["stored"] != entry["configured"]:
            out.print(f"  stored vectors: {entry['stored']}")
        if entry["mismatch"]:
            out.print(f"  {entry['mismatch']}")


def _corpus_models(loaded: LoadedSettings) -> dict[str, dict[str, str | None]]:
    """Per corpus: the model it is configured with, and what its stored vectors are."""
    from guaipeca.embed import identity_of

    idx = open_index(loaded)
    try:
        stats = {c.name: c for c in idx.stats().corpora}
        names = [c.name for c in loaded.settings.corpora] + sorted(
            set(stats) - set(c.name for c in loaded.settings.corpora)
        )
        return {
            name: {
                "configured": identity_of(idx.embedder_for(name)).describe(),
                "stored": stats[name].model if name in stats else None,
                "mismatch": stats[name].model_mismatch if name in stats else None,
            }
            for name in names
        }
    finally:
        idx.close()


def _download_model(loaded: LoadedSettings) -> None:
    emb = loaded.settings.embedding
    if emb.provider != "fastembed":
        err.print(f"nothing to download: provider {emb.provider} loads without a download")
        return
    from guaipeca.embed.fastembed import download_fastembed, fastembed_cache

    cache = fastembed_cache(loaded.data_dir)
    err.print(f"downloading {emb.model} into {cache} …")
    folder = download_fastembed(emb.model, cache)
    err.print(f"downloaded to {folder}; it loads offline from now on")
