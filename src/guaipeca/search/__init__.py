"""Retrieval above the stores: fusion, reranking and snippets."""

from guaipeca.search.fusion import weighted_rrf
from guaipeca.search.snippet import make_snippet

__all__ = ["make_snippet", "weighted_rrf"]
