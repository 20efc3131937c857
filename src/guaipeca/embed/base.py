"""The embedding contract shared by every embedder, and the text each chunk is embedded as.

Layers above embedding (storage, search, the server) only ever see :class:`Embedder`, so a
test can swap the real model for :class:`~guaipeca.embed.hashing.HashingEmbedder` and a user
can swap it for any other model without those layers changing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from guaipeca.errors import InvalidArgumentError, ModelError

__all__ = [
    "HEADING_SEPARATOR",
    "Embedder",
    "Vector",
    "Vectors",
    "check_texts",
    "embedding_input",
    "unit_rows",
]

#: One embedding, ``float32[dimension]``.
Vector = NDArray[np.float32]
#: A batch of embeddings, ``float32[n, dimension]``, one row per input text.
Vectors = NDArray[np.float32]

#: How the heading path is written on the first line of the embedded text (SPEC §3.5).
HEADING_SEPARATOR = " > "

# A cut that moves back to a word boundary may give up at most this share of the budget:
# losing more than a fifth of the text to avoid splitting one word is a bad trade.
_WORD_BOUNDARY_WINDOW = 0.2


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length ``float32`` vectors.

    ``name`` identifies the model *and* everything that changes its vectors (an index built
    with one name must not be searched with vectors of another); ``dimension`` is the length
    of every vector it returns.
    """

    name: str
    dimension: int

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed documents: ``float32[len(texts), dimension]``, rows L2-normalised.

        An empty sequence gives an array of shape ``(0, dimension)``.
        """
        ...

    def embed_query(self, text: str) -> Vector:
        """Embed one search query: ``float32[dimension]``, L2-normalised."""
        ...


def unit_rows(rows: object, dimension: int, what: str) -> Vectors:
    """``rows`` as ``float32[n, dimension]`` with every row L2-normalised.

    Every provider ends here, so no model (or server) that skips normalisation, or answers
    with the wrong width, gets vectors into an index. A zero row stays zero.

    Raises:
        ModelError: the rows are not a 2-D array of ``dimension`` columns, or not finite.
    """
    array = np.asarray(rows, dtype=np.float32)
    if array.ndim != 2 or array.shape[1] != dimension:
        raise ModelError(f"{what} gave vectors of shape {array.shape}, expected (n, {dimension})")
    if not np.isfinite(array).all():
        raise ModelError(f"{what} gave vectors with NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    out: Vectors = (array / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def check_texts(texts: Sequence[str]) -> Sequence[str]:
    """Refuse a bare string or a non-string item (a str is a Sequence[str] of letters)."""
    if isinstance(texts, str):
        raise InvalidArgumentError("embed_passages takes a list of texts, not a single string")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidArgumentError(f"text {i} is a {type(t).__name__}, not a string")
    return texts


def embedding_input(
    text: str,
    heading_path: Sequence[str],
    *,
    preprocess: bool = True,
    max_chars: int = 500,
    context: str = "",
    table_header: str | None = None,
) -> str:
    """The string a chunk is embedded as (SPEC §3.5); the stored chunk text never changes.

    With ``preprocess`` it is the heading path joined by ``" > "`` on its own
    line, then ``context`` when given (neighbour text added by ``chunking.overlap``, §3.3),
    then the first ``max_chars`` characters of ``text`` — cut back to a word boundary when
    one lies in the last 20% of that budget, so the model never sees half a word. Without
    ``preprocess`` the text is kept whole. Blank headings are skipped; an empty heading path
    gives no heading line. When the text itself opens with its own (last) heading, that
    heading is not repeated on the heading line: a section's first chunk would otherwise say
    its title twice, which drags the vector towards the title (measured on SciFact).
    ``context`` is not cut: its size is the caller's overlap setting. ``table_header`` (a
    table chunk's header row, §3.4b) comes on the line before the text when the text does not
    hold it already (a chunk cut from the middle of a long table), with or without
    ``preprocess``, so the rows' values are embedded with their column names.
    """
    if isinstance(heading_path, str):
        # A bare string is a Sequence[str] too; joining its characters would be silent garbage.
        raise InvalidArgumentError("heading_path must be a list of headings, not a string")
    if max_chars < 1:
        raise InvalidArgumentError(f"max_chars must be at least 1, got {max_chars}")
    body = _truncate_at_word(text, max_chars) if preprocess else text
    parts: list[str] = []
    headings = [h.strip() for h in heading_path if h.strip()]
    if headings and _opens_with_heading(text, headings[-1]):
        headings.pop()
    heading = HEADING_SEPARATOR.join(headings)
    if heading:
        parts.append(heading)
    if context:
        parts.append(context)
    if table_header and table_header not in text:
        parts.append(table_header)
    parts.append(body)
    return "\n".join(parts)


def _opens_with_heading(text: str, heading: str) -> bool:
    """Whether the first line of ``text`` is a Markdown ATX heading reading ``heading``."""
    first = text.lstrip("\n").split("\n", 1)[0].strip()
    if not first.startswith("#"):
        return False
    return first.lstrip("#").strip().rstrip("#").strip() == heading


def _truncate_at_word(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters, shortened to end at a word when that is cheap."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    if not text[max_chars].isspace():
        # The cut falls inside a word: back off to the last whitespace if it is close enough.
        floor = int(max_chars * (1 - _WORD_BOUNDARY_WINDOW))
        for i in range(len(cut) - 1, floor - 1, -1):
            if cut[i].isspace():
                cut = cut[:i]
                break
    return cut.rstrip()
