"""Coming from another system: ``guaipeca migrate-config`` (the original Guaipeca's YAML or
A-RAG-OG's ``.env``, written in our own keys) and ``guaipeca import-faiss`` (the original's
data folder, re-embedded into the index). The tables of old keys are config/legacy.py's."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from guaipeca.cli.context import WaitOption, WaitTimeoutOption, current_settings, err, out, writing
from guaipeca.errors import GuaipecaError

if TYPE_CHECKING:
    from guaipeca.compat.original import ImportReport, OriginalCorpus
    from guaipeca.index import Index

__all__ = ["import_faiss", "migrate_config", "original_data_hint"]

log = logging.getLogger("guaipeca")


def _read_old(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The YAML mapping, or for a ``.env`` file A-RAG-OG's variables in it."""
    from dotenv import dotenv_values

    from guaipeca.config.legacy import ARAGOG_VARIABLES

    if not path.is_file():
        raise GuaipecaError(f"{path}: no such file")
    if path.name.startswith(".env") or path.suffix == ".env":
        found = {k: v for k, v in dotenv_values(path).items() if k in ARAGOG_VARIABLES and v}
        return {}, found
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise GuaipecaError(f"cannot read {path}: {' '.join(str(exc).split())}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise GuaipecaError(f"{path}: not a mapping of sections")
    return data, {}


def _secrets_shown(data: object) -> object:
    # SecretStr values are dumped as themselves: the file is the user's own config.
    if isinstance(data, dict):
        return {k: _secrets_shown(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_secrets_shown(v) for v in data]
    return data.get_secret_value() if hasattr(data, "get_secret_value") else data


def migrate_config(
    old: Annotated[
        Path, typer.Argument(help="The original Guaipeca's guaipeca.yaml, or A-RAG-OG's .env.")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of to stdout.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --output if it exists.")
    ] = False,
) -> None:
    """Write an old config in Guaipeca's own keys. What has no equivalent is left out, each
    with a comment saying what Guaipeca does instead."""
    from guaipeca.config import parse_settings
    from guaipeca.config.legacy import translate

    data, aragog = _read_old(old)
    moved = translate(data, aragog)
    # Checked as it will be read (relative paths from where it is written).
    parse_settings(moved.data, source=output or old, env={}, cwd=old.parent, aragog=False)
    head = [f"# Guaipeca config written by 'guaipeca migrate-config {old.name}'."]
    head += [f"# {note}" for note in moved.notes]
    body = yaml.safe_dump(_secrets_shown(moved.data), sort_keys=False, allow_unicode=True)
    text = "\n".join(head) + "\n" + body
    if output is None:
        sys.stdout.write(text)
        return
    if output.exists() and not force:
        raise GuaipecaError(f"{output} already exists; use --force to overwrite it")
    output.write_text(text, encoding="utf-8")
    err.print(f"wrote {output}", markup=False)


def original_data_hint(folder: Path) -> str | None:
    """One line telling what to run when ``folder`` is the original Guaipeca's data."""
    from guaipeca.compat.original import find_original_corpora

    found = find_original_corpora(folder)
    if not found:
        return None
    names = ", ".join(p.name for p in found)
    return (
        f"{folder} is the original Guaipeca's data (FAISS index and metadata.json of "
        f"{names}): run 'guaipeca import-faiss {folder}' to bring its documents in"
    )


def import_faiss(
    folder: Annotated[
        Path,
        typer.Argument(
            help="The original's data: ~/.guaipeca, its data/ or corpora/ folder, or one "
            "corpus folder (faiss_index.fai, metadata.json)."
        ),
    ],
    corpus: Annotated[
        str | None,
        typer.Option("--corpus", help="Import into this corpus (one corpus folder only)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Import the original Guaipeca's FAISS data: each corpus's chunk text and metadata
    become documents, embedded again with the current model (its vectors are not reused)."""
    from guaipeca.cli.context import open_index
    from guaipeca.compat.original import find_original_corpora, read_corpus

    found = find_original_corpora(folder.expanduser())
    if not found:
        raise GuaipecaError(
            f"no original Guaipeca data in {folder} (looked for <corpus>/faiss_index.fai "
            "and metadata.json, also under corpora/ and data/corpora/)"
        )
    if corpus is not None and len(found) > 1:
        raise GuaipecaError(f"--corpus needs one corpus folder; {folder} holds {len(found)}")
    loaded = current_settings()
    roots = {c.name: c.path for c in loaded.settings.corpora}
    originals = [read_corpus(p) for p in found]
    names = [corpus or o.name for o in originals]
    with writing(loaded, names, wait=wait, timeout=wait_timeout):
        idx = open_index(loaded)
        try:
            for original, name in zip(originals, names, strict=True):
                for problem in original.problems:
                    err.print(f"warning {original.folder}: {problem}", markup=False)
                report = _import_one(idx, original, name, roots.get(name), as_json)
                _print(report, idx.embedder_for(name).name, as_json)
        finally:
            idx.close()


def _import_one(
    idx: Index, original: OriginalCorpus, name: str, root: Path | None, as_json: bool
) -> ImportReport:
    """One original corpus imported, with the embedding phase's progress on stderr."""
    from guaipeca.compat.original import import_corpus
    from guaipeca.progress import JobProgress

    with JobProgress(console=err, quiet=as_json) as job:
        task = job.task(f"{name}: embedded", "chunks")
        report = import_corpus(
            idx,
            original,
            name=name,
            root=root,
            progress=lambda done, left: task.update(done, done + left),
        )
        task.finish()
    return report


def _print(report: ImportReport, model: str, as_json: bool) -> None:
    source = report.source
    if as_json:
        data = {
            "corpus": report.corpus,
            "from": str(source.folder),
            "documents": report.documents,
            "chunks_read": report.chunks,
            "chunks_embedded": report.embedded,
            "faiss_file": source.index_file.name if source.index_file else None,
            "faiss_vectors": source.vectors,
            "faiss_dimensions": source.dimension,
            "model": model,
            "problems": source.problems,
        }
        out.print_verbatim(json.dumps(data, ensure_ascii=False))
        return
    vectors = (
        f"{source.index_file.name}: {source.vectors} vectors of {source.dimension} dimensions"
        if source.index_file
        else "no readable FAISS file"
    )
    out.print(
        f"{report.corpus}: {report.documents} documents from {report.chunks} chunks of "
        f"{source.folder} ({vectors}, not reused: embedded again with {model}, "
        f"{report.embedded} chunks)",
        markup=False,
    )
