"""arara-rag's ``Arara`` on Guaipeca's :class:`~guaipeca.Index`: code written for arara runs
unchanged (``from arara_rag import Arara`` works too, through the ``arara_rag`` package).

What maps to what: ``Arara(path=None)`` is ``Index(path)`` (memory when ``path`` is None) with
Portuguese stemming and stopwords for its corpus (arara is Portuguese-first);
``max_chunk_chars`` is ``chunking.max_size``; the other calls are the Index's of the same
name, on one corpus. Filters take the same operators (README "Filters"). Unlike arara's,
the vectors come from Guaipeca's embedding model (the bundled one unless ``embedder`` is
given), so scores differ from arara's; the calls and their results' shapes do not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from guaipeca import (
    AddReport,
    Chunk,
    EngineSettings,
    Hit,
    Index,
    InvalidArgumentError,
    NotFoundError,
)
from guaipeca.embed import Embedder

__all__ = ["Arara"]

#: The one corpus an ``Arara`` keeps its documents in.
ARARA_CORPUS = "default"
#: The smallest and largest chunk size Guaipeca takes (``chunking.max_size``).
_CHUNK_CHARS = (64, 100_000)


class Arara:
    """arara-rag's index: add, search, resolve and maintain documents.

    Args:
        path: a folder to keep the index in (created when missing); None keeps it in memory.
        max_chunk_chars: most characters in one chunk (arara's default, 2000).
        workers: accepted for arara's code; Guaipeca chunks and embeds in this process (the
            result is the same either way).
        language: stemming and stopwords for keyword search (Portuguese, as arara).
        embedder: the embedding model (default: Guaipeca's default model).

    Raises:
        InvalidArgumentError: ``max_chunk_chars`` outside 64..100000.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        max_chunk_chars: int = 2000,
        *,
        workers: int | None = None,
        language: str = "portuguese",
        embedder: Embedder | None = None,
    ) -> None:
        low, high = _CHUNK_CHARS
        if isinstance(max_chunk_chars, bool) or not low <= max_chunk_chars <= high:
            raise InvalidArgumentError(
                f"max_chunk_chars must be {low}..{high}, not {max_chunk_chars!r:.30}"
            )
        settings = EngineSettings.model_validate(
            {"language": language, "chunking": {"max_size": max_chunk_chars}}
        )
        self.workers = workers
        #: The Guaipeca index underneath (its whole API is there).
        self.index = Index(path, embedder=embedder, settings=settings)

    def add_documents(
        self, docs: Mapping[str, str], metadata: Mapping[str, Any] | None = None
    ) -> AddReport:
        """Insert or replace documents (``{doc_id: text}``), ``metadata`` on each of them;
        unchanged documents are skipped."""
        return self.index.add_documents(docs, metadata, corpus=ARARA_CORPUS)

    def search(
        self,
        query: str,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> list[Hit]:
        """The best ``top_k`` chunks for ``query`` (hybrid), filtered by ``where``; each hit
        has ``doc_id``, ``start``/``end``, ``score``, ``text`` and ``metadata``. Other
        :meth:`Index.search` options (``mode``, ``rerank``, …) pass through."""
        return self.index.search(query, top_k=top_k, where=where, **options)

    def resolve(self, hit: Hit | Chunk) -> str:
        """The exact span of the stored document that ``hit`` points at."""
        return self.index.resolve(hit)

    def get_document(self, doc_id: str) -> tuple[str, dict[str, Any]] | None:
        """``(text, metadata)`` of a document, or None when there is none of that id
        (never added, or deleted)."""
        try:
            doc = self.index.get_document(doc_id, corpus=ARARA_CORPUS)
        except NotFoundError:
            return None
        return doc.text, dict(doc.metadata)

    def update_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> None:
        """Merge ``metadata`` into a document's, without re-embedding.

        Raises:
            NotFoundError: no such document.
        """
        self.index.update_metadata(doc_id, metadata, corpus=ARARA_CORPUS)

    def delete_document(self, doc_id: str) -> bool:
        """Delete a document (its chunks' slots are reused by the next write); False when
        there was none."""
        return self.index.delete_document(doc_id, corpus=ARARA_CORPUS)

    def compact(self) -> None:
        """Reclaim the space deleted documents left in the files."""
        self.index.compact()

    def close(self) -> None:
        """Close the files (the object is unusable after)."""
        self.index.close()

    def __enter__(self) -> Arara:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
