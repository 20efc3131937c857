"""Searches answered in part, and the caller told so.

A store may answer a search without one of its parts only when the caller asked for partial
results (``storage.postgres.partial_results``: a sharded corpus with a shard down) *and* a
search is listening here: :func:`collecting` around the search, :func:`report_missing` from
the store for each part it left out. Outside :func:`collecting` (listing documents, reading a
chunk, a migration) nobody would be told, so the store fails instead.

The list lives in a context variable: each thread (and each asyncio task) sees its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["collecting", "listening", "report_missing", "reported"]

_missing: ContextVar[list[str] | None] = ContextVar("guaipeca_missing_parts", default=None)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Collect the parts the stores leave out until the block ends (each named once, in the
    order they were first reported). Nested, the outer block is told them too (a tool that
    runs several searches, or reads around one)."""
    outer = _missing.get()
    found: list[str] = []
    token = _missing.set(found)
    try:
        yield found
    finally:
        _missing.reset(token)
        if outer is not None:
            outer.extend(part for part in found if part not in outer)


def listening() -> bool:
    """Whether a search is collecting here (a store may then answer in part)."""
    return _missing.get() is not None


def reported() -> tuple[str, ...]:
    """The parts reported missing so far in the listening search (none if none listens)."""
    return tuple(_missing.get() or ())


def report_missing(part: str) -> None:
    """Tell the listening search that its answer leaves ``part`` out (nothing if none is)."""
    found = _missing.get()
    if found is not None and part not in found:
        found.append(part)
