"""The facade: the :class:`Index` class (facade) over its corpora (corpora) and models (models),
its search phases (pipeline, ranking), write path (write) and result shaping (results).

Everything above it (agentic, ingest, evaluate, the CLI and the server) uses this public API only.
"""

from guaipeca.config import MAX_TOP_K
from guaipeca.index.checks import MAX_QUERY_CHARS
from guaipeca.index.evidence import MAX_BUDGET
from guaipeca.index.facade import Index
from guaipeca.index.write import check_chunk_count, count_chunks

__all__ = [
    "MAX_BUDGET",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "Index",
    "check_chunk_count",
    "count_chunks",
]
