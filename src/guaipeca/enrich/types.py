"""What enrichment adds to a chunk, and how it is stored (JSON in the catalog)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from guaipeca.text.normalize import normalize_term

__all__ = ["Enrichment"]


@dataclass(frozen=True, slots=True)
class Enrichment:
    """Per-chunk metadata: local fields always, LLM fields when an endpoint answered.

    ``entity_keys`` (casefolded, accents removed) is what case-insensitive filters and
    ``find_related`` match on; ``entities`` keeps the spelling seen in the text.
    """

    keywords: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    content_types: tuple[str, ...] = ()
    language: str | None = None
    context: str | None = None
    questions: tuple[str, ...] = ()
    source: str = "local"

    @property
    def entity_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(normalize_term(e) for e in self.entities))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the stored form, ``entity_keys`` included for filters)."""
        out: dict[str, Any] = {
            "keywords": list(self.keywords),
            "entities": list(self.entities),
            "entity_keys": list(self.entity_keys),
            "dates": list(self.dates),
            "content_types": list(self.content_types),
            "source": self.source,
        }
        if self.language:
            out["language"] = self.language
        if self.context:
            out["context"] = self.context
        if self.questions:
            out["questions"] = list(self.questions)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Enrichment:
        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key) or ()
            return tuple(str(v) for v in value if isinstance(v, str))

        context = data.get("context")
        language = data.get("language")
        return cls(
            keywords=strings("keywords"),
            entities=strings("entities"),
            dates=strings("dates"),
            content_types=strings("content_types"),
            language=language if isinstance(language, str) else None,
            context=context if isinstance(context, str) else None,
            questions=strings("questions"),
            source=str(data.get("source") or "local"),
        )

    @classmethod
    def from_json(cls, text: str) -> Enrichment:
        data = json.loads(text)
        return cls.from_dict(data if isinstance(data, dict) else {})

    def terms(self) -> tuple[tuple[str, str], ...]:
        """``(kind, term)`` pairs find_related looks up: ``e`` entity keys, ``k`` keywords."""
        return (
            *(("e", key) for key in self.entity_keys if key),
            *(("k", kw) for kw in dict.fromkeys(self.keywords) if kw),
        )

    def merged(self, other: Enrichment) -> Enrichment:
        """``self`` (local) with an LLM's fields added: lists united, LLM items first."""

        def union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*b, *a)))

        return replace(
            self,
            keywords=union(self.keywords, other.keywords),
            entities=union(self.entities, other.entities),
            dates=union(self.dates, other.dates),
            context=other.context or self.context,
            questions=other.questions or self.questions,
            source=other.source,
        )

    def embedding_text(self) -> str:
        """What is embedded with the chunk when ``enrich.embed`` is on."""
        parts = []
        if self.context:
            parts.append(self.context)
        if self.keywords:
            parts.append("Keywords: " + ", ".join(self.keywords))
        if self.questions:
            parts.append("Questions: " + " ".join(self.questions))
        return "\n".join(parts)
