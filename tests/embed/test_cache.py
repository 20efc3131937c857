"""QueryCache (LRU, TTL, memory pressure) and CachedEmbedder, with a fake clock and fake
memory gauge instead of sleeps and real memory pressure."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from guaipeca.embed import CachedEmbedder, Embedder, HashingEmbedder, QueryCache
from guaipeca.errors import InvalidArgumentError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeMemory:
    def __init__(self, percent: float = 10.0) -> None:
        self.percent = percent
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.percent


def vec(x: float) -> np.ndarray:
    return np.full(4, x, dtype=np.float32)


def key(text: str) -> tuple[str, str]:
    return ("model", text)


def test_get_missing_and_roundtrip() -> None:
    cache = QueryCache(memory_percent=FakeMemory())
    assert cache.get(key("a")) is None
    cache.put(key("a"), vec(1))
    got = cache.get(key("a"))
    assert got is not None
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, vec(1))
    assert len(cache) == 1


def test_key_includes_model_name() -> None:
    cache = QueryCache(memory_percent=FakeMemory())
    cache.put(("m1", "q"), vec(1))
    assert cache.get(("m2", "q")) is None


def test_lru_order() -> None:
    cache = QueryCache(max_entries=3, memory_percent=FakeMemory())
    for name in "abc":
        cache.put(key(name), vec(ord(name)))
    assert cache.get(key("a")) is not None  # a is now the most recently used
    cache.put(key("d"), vec(4))
    assert cache.get(key("b")) is None  # b was the least recently used
    assert all(cache.get(key(n)) is not None for n in "acd")
    assert len(cache) == 3
    assert cache.evictions == 1


def test_put_replaces_without_growing() -> None:
    cache = QueryCache(max_entries=2, memory_percent=FakeMemory())
    cache.put(key("a"), vec(1))
    cache.put(key("a"), vec(2))
    assert len(cache) == 1
    np.testing.assert_array_equal(cache.get(key("a")), vec(2))


def test_ttl_expiry() -> None:
    clock = FakeClock()
    cache = QueryCache(ttl_seconds=60, clock=clock, memory_percent=FakeMemory())
    cache.put(key("a"), vec(1))
    clock.now += 59.9
    assert cache.get(key("a")) is not None
    clock.now += 0.1
    assert cache.get(key("a")) is None
    assert len(cache) == 0
    assert cache.expirations == 1


def test_ttl_restarts_on_put_and_none_means_forever() -> None:
    clock = FakeClock()
    cache = QueryCache(ttl_seconds=60, clock=clock, memory_percent=FakeMemory())
    cache.put(key("a"), vec(1))
    clock.now += 50
    cache.put(key("a"), vec(1))
    clock.now += 50
    assert cache.get(key("a")) is not None
    forever = QueryCache(ttl_seconds=None, clock=clock, memory_percent=FakeMemory())
    forever.put(key("a"), vec(1))
    clock.now += 1e9
    assert forever.get(key("a")) is not None


def test_memory_pressure_drops_oldest_half() -> None:
    memory = FakeMemory(percent=50)
    cache = QueryCache(
        memory_threshold=90,
        check_every=10,
        check_interval=1e9,
        clock=FakeClock(),
        memory_percent=memory,
    )
    for i in range(10):
        cache.put(key(str(i)), vec(i))
    assert memory.calls == 1  # the 10th put checks, and there is no pressure
    assert len(cache) == 10
    memory.percent = 95
    for i in range(10, 19):
        cache.put(key(str(i)), vec(i))
    assert memory.calls == 1  # rate-limited: nine puts since the last check
    assert len(cache) == 19
    cache.put(key("19"), vec(19))
    assert memory.calls == 2
    assert len(cache) == 10
    assert cache.pressure_evictions == 1
    # The least recently used half went; the newest half stays.
    assert cache.get(key("9")) is None
    assert all(cache.get(key(str(i))) is not None for i in range(10, 20))


def test_memory_check_after_interval() -> None:
    clock = FakeClock()
    memory = FakeMemory(percent=99)
    cache = QueryCache(check_every=1000, check_interval=10, clock=clock, memory_percent=memory)
    cache.put(key("a"), vec(1))
    cache.put(key("b"), vec(2))
    assert memory.calls == 0
    clock.now += 10
    cache.put(key("c"), vec(3))
    assert memory.calls == 1
    assert len(cache) == 1  # ceil(3 / 2) = 2 oldest dropped
    assert cache.get(key("c")) is not None


def test_default_memory_gauge_is_real() -> None:
    # The default reads psutil; with a 100% threshold it can never evict, but it must run.
    cache = QueryCache(memory_threshold=100, check_every=1)
    cache.put(key("a"), vec(1))
    assert len(cache) == 1


def test_vectors_are_private_copies() -> None:
    cache = QueryCache(memory_percent=FakeMemory())
    original = vec(1)
    cache.put(key("a"), original)
    original[:] = 7
    got = cache.get(key("a"))
    assert got is not None
    got[:] = 9
    np.testing.assert_array_equal(cache.get(key("a")), vec(1))


def test_zero_entries_disables_and_clear() -> None:
    off = QueryCache(max_entries=0, memory_percent=FakeMemory())
    off.put(key("a"), vec(1))
    assert off.get(key("a")) is None
    cache = QueryCache(memory_percent=FakeMemory())
    cache.put(key("a"), vec(1))
    cache.clear()
    assert len(cache) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_entries": -1},
        {"ttl_seconds": 0},
        {"memory_threshold": 0},
        {"memory_threshold": 101},
        {"check_every": 0},
        {"check_interval": -1},
    ],
    ids=str,
)
def test_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidArgumentError):
        QueryCache(**kwargs)  # type: ignore[arg-type]


def test_thread_safety() -> None:
    cache = QueryCache(max_entries=50, check_every=7, memory_percent=FakeMemory(95))
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(2000):
                k = key(f"{worker}-{i % 80}")
                if cache.get(k) is None:
                    cache.put(k, vec(i))
        except BaseException as exc:  # pragma: no cover - only on failure
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) <= 50


# -- CachedEmbedder -----------------------------------------------------------------------------


def test_cached_embedder_counts_hits() -> None:
    inner = HashingEmbedder(dimension=32)
    cached = CachedEmbedder(inner, QueryCache(memory_percent=FakeMemory()))
    assert isinstance(cached, Embedder)
    assert (cached.name, cached.dimension) == (inner.name, 32)
    first = cached.embed_query("what is a guaipeca")
    second = cached.embed_query("what is a guaipeca")
    cached.embed_query("something else")
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, inner.embed_query("what is a guaipeca"))
    assert (cached.hits, cached.misses) == (1, 2)
    assert cached.stats()["entries"] == 2


def test_cached_embedder_passes_passages_through() -> None:
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, QueryCache(memory_percent=FakeMemory()))
    texts = ["alpha beta", "gamma"]
    np.testing.assert_array_equal(cached.embed_passages(texts), inner.embed_passages(texts))
    assert (cached.hits, cached.misses, len(cached.cache)) == (0, 0, 0)


def test_shared_cache_keeps_models_apart() -> None:
    cache = QueryCache(memory_percent=FakeMemory())
    small = CachedEmbedder(HashingEmbedder(16), cache)
    large = CachedEmbedder(HashingEmbedder(32), cache)
    assert small.embed_query("q").shape == (16,)
    assert large.embed_query("q").shape == (32,)
    assert large.misses == 1
