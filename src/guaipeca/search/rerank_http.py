"""A cross-encoder reranker behind an HTTP ``/rerank`` endpoint (SPEC §6.3).

The servers people run a reranker with speak two request shapes:

* ``documents``: ``{"model", "query", "documents": [str], "top_n"}`` — Cohere (``/v1`` and
  ``/v2/rerank``), Jina (``/v1/rerank``), vLLM (``/rerank``, ``/v1/rerank``, ``/v2/rerank``)
  and Infinity (``/rerank``); Jina and Infinity also take ``"return_documents": false``;
* ``texts``: ``{"query", "texts": [str], "truncate", "raw_scores"}`` — Hugging Face TEI
  (``/rerank``).

and answer with a list of ``{"index", "relevance_score" | "score"}``: bare (TEI) or under
``"results"`` (Cohere, Jina, vLLM, newer Infinity) or ``"data"`` (Infinity). ``api="auto"``
sends the ``documents`` shape first and, when the server refuses it as malformed (HTTP 400,
404 or 422), the ``texts`` shape, then keeps whichever worked.

httpx (already installed with the MCP SDK) does the HTTP: one pooled client per reranker,
a total timeout per call, no retries (a reranker that misses its deadline is skipped, and
the caller keeps the fused order).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from guaipeca.errors import RerankError
from guaipeca.types import RERANK_APIS, RerankApi

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpReranker"]

# A server that does not know the request shape answers one of these.
_WRONG_SHAPE: Final = frozenset({400, 404, 422})


class HttpReranker:
    """Scores ``(query, text)`` pairs with a remote cross-encoder.

    ``url`` is the full endpoint (e.g. ``http://localhost:8080/rerank``); ``api`` picks the
    request shape (module docstring); ``model`` is sent when given (Cohere, Jina, vLLM and
    Infinity use it to pick the model; TEI serves one); ``api_key`` goes in an
    ``Authorization: Bearer`` header; ``timeout`` bounds each call, in seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        api: RerankApi = "auto",
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        if api not in RERANK_APIS:
            raise ValueError(f"api must be one of {', '.join(RERANK_APIS)}, not {api!r}")
        self.url = url
        self.api: RerankApi = api
        self.model = model
        import httpx  # here: a search without an HTTP reranker never loads it (~75 ms)

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx.Client = httpx.Client(timeout=timeout, headers=headers, trust_env=False)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HttpReranker({self.url!r}, api={self.api!r})"

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in the order of ``texts`` (higher is better).

        Raises:
            RerankError: the call failed, timed out, or the answer is not a ranking of
                ``texts`` (the message says which, in one line).
        """
        if not texts:
            return []
        api = self.api
        if api != "auto":
            return self._call(api, query, texts)
        try:
            scores = self._call("cohere", query, texts)
        except _WrongShapeError:
            scores = self._call("tei", query, texts)
            self._settle("tei")
        else:
            self._settle("cohere")
        return scores

    def close(self) -> None:
        self._client.close()

    def _settle(self, api: RerankApi) -> None:
        with self._lock:
            self.api = api

    def _call(self, api: RerankApi, query: str, texts: Sequence[str]) -> list[float]:
        import httpx

        try:
            response = self._client.post(self.url, json=self._body(api, query, texts))
        except httpx.TimeoutException as exc:
            raise RerankError(f"reranker at {self.url} timed out") from exc
        except httpx.HTTPError as exc:
            raise RerankError(f"reranker at {self.url} failed: {_short(exc)}") from exc
        if response.status_code in _WRONG_SHAPE and self.api == "auto":
            raise _WrongShapeError(f"reranker at {self.url}: HTTP {response.status_code}")
        if response.status_code != 200:
            raise RerankError(f"reranker at {self.url} answered HTTP {response.status_code}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise RerankError(f"reranker at {self.url} answered with something not JSON") from exc
        return _parse(payload, len(texts), self.url)

    def _body(self, api: RerankApi, query: str, texts: Sequence[str]) -> dict[str, Any]:
        if api == "tei":
            return {"query": query, "texts": list(texts), "truncate": True, "raw_scores": False}
        body: dict[str, Any] = {"query": query, "documents": list(texts), "top_n": len(texts)}
        if self.model:
            body["model"] = self.model
        if api in ("jina", "infinity"):
            body["return_documents"] = False
        return body


class _WrongShapeError(RerankError):
    """The server refused the request shape (``api="auto"`` then tries the other one)."""


def _parse(payload: object, count: int, url: str) -> list[float]:
    """Scores in input order from any of the answer shapes; texts the server left out
    score ``-inf`` (they rank last, in their fused order)."""
    items = payload
    if isinstance(payload, dict):
        items = payload.get("results", payload.get("data"))
    if not isinstance(items, list):
        raise RerankError(f"reranker at {url} answered without a list of results")
    scores = [-math.inf] * count
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        value = item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < count
            or isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise RerankError(f"reranker at {url} answered a malformed result: {item!r:.80}")
        scores[index] = float(value)
    return scores


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:120]
