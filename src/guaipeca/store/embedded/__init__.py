"""The embedded store of one corpus: the SQLite catalog (truth) and its migrations, vector
slots, the binary prefilter, the write lock, the corpus that keeps them in step, and the
offline check."""

from guaipeca.store.embedded.catalog import Catalog, ChunkRecord, WriteTxn
from guaipeca.store.embedded.corpus import Corpus
from guaipeca.store.embedded.lock import WriteLock
from guaipeca.store.embedded.vectors import (
    FileVectors,
    MemoryVectors,
    VectorSlots,
    write_vector_file,
)

__all__ = [
    "Catalog",
    "ChunkRecord",
    "Corpus",
    "FileVectors",
    "MemoryVectors",
    "VectorSlots",
    "WriteLock",
    "WriteTxn",
    "write_vector_file",
]
