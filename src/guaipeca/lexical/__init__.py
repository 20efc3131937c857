"""Lexical retrieval: the Snowball analyzer (analyzer) and the BM25 index on tantivy (bm25)."""

from guaipeca.lexical.analyzer import MAX_TOKEN_CHARS, Analyzer
from guaipeca.lexical.bm25 import LexicalIndex

__all__ = ["MAX_TOKEN_CHARS", "Analyzer", "LexicalIndex"]
