"""Storage: the contract every backend meets (contract), metadata filters (filters), the
embedded store (embedded/) and the Qdrant backend (qdrant/), opened by ``backends``."""

from guaipeca.store.contract import (
    Backend,
    ChunkRow,
    CorpusStore,
    DenseScan,
    DocRow,
    PreparedDocument,
    valid_corpus_name,
)
from guaipeca.store.filters import (
    compile_where,
    normalise_where,
    parse_where_json,
    validate_where,
)

__all__ = [
    "Backend",
    "ChunkRow",
    "CorpusStore",
    "DenseScan",
    "DocRow",
    "PreparedDocument",
    "compile_where",
    "normalise_where",
    "parse_where_json",
    "valid_corpus_name",
    "validate_where",
]
