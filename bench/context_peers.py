"""The peers of bench/context.py: chunkers over the same files, and bm25s / dense / hybrid
retrieval over their chunks.

Chunkers (each chunk keeps its exact span in its file):

* ``windows``: fixed 1,000-character windows, 200 overlap (step 800);
* ``lc1000`` / ``lc500``: LangChain's ``RecursiveCharacterTextSplitter`` 1000/200 and 500/50
  with ``add_start_index=True`` (its default separators: blank line, line, space, character);
* ``paragraphs``: the file cut at its blank lines, i.e. the true paragraphs (and the title
  line): an oracle chunker that knows the answer units.

Retrievers over a chunker's chunks:

* ``bm25s``: bm25s with PyStemmer in the set's language and bm25s's stopword list for it;
* ``dense``: cosine over the chunks' vectors from Guaipeca's own embedder
  (``embed_passages`` on the raw chunk text, ``embed_query`` on the query), exact scan;
* ``hybrid``: Reciprocal Rank Fusion, k = 60, of the bm25s and dense lists (depth 100 each).

bm25s, PyStemmer and langchain-text-splitters are the ``bench`` extra; they are imported
only here, when a peer runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from context_data import Result

CHUNKERS = ("windows", "lc1000", "lc500", "paragraphs")
RRF_K = 60
FUSION_DEPTH = 100
SNOWBALL = {"pt": "portuguese", "en": "english", "es": "spanish", "fr": "french",
            "de": "german", "it": "italian", "nl": "dutch"}


@dataclass(frozen=True)
class PeerChunk:
    doc: str
    start: int
    end: int
    text: str


def fixed_windows(name: str, text: str, size: int = 1000, overlap: int = 200) -> list[PeerChunk]:
    """Windows of ``size`` characters every ``size - overlap``; the last one ends the text."""
    step = size - overlap
    out = []
    for start in range(0, max(1, len(text) - overlap), step):
        end = min(len(text), start + size)
        if text[start:end].strip():
            out.append(PeerChunk(name, start, end, text[start:end]))
        if end >= len(text):
            break
    return out


def paragraphs(name: str, text: str) -> list[PeerChunk]:
    """The blocks between blank lines, each stripped, with their spans."""
    out = []
    pos = 0
    for block in text.split("\n\n"):
        stripped = block.strip()
        if stripped:
            start = pos + block.index(stripped)
            out.append(PeerChunk(name, start, start + len(stripped), stripped))
        pos += len(block) + 2
    return out


def langchain_chunks(name: str, text: str, size: int, overlap: int) -> list[PeerChunk]:
    """LangChain's recursive splitter; its start index is checked against the text."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, add_start_index=True
    )
    out = []
    for doc in splitter.create_documents([text]):
        start = int(doc.metadata["start_index"])
        chunk = doc.page_content
        if text[start:start + len(chunk)] != chunk:
            raise AssertionError(f"{name}: LangChain's start_index {start} is not its chunk")
        out.append(PeerChunk(name, start, start + len(chunk), chunk))
    return out


def chunk_files(files: dict[str, str], chunker: str) -> list[PeerChunk]:
    make: Callable[[str, str], list[PeerChunk]] = {
        "windows": fixed_windows,
        "lc1000": lambda n, t: langchain_chunks(n, t, 1000, 200),
        "lc500": lambda n, t: langchain_chunks(n, t, 500, 50),
        "paragraphs": paragraphs,
    }[chunker]
    return [c for name in sorted(files) for c in make(name, files[name])]


def describe(chunker: str) -> str:
    return {
        "windows": "fixed 1,000-char windows, 200 overlap",
        "lc1000": "LangChain RecursiveCharacterTextSplitter 1000/200",
        "lc500": "LangChain RecursiveCharacterTextSplitter 500/50",
        "paragraphs": "the true paragraphs (oracle chunker)",
    }[chunker]


# -- retrieval ---------------------------------------------------------------------------------
class Bm25:
    """bm25s + PyStemmer over one chunker's chunks."""

    def __init__(self, chunks: Sequence[PeerChunk], language: str) -> None:
        import bm25s
        import Stemmer

        self.version = bm25s.__version__
        self.stemmer = Stemmer.Stemmer(SNOWBALL.get(language, language))
        self.stopwords = language
        self.n = len(chunks)
        tokens = bm25s.tokenize([c.text for c in chunks], stopwords=self.stopwords,
                                stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[int]:
        import bm25s

        qt = bm25s.tokenize([query], stopwords=self.stopwords, stemmer=self.stemmer,
                            show_progress=False)
        if not qt.ids or not qt.ids[0]:
            return []
        try:
            res, scores = self.retriever.retrieve(qt, k=min(k, self.n), show_progress=False,
                                                  n_threads=1)
        except ValueError:  # no query token is in the vocabulary
            return []
        return [int(d) for d, s in zip(res[0], scores[0], strict=True) if float(s) > 0]


def dense_search(matrix: np.ndarray, qvec: np.ndarray, k: int) -> list[int]:
    scores = matrix @ qvec
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


def rrf(lists: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal Rank Fusion: sum of 1 / (k + rank), rank from 1; ties keep first seen."""
    score: dict[int, float] = {}
    for lst in lists:
        for rank, item in enumerate(lst, 1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda i: -score[i])


def run_peer(
    chunks: Sequence[PeerChunk],
    queries: dict[str, str],
    method: str,
    *,
    bm25: Bm25 | None,
    matrix: np.ndarray | None,
    qvecs: dict[str, tuple[np.ndarray, float]] | None,
    top_k: int = 5,
) -> tuple[dict[str, list[Result]], list[float]]:
    """``({qid: top_k results}, per-query ms)`` for ``method`` bm25s, dense or hybrid.
    Dense times include the query's embedding (measured once, in ``qvecs``)."""
    runs: dict[str, list[Result]] = {}
    lat: list[float] = []
    for qid, q in queries.items():
        t = time.perf_counter()
        extra = 0.0
        if method == "bm25s":
            assert bm25 is not None
            ids = bm25.search(q, top_k)
        else:
            assert matrix is not None and qvecs is not None
            qvec, extra = qvecs[qid]
            dense = dense_search(matrix, qvec, FUSION_DEPTH if method == "hybrid" else top_k)
            if method == "hybrid":
                assert bm25 is not None
                ids = rrf([bm25.search(q, FUSION_DEPTH), dense])
            else:
                ids = dense
        lat.append((time.perf_counter() - t) * 1000 + extra)
        runs[qid] = [Result(chunks[i].doc, chunks[i].start, chunks[i].end) for i in ids[:top_k]]
    return runs, lat


def embed_chunks(embedder: Any, chunks: Sequence[PeerChunk],
                 log: Callable[[str], None] | None = None) -> np.ndarray:
    """The chunks' vectors, in batches; the memo embedder skips those it has and is saved
    every few batches, so an interrupted run keeps what it embedded."""
    out = []
    for n, i in enumerate(range(0, len(chunks), 256), 1):
        out.append(embedder.embed_passages([c.text for c in chunks[i:i + 256]]))
        if n % 4 == 0:
            embedder.save()
            if log:
                log(f"  {i + 256}/{len(chunks)} chunks embedded or found in the memo")
    return np.vstack(out).astype(np.float32) if out else np.zeros((0, embedder.dimension))
