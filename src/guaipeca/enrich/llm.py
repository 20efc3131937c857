"""Optional LLM enrichment (SPEC §8.2) over any OpenAI-compatible chat endpoint.

For each chunk the model is asked for a JSON object: a context sentence situating the chunk
in its document, keywords, hypothetical questions the chunk answers, named entities and
dates. Requests run on ``workers`` threads with a timeout each, retried with exponential
backoff on timeouts, connection errors, 429/5xx and malformed answers. When the endpoint
keeps failing, the rest of the batch is skipped for a while (a circuit breaker), so an
endpoint that is down costs seconds, not ``chunks × retries × timeout``. Callers get None
for a chunk that could not be enriched and keep its local enrichment.

httpx2 is already installed with the MCP SDK; nothing else is needed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import httpx2

from guaipeca.enrich.types import Enrichment

__all__ = ["PROMPT_VERSION", "LLMEnricher"]

log = logging.getLogger("guaipeca.enrich")

#: Part of every cache key: a new prompt must not reuse answers to the old one.
PROMPT_VERSION: Final = "1"
_MAX_ITEMS: Final = 15
_MAX_ITEM_CHARS: Final = 200
_MAX_CONTEXT_CHARS: Final = 600
_BREAKER_FAILURES: Final = 3  # consecutive chunks that failed every attempt
_BREAKER_SECONDS: Final = 60.0
_DATE: Final = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_FENCE: Final = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")

_SYSTEM: Final = (
    "You enrich passages of a document for a search index. Answer with one JSON object "
    "and nothing else, with these keys: "
    '"context": one sentence situating the passage within its document; '
    '"keywords": up to 10 key terms; '
    '"questions": up to 5 questions the passage answers; '
    '"entities": up to 15 named entities (people, organisations, places, products, '
    "genes, laws...) as written in the passage; "
    '"dates": dates mentioned, as YYYY-MM-DD, YYYY-MM or YYYY. '
    "Write in the passage's language."
)


class _Retry(Exception):
    """A failure worth another attempt (timeout, 429/5xx, connection, malformed answer)."""

    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


class _GiveUp(Exception):
    """A failure no retry will fix (400, 401, 403, 404...)."""


class LLMEnricher:
    """A client for one endpoint and model; safe to share between threads."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        workers: int = 2,
        timeout: float = 30.0,
        retries: int = 2,
        max_chars: int = 4000,
        backoff: float = 0.5,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.workers = workers
        self.timeout = timeout
        self.retries = retries
        self.max_chars = max_chars
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx2.Client(
            headers=headers, timeout=timeout, transport=transport, follow_redirects=False
        )
        self._lock = threading.Lock()
        self._failures = 0
        self._down_until = 0.0
        self.requests = 0  # HTTP requests sent (for tests and logs)

    @classmethod
    def from_settings(cls, settings: Any) -> LLMEnricher:
        key = settings.api_key.get_secret_value() if settings.api_key is not None else None
        return cls(
            settings.url,
            settings.model,
            api_key=key,
            workers=settings.workers,
            timeout=settings.timeout_seconds,
            retries=settings.retries,
            max_chars=settings.max_chars,
        )

    def close(self) -> None:
        self._client.close()

    def cache_key(self, text: str, heading_path: Sequence[str]) -> str:
        """What identifies an answer: prompt version, model and exactly what is sent."""
        payload = json.dumps(
            [PROMPT_VERSION, self.model, list(heading_path), text[: self.max_chars]],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    # -- requests ----------------------------------------------------------------------
    def enrich_many(
        self, items: Mapping[str, tuple[str, Sequence[str]]]
    ) -> dict[str, Enrichment | None]:
        """``key -> (text, heading_path)`` in, ``key -> Enrichment or None`` out."""
        keys = list(items)
        if not keys:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.workers, len(keys))) as pool:
            answers = list(pool.map(lambda k: self.enrich_one(*items[k]), keys))
        failed = sum(a is None for a in answers)
        if failed:
            log.warning(
                "LLM enrichment: %d of %d chunk(s) kept local enrichment only", failed, len(keys)
            )
        return dict(zip(keys, answers, strict=True))

    def enrich_one(self, text: str, heading_path: Sequence[str] = ()) -> Enrichment | None:
        """One chunk, with retries; None when the endpoint could not give a usable answer."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return None
        for attempt in range(self.retries + 1):
            try:
                result = self._ask(text, heading_path)
            except _GiveUp as exc:
                log.warning("LLM enrichment refused: %s", exc)
                break
            except _Retry as exc:
                if attempt == self.retries:
                    log.warning("LLM enrichment failed after %d attempt(s): %s", attempt + 1, exc)
                    break
                delay = self.backoff * 2**attempt
                time.sleep(min(8.0, exc.wait if exc.wait is not None else delay))
                continue
            with self._lock:
                self._failures = 0
            return result
        with self._lock:
            self._failures += 1
            if self._failures >= _BREAKER_FAILURES:
                self._down_until = time.monotonic() + _BREAKER_SECONDS
                log.warning(
                    "LLM endpoint failing; skipping LLM enrichment for %.0f s", _BREAKER_SECONDS
                )
        return None

    def _ask(self, text: str, heading_path: Sequence[str]) -> Enrichment:
        where = " > ".join(heading_path)
        user = (f"Document section: {where}\n\n" if where else "") + text[: self.max_chars]
        body = {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": user},
            ],
        }
        with self._lock:
            self.requests += 1
        try:
            response = self._client.post(self.url, json=body)
        except httpx2.TimeoutException:
            raise _Retry(f"no answer within {self.timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise _Retry(f"cannot reach the endpoint ({type(exc).__name__})") from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retry(f"HTTP {response.status_code}", _retry_after(response))
        if response.status_code != 200:
            raise _GiveUp(f"HTTP {response.status_code} from the endpoint")
        try:
            content = response.json()["choices"][0]["message"]["content"]
            return parse_answer(content)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retry(f"malformed answer ({str(exc)[:80]})") from None


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _items(data: Mapping[str, Any], key: str, *, dates: bool = False) -> tuple[str, ...]:
    value = data.get(key, [])
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{key} is not a list")
    out: list[str] = []
    for item in value[:_MAX_ITEMS]:
        if not isinstance(item, str):
            continue
        item = " ".join(item.split())[:_MAX_ITEM_CHARS]
        if not item or (dates and not _DATE.match(item)):
            continue
        out.append(item.casefold() if key == "keywords" else item)
    return tuple(dict.fromkeys(out))


def parse_answer(content: object) -> Enrichment:
    """The model's message as an :class:`Enrichment`.

    Raises:
        ValueError: not a JSON object with the expected kinds of values.
    """
    if not isinstance(content, str):
        raise ValueError("content is not text")
    data = json.loads(_FENCE.sub("", content))
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    context = data.get("context")
    if context is not None and not isinstance(context, str):
        raise ValueError("context is not text")
    result = Enrichment(
        keywords=_items(data, "keywords"),
        entities=_items(data, "entities"),
        dates=_items(data, "dates", dates=True),
        questions=_items(data, "questions"),
        context=" ".join(context.split())[:_MAX_CONTEXT_CHARS] if context else None,
        source="llm",
    )
    if not (result.context or result.keywords or result.entities or result.questions):
        raise ValueError("the answer has none of the expected fields")
    return result
