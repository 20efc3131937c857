"""What the index holds: ``guaipeca status`` (the config in use, the data folder, the model,
each corpus) and ``guaipeca corpora`` (every corpus, configured or only in the data folder)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer

from guaipeca import __version__
from guaipeca.cli.context import current_settings, open_index, out, plural
from guaipeca.cli.legacy import original_data_hint


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show the config in use, the data folder, the model and each corpus."""
    loaded = current_settings()
    idx = open_index(loaded, keyword_only=True)  # counts need no vectors
    try:
        s = idx.stats()
        broken = idx.broken_corpora
        replication = idx.replication()
    finally:
        idx.close()
    from guaipeca.cli.corpora import drop_note

    topics = {c.name: (c.topic, str(c.path)) for c in loaded.settings.corpora}
    corpora: list[dict[str, Any]] = []
    for stats in s.corpora:
        entry = dataclasses.asdict(stats)
        entry["topic"], entry["folder"] = topics.get(stats.name, ("", None))
        entry["configured"] = stats.name in topics
        unlisted = loaded.source is not None and not entry["configured"]
        entry["note"] = drop_note(stats.name) if unlisted else None
        corpora.append(entry)
    data = {
        "version": __version__,
        "config": str(loaded.source) if loaded.source else None,
        "data_dir": str(loaded.data_dir),
        "model": s.model,
        "dimension": s.dimension,
        "documents": s.documents,
        "chunks": s.chunks,
        "pending_chunks": s.pending_chunks,
        "pending_seconds": s.pending_seconds,
        "corpora": corpora,
        "broken": broken,
        "original_data": original_data_hint(loaded.data_dir),
        "replication": replication,
    }
    if as_json:
        out.print_verbatim(json.dumps(data, ensure_ascii=False))
        return
    out.print(f"config   {loaded.source or '(none: defaults, one corpus = this folder)'}")
    out.print(f"data     {loaded.data_dir}")
    out.print(f"model    {s.model} ({s.dimension} dimensions)")
    if replication is not None:
        out.print(
            f"replica  {replication['replica']}: {replication['lag_bytes']} bytes of WAL "
            f"behind, replay lag {replication['lag_seconds']:.3f} s"
        )
    for e in corpora:
        size = (e["vector_bytes"] + e["catalog_bytes"] + e["lexical_bytes"]) / 1e6
        topic = f" — {e['topic']}" if e["topic"] else ""
        note = f"; {e['note']}" if e["note"] else ""
        if e["pending_chunks"]:  # progressive indexing: keyword only until embedded
            left = e["pending_seconds"]
            eta = f", about {left:.0f} s left" if left is not None else ""
            note += f"; {e['pending_chunks']} waiting for vectors{eta}"
        out.print(
            f"  {e['name']}{topic}: {plural(e['documents'], 'document')}, "
            f"{plural(e['chunks'], 'chunk')}, {e['language']}, {size:.1f} MB{note}",
        )
        out.print(f"    model: {e['model']}")
        if e["model_mismatch"]:
            out.print(f"    dense search off: {e['model_mismatch']}")
    for name, reason in broken.items():
        out.print(f"  {name}: cannot be used: {reason}")
    if not corpora and not broken:
        out.print("  nothing indexed yet: run 'guaipeca index'")
    if data["original_data"]:
        out.print(f"note: {data['original_data']}", markup=False)


def corpora(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List every corpus: those in the configuration and those in the data folder, with
    their folders and sizes. A corpus that is not in the configuration is not searched."""
    from guaipeca.cli.corpora import run_corpora

    loaded = current_settings()
    idx = open_index(loaded, keyword_only=True)
    try:
        run_corpora(loaded, idx, as_json=as_json, out=out)
    finally:
        idx.close()
