"""The embedded store of one corpus: the SQLite catalog (truth) and its migrations, vector
slots, the binary prefilter, the write lock, the corpus that keeps them in step, and the
offline check."""

from guaipeca.store.embedded.catalog import Catalog, WriteTxn
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
    "Corpus",
    "FileVectors",
    "MemoryVectors",
    "VectorSlots",
    "WriteLock",
    "WriteTxn",
    "write_vector_file",
]
