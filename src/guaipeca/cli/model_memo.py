"""A keyword search from the command line does not load the embedding model.

Opening an index needs only the model's identity (each corpus records which model its
vectors come from: embed/identity.py). Every time the CLI loads a model it notes its name,
dimension and identity in ``<data>/model.json``, keyed by the embedding settings (one entry
per model: corpora may have their own); a keyword search with the same settings then opens
the index with :class:`LazyModel`, which knows them and loads the real model only if
something does ask for a vector (a damaged vector file being repaired on open, say). Other
settings, or no note yet: the model loads as usual.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guaipeca.config import EmbeddingSettings
    from guaipeca.embed import Embedder, EmbedderIdentity
    from guaipeca.embed.base import Vector, Vectors

__all__ = ["LazyModel", "lazy_model", "note_model"]

log = logging.getLogger("guaipeca")
_FILE = "model.json"


def _key(settings: EmbeddingSettings) -> str:
    return hashlib.sha256(settings.model_dump_json().encode()).hexdigest()


class LazyModel:
    """An :class:`~guaipeca.embed.Embedder` that knows its name and dimension and loads the
    real model on the first call that needs vectors."""

    def __init__(
        self, name: str, dimension: int, load: Callable[[], Embedder], identity: EmbedderIdentity
    ) -> None:
        self.name = name
        self.dimension = dimension
        #: The real model's identity, as noted (what corpora are checked against at open).
        self.identity = identity
        self._load = load
        self._real: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._real is not None

    def _model(self) -> Embedder:
        with self._lock:
            if self._real is None:
                self._real = self._load()
            return self._real

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._model().embed_passages(texts)

    def embed_query(self, text: str) -> Vector:
        return self._model().embed_query(text)


def _notes(path: Path) -> dict[str, dict[str, object]]:
    try:
        notes = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return notes if isinstance(notes, dict) and "settings" not in notes else {}


def note_model(data_dir: Path, settings: EmbeddingSettings, embedder: Embedder) -> None:
    """Remember the loaded model's name, dimension and identity for these settings (best
    effort)."""
    from guaipeca.embed import identity_of

    path = Path(data_dir) / _FILE
    notes = _notes(path)
    note: dict[str, object] = {
        "name": embedder.name,
        "dimension": embedder.dimension,
        "identity": identity_of(embedder).to_json(),
    }
    key = _key(settings)
    if notes.get(key) == note:
        return
    notes[key] = note
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(notes) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, ValueError) as exc:
        log.debug("model note not written: %s", exc)


def lazy_model(
    data_dir: Path, settings: EmbeddingSettings, load: Callable[[], Embedder]
) -> LazyModel | None:
    """A :class:`LazyModel` when the model of these settings was noted, else None."""
    from guaipeca.embed import EmbedderIdentity

    note = _notes(Path(data_dir) / _FILE).get(_key(settings))
    if not isinstance(note, dict):
        return None
    name, dimension, identity = note.get("name"), note.get("dimension"), note.get("identity")
    if not isinstance(name, str) or not isinstance(dimension, int) or dimension < 1:
        return None
    try:
        known = EmbedderIdentity.from_json(str(identity))
    except (ValueError, TypeError):
        return None
    return LazyModel(name, dimension, load, known)
