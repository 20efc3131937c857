"""Corpus hygiene for the command line: which corpora searches cover, ``guaipeca corpora``,
``guaipeca drop``, and the folder each corpus remembers.

A corpus in the data folder that the config file does not name (the ``default`` corpus a
quick start left behind, a corpus renamed in the config) is not searched; ``status`` and
``corpora`` show it as "not in the configuration" with the command that drops it.

A corpus indexed from a folder (``--path``, or the current folder without a config file)
remembers that folder (:class:`FolderRecord`, ``<data>/folders.json``). Indexing another folder
into it would silently remove what it holds, so instead: the ``default`` corpus gives way to
a corpus named after the new folder, and a corpus named on the command line needs
``--replace``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from guaipeca.cli.context import TerminalConsole
from guaipeca.errors import GuaipecaError

if TYPE_CHECKING:
    from guaipeca.config import LoadedSettings
    from guaipeca.index import Index

__all__ = [
    "FolderRecord",
    "Target",
    "drop_note",
    "remember",
    "run_corpora",
    "run_drop",
    "search_scope",
    "settle_folders",
]

log = logging.getLogger("guaipeca")


class FolderRecord:
    """Which folder each corpus was last indexed from (``<data>/folders.json``), so that
    indexing another folder into it is noticed instead of silently emptying it."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / "folders.json"

    def read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s cannot be read (%s); folders are not remembered", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}

    def get(self, corpus: str) -> str | None:
        return self.read().get(corpus)

    def _write(self, data: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)  # whole or not at all

    def set(self, corpus: str, folder: Path) -> None:
        data = self.read()
        if data.get(corpus) != str(folder):
            self._write({**data, corpus: str(folder)})

    def forget(self, corpus: str) -> None:
        data = self.read()
        if corpus in data:
            del data[corpus]
            self._write(data)


@dataclass
class Target:
    """One corpus to index from one folder; ``from_config``: named by the config file (its
    folder is the config's to change, so it is not checked against the remembered one)."""

    name: str
    folder: Path
    options: dict[str, Any]
    from_config: bool
    implicit: bool = False  # the 'default' corpus, not named by the user
    #: Only these files of the folder (``guaipeca index FILE...``): the corpus keeps the
    #: rest of what it holds, so the folder is neither checked nor remembered.
    files: list[Path] | None = None


def drop_note(name: str) -> str:
    return f"not in the configuration, so not searched; drop it with 'guaipeca drop {name}'"


def search_scope(loaded: LoadedSettings, idx: Index) -> list[str] | None:
    """The corpora a search covers when none is named: the config file's (those indexed);
    every corpus (None) when no config file was read."""
    if loaded.source is None:
        return None
    present = set(idx.corpora)
    return [c.name for c in loaded.settings.corpora if c.name in present]


def _holds_documents(idx: Index, name: str) -> bool:
    return name in idx.corpora and bool(idx.list_documents(corpus=name, limit=1))


