"""Chunk enrichment (SPEC §8): local keywords, entities and dates, and an optional LLM pass."""

from guaipeca.enrich.local import enrich_text
from guaipeca.enrich.types import Enrichment

__all__ = ["Enrichment", "enrich_text"]
