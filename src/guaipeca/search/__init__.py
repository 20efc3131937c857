"""Retrieval over one corpus (dense, keyword) and the fusion and snippets above it."""

from .corpus import Corpus, PreparedDocument, valid_corpus_name
from .fusion import weighted_rrf
from .snippet import make_snippet

__all__ = ["Corpus", "PreparedDocument", "make_snippet", "valid_corpus_name", "weighted_rrf"]