def _named_after(folder: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._")[:64]
    return slug if slug and slug[0].isalnum() else "folder"


def settle_folders(
    loaded: LoadedSettings, idx: Index, targets: list[Target], *, replace: bool, err: Console
) -> list[Target]:
    """Targets whose corpus remembers another folder: ``default`` becomes a corpus named
    after the new folder (unless ``replace``); a named corpus needs ``replace``.

    Raises:
        GuaipecaError: a named corpus (or the one named after the folder) holds another
            folder's documents and ``replace`` is not given.
    """
    record = FolderRecord(loaded.data_dir)
    settled = []
    for target in targets:
        if not (target.from_config or replace or target.files):
            target = _settled(record, idx, target, err)
        settled.append(target)
    return settled


def _settled(record: FolderRecord, idx: Index, target: Target, err: Console) -> Target:
    before = record.get(target.name)
    if before is None or Path(before) == target.folder or not _holds_documents(idx, target.name):
        return target
    if target.implicit:
        other = _named_after(target.folder)
        held = record.get(other)
        if held is None or Path(held) == target.folder or not _holds_documents(idx, other):
            err.print(
                f"corpus {target.name!r} holds {before}; indexing {target.folder} as corpus "
                f"{other!r} instead (--replace indexes it into {target.name!r}, removing what "
                "is there)",
            )
            return Target(other, target.folder, target.options, from_config=False)
        before, target = held, Target(other, target.folder, target.options, from_config=False)
    raise GuaipecaError(
        f"corpus {target.name!r} was indexed from {before}; indexing {target.folder} into it "
        "would remove those documents: add --replace to do that, or name another corpus "
        "('guaipeca index NAME --path FOLDER')"
    )


def remember(loaded: LoadedSettings, target: Target) -> None:
    if target.files:
        return
    FolderRecord(loaded.data_dir).set(target.name, target.folder)


def _rows(loaded: LoadedSettings, idx: Index) -> list[dict[str, Any]]:
    configured = {c.name: c for c in loaded.settings.corpora}
    remembered = FolderRecord(loaded.data_dir).read()
    stats = {c.name: c for c in idx.stats().corpora}
    names = list(configured) + sorted(n for n in stats if n not in configured)
    names += sorted(n for n in idx.broken_corpora if n not in names)
    rows = []
    for name in names:
        conf, st = configured.get(name), stats.get(name)
        # Without a config file, 'default' is "the current folder": what it was really
        # indexed from is the remembered folder.
        folder = str(conf.path) if conf is not None else None
        if conf is None or loaded.source is None:
            folder = remembered.get(name, folder)
        in_config = conf is not None or loaded.source is None
        rows.append(
            {
                "name": name,
                "configured": conf is not None,
                "folder": folder,
                "documents": st.documents if st else 0,
                "chunks": st.chunks if st else 0,
                "indexed": st is not None,
                "problem": idx.broken_corpora.get(name),
                "note": None if in_config else drop_note(name),
            }
        )
    return rows


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def run_corpora(loaded: LoadedSettings, idx: Index, *, as_json: bool, out: TerminalConsole) -> None:
    """``guaipeca corpora``: every corpus of the config and of the data folder."""
    rows = _rows(loaded, idx)
    if as_json:
        out.print_verbatim(json.dumps(rows, ensure_ascii=False))
        return
    if not rows:
        out.print("no corpora yet: run 'guaipeca index'")
        return
    for row in rows:
        where = f" ({row['folder']})" if row["folder"] else ""
        if row["problem"]:
            state = f"cannot be used: {row['problem']}"
        elif not row["indexed"]:
            state = "not indexed yet: run 'guaipeca index'"
        else:
            state = f"{_count(row['documents'], 'document')}, {_count(row['chunks'], 'chunk')}"
        note = f"; {row['note']}" if row["note"] else ""
        out.print(f"{row['name']}{where}: {state}{note}")


def run_drop(
    loaded: LoadedSettings, idx: Index, name: str, *, yes: bool, out: Console, err: Console
) -> None:
    """``guaipeca drop NAME``: delete a corpus from the index after a confirmation."""
    known = set(idx.corpora) | set(idx.broken_corpora)
    if name not in known:
        from guaipeca.config import did_you_mean

        listed = ", ".join(sorted(known)) or "none"
        hint = did_you_mean(name, sorted(known))
        raise GuaipecaError(
            f"no corpus named {name!r} in {loaded.data_dir}{'; ' + hint if hint else ''} "
            f"(corpora: {listed})"
        )
    row = next(r for r in _rows(loaded, idx) if r["name"] == name)
    what = f"{_count(row['documents'], 'document')}, {_count(row['chunks'], 'chunk')}"
    if not yes:
        if not sys.stdin.isatty():
            raise GuaipecaError(f"dropping {name!r} ({what}) needs a yes: add --yes")
        import typer

        if not typer.confirm(
            f"Drop corpus {name!r} ({what}) from the index? Its source files stay", err=True
        ):
            raise GuaipecaError("nothing dropped")
    idx.drop_corpus(name)
    FolderRecord(loaded.data_dir).forget(name)
    out.print(f"dropped corpus {name!r} ({what}); no source file was touched")
    if row["configured"]:
        err.print(
            f"note: {name!r} is still in the configuration; 'guaipeca index' builds it again",
        )
