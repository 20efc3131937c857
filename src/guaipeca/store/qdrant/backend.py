"""The connection to Qdrant (server, cluster or local mode) and what every corpus shares.

:class:`QdrantBackend` opens, lists and drops corpora (one collection each, see
:mod:`guaipeca.store.qdrant.corpus`) and runs every request: a timeout per request,
transport errors and 5xx answers retried three times, then one clear
:class:`~guaipeca.store.contract.BackendUnavailableError`.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from guaipeca.errors import BackendUnavailableError, ConfigError, GuaipecaError
from guaipeca.store.contract import is_corpus_name, valid_corpus_name

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from guaipeca.config import QdrantSettings
    from guaipeca.store.qdrant.corpus import QdrantCorpus

__all__ = ["QdrantBackend"]

T = TypeVar("T")
_RETRIES = (0.2, 0.5, 1.0)


class QdrantBackend:
    """A Qdrant server, cluster or local-mode folder holding the corpora."""

    name = "qdrant"

    def __init__(
        self,
        client: QdrantClient,
        *,
        prefix: str = "guaipeca_",
        target: str,
        local: bool,
        exact: bool = True,
        replication_factor: int | None = None,
        shard_number: int | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.target = target
        self.local = local
        self.exact = exact
        self.replication_factor = replication_factor
        self.shard_number = shard_number
        # Local mode is plain Python objects shared by every thread: one call at a time.
        self._guard: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if local else contextlib.nullcontext()
        )

    @classmethod
    def from_settings(cls, qs: QdrantSettings) -> QdrantBackend:
        """Connect as ``storage.qdrant`` says (no request is sent until first use).

        Raises:
            ConfigError: qdrant-client is not installed.
        """
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            raise ConfigError(
                "storage.backend: qdrant needs the Qdrant extra: pip install 'guaipeca[qdrant]'"
            ) from None
        if qs.path is not None:
            Path(qs.path).mkdir(parents=True, exist_ok=True)
            client = cls._local_client(str(qs.path))
            target = f"local Qdrant in {qs.path}"
        else:
            assert qs.url is not None
            client = QdrantClient(
                url=qs.url,
                api_key=qs.api_key.get_secret_value() if qs.api_key else None,
                timeout=max(1, math.ceil(qs.timeout)),
                prefer_grpc=qs.prefer_grpc,
                check_compatibility=False,
            )
            target = f"Qdrant at {qs.url}"
        return cls(
            client,
            prefix=qs.collection_prefix,
            target=target,
            local=qs.path is not None,
            replication_factor=qs.replication_factor,
            shard_number=qs.shard_number,
        )

    @staticmethod
    def _local_client(path: str) -> QdrantClient:
        from qdrant_client import QdrantClient

        try:
            return QdrantClient(path=path)
        except RuntimeError as exc:  # portalocker: another process has the folder open
            raise GuaipecaError(
                f"the local Qdrant folder {path} is in use by another process "
                "(local mode allows one); stop it or use a Qdrant server"
            ) from exc

    @classmethod
    def open_local(cls, path: str | Path, *, prefix: str = "guaipeca_") -> QdrantBackend:
        """qdrant-client's embedded local mode in ``path`` (tests, small set-ups)."""
        Path(path).mkdir(parents=True, exist_ok=True)
        return cls(
            cls._local_client(str(path)),
            prefix=prefix,
            target=f"local Qdrant in {path}",
            local=True,
        )

    # -- calls with retries ---------------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: Any, retry: bool = True, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, retried on transport errors; one clear error at the end.

        Raises:
            BackendUnavailableError: the server did not answer after the retries.
            GuaipecaError: the server refused the request.
        """
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        last: Exception | None = None
        for delay in (*_RETRIES, None) if retry else (None,):
            try:
                with self._guard:
                    return fn(*args, **kwargs)
            except UnexpectedResponse as exc:
                if exc.status_code is not None and exc.status_code < 500:
                    detail = exc.content[:160].decode("utf-8", "replace").replace("\n", " ")
                    raise GuaipecaError(
                        f"{self.target} refused the request ({exc.status_code}): {detail}"
                    ) from None
                last = exc
            except (ResponseHandlingException, OSError, TimeoutError) as exc:
                last = exc
            except Exception as exc:
                if not _transport_error(exc):
                    raise
                last = exc
            if delay is not None:
                time.sleep(delay)
        reason = _short(last)
        raise BackendUnavailableError(
            f"{self.target} is not answering ({reason}); check that it is running and "
            "reachable, then retry"
        ) from None

    def check(self) -> None:
        """One request, no retries (health checks must answer quickly)."""
        self.call(self.client.get_collections, retry=False)

    # -- corpora --------------------------------------------------------------------------
    def collection(self, corpus: str) -> str:
        return self.prefix + corpus

    def corpus_names(self) -> list[str]:
        found = self.call(self.client.get_collections).collections
        names = [c.name[len(self.prefix) :] for c in found if c.name.startswith(self.prefix)]
        return sorted(n for n in names if is_corpus_name(n))

    def open_corpus(self, name: str, *, language: str | None, model: str, dim: int) -> QdrantCorpus:
        from guaipeca.store.qdrant.corpus import QdrantCorpus

        return QdrantCorpus(self, name, language=language, model=model, dim=dim)

    def drop_corpus(self, name: str) -> None:
        valid_corpus_name(name)
        if self.call(self.client.collection_exists, self.collection(name)):
            self.call(self.client.delete_collection, self.collection(name))

    def close(self) -> None:
        self.client.close()


def _transport_error(exc: Exception) -> bool:
    """httpx and gRPC transport failures, without importing either eagerly."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"TransportError", "TimeoutException", "HTTPError", "RpcError"})


def _short(exc: Exception | None) -> str:
    if exc is None:
        return "no answer"
    text = str(getattr(exc, "source", None) or exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:160]
