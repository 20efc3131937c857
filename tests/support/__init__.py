"""Test helpers shared across the suite (importable as ``support``; fixtures live in conftest)."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from guaipeca.embed import HashingEmbedder, OnnxEmbedder

if TYPE_CHECKING:
    from guaipeca import Index

REPO = Path(__file__).resolve().parents[2]
#: The small documents the tests read, kept in the repository (tests/data/README.md gives
#: each file's source and licence): a fresh clone runs every test. The full BEIR sets stay
#: outside the repository and are read by bench/ only.
TEST_DATA = REPO / "tests" / "data"
SHARED_DATA = TEST_DATA  # the name callers used when the files lived in ../shared/data


class MemoEmbedder:
    """The real model with passages memoised by text (the vectors are the model's own)."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self._memo: dict[str, np.ndarray] = {}
        self.passages_embedded = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self.passages_embedded += len(missing)
            for t, v in zip(missing, self.inner.embed_passages(missing), strict=True):
                self._memo[t] = v
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._memo[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


class CountingEmbedder(HashingEmbedder):
    """The deterministic test embedder, counting how many passages it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.passages: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.passages.extend(texts)
        return super().embed_passages(texts)


def shared_data(*parts: str) -> Path:
    """A file or folder of tests/data; it ships with the repository, so a missing one is a
    failure, never a skip."""
    path = TEST_DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"test data {path} is missing (tests/data is part of the repository)")
    return path


def beir_corpus(name: str, limit: int | None = None) -> dict[str, tuple[str, str]]:
    """``{doc_id: (title, text)}`` of a BEIR corpus, in file order."""
    out: dict[str, tuple[str, str]] = {}
    with gzip.open(shared_data("beir", name, "corpus.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[row["_id"]] = (row["title"], row["text"])
            if limit is not None and len(out) >= limit:
                break
    return out


def beir_queries(name: str) -> Iterator[tuple[str, str]]:
    with shared_data("beir", name, "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            yield row["_id"], row["text"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ranking(index: Index, query: str, **kw: object) -> list[tuple[str, str, int, int, float]]:
    """A search's top ten as comparable tuples: id, corpus, span and score (6 decimals)."""
    return [
        (h.doc_id, h.corpus, h.start, h.end, round(h.score, 6))
        for h in index.search(query, top_k=10, **kw)  # type: ignore[arg-type]
    ]
