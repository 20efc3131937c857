"""Chunk enrichment (SPEC §8): local keywords, entities and dates, and an optional LLM pass."""

from .local import enrich_text, normalize_term
from .types import Enrichment

__all__ = ["Enrichment", "enrich_text", "normalize_term"]
