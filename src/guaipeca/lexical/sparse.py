"""BM25 for stores that score it themselves (the Qdrant and PostgreSQL backends): tantivy's
parameters, stable term indices and the document-length rounding tantivy uses, so every
backend ranks alike."""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["BM25_B", "BM25_K1", "fieldnorm", "term_index"]

#: tantivy's BM25 parameters (the embedded backend's keyword search).
BM25_K1: Final = 1.2
BM25_B: Final = 0.75


def term_index(term: str) -> int:
    """A term's sparse-vector index: 32 bits of its BLAKE2b hash (stable across runs)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def fieldnorm(length: int) -> int:
    """A document length as tantivy stores it (Lucene's one-byte SmallFloat.intToByte4)."""
    free = 24
    if length < free:
        return length
    i = length - free
    bits = i.bit_length()
    if bits < 4:
        code = i
    else:
        shift = bits - 4
        code = ((i >> shift) & 0x07) | ((shift + 1) << 3)
    low, shift = code & 0x07, (code >> 3) - 1
    return free + (low if shift == -1 else (low | 0x08) << shift)
