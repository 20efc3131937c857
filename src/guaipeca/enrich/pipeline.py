"""Enrichment inside indexing: local extraction per chunk, then the optional LLM pass.

The index calls :func:`local_pass` while it prepares a document (outside any lock) and
:func:`llm_pass` on a batch before embedding, so the LLM's fields can be embedded with the
text. Nothing here can make indexing fail: an LLM that is down, slow or answers garbage
leaves the local enrichment in place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from guaipeca.enrich.local import enrich_text
from guaipeca.enrich.types import Enrichment

if TYPE_CHECKING:
    from guaipeca.config import EnrichSettings
    from guaipeca.enrich.llm import LLMEnricher

__all__ = ["LLMCache", "llm_pass", "local_pass", "stored_form"]


@runtime_checkable
class LLMCache(Protocol):
    """Where LLM answers are kept (the embedded catalog has these methods)."""

    def cache_get(self, keys: Sequence[str]) -> dict[str, str]: ...

    def cache_put(self, items: Mapping[str, str]) -> None: ...


log = logging.getLogger("guaipeca.enrich")


def local_pass(
    texts: Sequence[str], language: str, settings: EnrichSettings
) -> list[Enrichment | None]:
    """Local enrichment of each chunk (None for all when ``enrich.local`` is off)."""
    if not settings.local:
        return [None] * len(texts)
    return [enrich_text(t, language) for t in texts]


def llm_pass(
    enricher: LLMEnricher,
    catalog: LLMCache | None,
    items: Sequence[tuple[str, Sequence[str], Enrichment | None]],
) -> list[Enrichment | None]:
    """Ask the LLM about each ``(text, heading_path, local enrichment)``; answers are
    cached in the corpus catalog (an unchanged chunk is never sent twice) and merged over
    the local fields. A chunk whose request failed keeps its local enrichment."""
    keys = [enricher.cache_key(text, heading) for text, heading, _ in items]
    cached = catalog.cache_get(sorted(set(keys))) if catalog is not None else {}
    todo = {k: (t, h) for k, (t, h, _) in zip(keys, items, strict=True) if k not in cached}
    fresh = enricher.enrich_many(todo) if todo else {}
    good = {k: e.to_json() for k, e in fresh.items() if e is not None}
    try:
        if catalog is not None:
            catalog.cache_put(good)
    except Exception:  # a cache that cannot be written only costs a resend later
        log.warning("could not store %d LLM enrichment(s) in the cache", len(good))
    out: list[Enrichment | None] = []
    for key, (_, _, local) in zip(keys, items, strict=True):
        answer = fresh.get(key)
        if answer is None and key in cached:
            answer = Enrichment.from_json(cached[key])
        if answer is None:
            out.append(local)
        else:
            out.append((local or Enrichment()).merged(answer))
    return out


def stored_form(
    enrichments: Sequence[Enrichment | None],
) -> list[tuple[str | None, tuple[tuple[str, str], ...]]]:
    """What the catalog stores per chunk: the JSON and the terms find_related looks up."""
    if all(e is None for e in enrichments):
        return []
    return [(None, ()) if e is None else (e.to_json(), e.terms()) for e in enrichments]
