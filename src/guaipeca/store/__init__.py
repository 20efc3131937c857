"""Storage of one corpus: the SQLite catalog (truth), vector slots, and filters over them."""

from .catalog import Catalog, ChunkRecord, ChunkRow, DocRow, WriteTxn
from .filters import compile_where, parse_where_json, validate_where
from .lock import WriteLock
from .vectors import FileVectors, MemoryVectors, VectorSlots, write_vector_file

__all__ = [
    "Catalog",
    "ChunkRecord",
    "ChunkRow",
    "DocRow",
    "FileVectors",
    "MemoryVectors",
    "VectorSlots",
    "WriteLock",
    "WriteTxn",
    "compile_where",
    "parse_where_json",
    "validate_where",
    "write_vector_file",
]
