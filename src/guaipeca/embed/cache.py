"""Query-embedding cache (SPEC §4.3): LRU + TTL, shrinking early when the machine runs short.

Embedding a query costs a few milliseconds of CPU, a dictionary lookup microseconds; users
and agents repeat queries a lot. Only queries are cached: passages are embedded once at
indexing time and stored, so caching them would only spend memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from guaipeca.embed.base import Embedder, Vector, Vectors
from guaipeca.errors import InvalidArgumentError

__all__ = ["CacheKey", "CachedEmbedder", "QueryCache"]

#: ``(model name, query text)``: the same text embeds differently under another model.
CacheKey = tuple[str, str]


def _system_memory_percent() -> float:
    """How full memory is, in percent: the machine's, or — when tighter — the process's own
    limit (a cgroup's ``MemoryMax``, or ``ulimit -v``), which the machine-wide figure
    does not see."""
    import psutil  # imported on first check only: most processes never get that far

    percent = float(psutil.virtual_memory().percent)
    for used, limit in _limits(psutil):
        if 0 < limit < 1 << 60:
            percent = max(percent, 100.0 * used / limit)
    return percent


_CGROUP_FILES = (
    ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.max"),  # v2
    ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def _limits(psutil: Any) -> list[tuple[int, int]]:
    """``(used, limit)`` pairs: the cgroup's memory and the process's address space."""
    out: list[tuple[int, int]] = []
    for used_file, limit_file in _CGROUP_FILES:
        try:
            with open(limit_file) as fh:
                raw = fh.read().strip()
            with open(used_file) as fh:
                used = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if raw.isdigit():
            out.append((used, int(raw)))
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            out.append((int(psutil.Process().memory_info().vms), int(soft)))
    except (ImportError, OSError, ValueError):
        pass
    return out


class QueryCache:
    """A thread-safe LRU cache of query vectors with a time-to-live.

    * at most ``max_entries`` entries (0 disables the cache); the least recently used goes;
    * an entry older than ``ttl_seconds`` (``None``: never) is a miss and is dropped;
    * memory pressure: on ``put``, after every ``check_every`` puts or ``check_interval``
      seconds since the last check, whichever comes first, ``memory_percent()`` is read and
      when it is above ``memory_threshold`` the least recently used half is dropped — so the
      cost of asking the OS stays bounded however fast queries arrive.

    ``clock`` and ``memory_percent`` are injectable so tests run without sleeping or filling
    memory. Stored vectors are private copies and ``get`` returns a fresh copy, so nobody can
    change a cached vector by writing to the array they were given.
    """

    def __init__(
        self,
        max_entries: int = 10_000,
        ttl_seconds: float | None = 3600.0,
        *,
        memory_threshold: float = 90.0,
        check_every: int = 100,
        check_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        memory_percent: Callable[[], float] = _system_memory_percent,
    ) -> None:
        if max_entries < 0:
            raise InvalidArgumentError(f"max_entries must be 0 or more, got {max_entries}")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise InvalidArgumentError(f"ttl_seconds must be positive or None, got {ttl_seconds}")
        if not 0 < memory_threshold <= 100:
            raise InvalidArgumentError(
                f"memory_threshold is a percentage in (0, 100], got {memory_threshold}"
            )
        if check_every < 1:
            raise InvalidArgumentError(f"check_every must be at least 1, got {check_every}")
        if check_interval < 0:
            raise InvalidArgumentError(f"check_interval must be 0 or more, got {check_interval}")
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self.memory_threshold = memory_threshold
        self.check_every = check_every
        self.check_interval = check_interval
        self._clock = clock
        self._memory_percent = memory_percent
        # Insertion/access order is recency order: the first item is the least recently used.
        self._entries: OrderedDict[CacheKey, tuple[float, Vector]] = OrderedDict()
        self._lock = threading.Lock()
        self._puts_since_check = 0
        self._last_check = clock()
        #: Entries dropped because the cache was full.
        self.evictions = 0
        #: Entries dropped because they outlived the TTL.
        self.expirations = 0
        #: Times memory pressure halved the cache.
        self.pressure_evictions = 0

    def get(self, key: CacheKey) -> Vector | None:
        """The cached vector for ``key`` (a copy), or ``None`` if absent or expired."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, vector = entry
            if self._clock() >= expires:
                del self._entries[key]
                self.expirations += 1
                return None
            self._entries.move_to_end(key)
            return vector.copy()

    def put(self, key: CacheKey, vector: Vector) -> None:
        """Store ``vector`` under ``key``, replacing any older entry and restarting its TTL."""
        if self.max_entries == 0:
            return
        stored = np.array(vector, dtype=np.float32, copy=True)
        stored.flags.writeable = False
        with self._lock:
            now = self._clock()
            expires = now + self.ttl_seconds if self.ttl_seconds is not None else float("inf")
            self._entries[key] = (expires, stored)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.evictions += 1
            self._puts_since_check += 1
            if (
                self._puts_since_check >= self.check_every
                or now - self._last_check >= self.check_interval
            ):
                self._puts_since_check = 0
                self._last_check = now
                if self._memory_percent() > self.memory_threshold:
                    self._drop_oldest_half()

    def _drop_oldest_half(self) -> None:
        # Rounded up so that a one-entry cache still gives something back.
        for _ in range((len(self._entries) + 1) // 2):
            self._entries.popitem(last=False)
        self.pressure_evictions += 1

    def clear(self) -> None:
        """Drop every entry (counters are kept)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Entries held, expired ones included until they are looked up or pushed out."""
        with self._lock:
            return len(self._entries)


class CachedEmbedder:
    """Wraps any :class:`~guaipeca.embed.base.Embedder`: queries go through a
    :class:`QueryCache` keyed by ``(name, text)``, passages pass straight through.

    ``hits`` and ``misses`` count query lookups. Two threads missing on the same text at once
    both embed it; the answers are identical, so that only costs a little CPU.
    """

    name: str
    dimension: int

    def __init__(self, inner: Embedder, cache: QueryCache | None = None) -> None:
        self.inner = inner
        self.cache = cache if cache is not None else QueryCache()
        self.name = inner.name
        self.dimension = inner.dimension
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> Vector:
        key = (self.name, text)
        cached = self.cache.get(key)
        with self._lock:
            if cached is None:
                self.misses += 1
            else:
                self.hits += 1
        if cached is not None:
            return cached
        vector = self.inner.embed_query(text)
        self.cache.put(key, vector)
        return vector

    def stats(self) -> dict[str, int]:
        """Counters for logs and ``/health``: hits, misses, entries and evictions."""
        with self._lock:
            hits, misses = self.hits, self.misses
        return {
            "hits": hits,
            "misses": misses,
            "entries": len(self.cache),
            "evictions": self.cache.evictions,
            "expirations": self.cache.expirations,
            "pressure_evictions": self.cache.pressure_evictions,
        }
