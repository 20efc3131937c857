"""Language names: the Snowball stemmers PyStemmer knows."""

from __future__ import annotations

import functools

import Stemmer

__all__ = ["snowball_languages"]


@functools.cache
def snowball_languages() -> list[str]:
    """Every language with a Snowball stemmer, sorted (``english``, ``portuguese``, …)."""
    return sorted(Stemmer.algorithms())
