"""Every backend behind one fixture (see support.qdrant)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guaipeca import Index
from support.qdrant import BACKENDS, MakeIndex, open_index


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_primary")  # a real server, started once per session
    return str(request.param)


@pytest.fixture
def make_index(backend: str, tmp_path: Path) -> Iterator[MakeIndex]:
    """Open (or reopen, after closing the previous one) an index on the backend under test."""
    opened: list[Index] = []

    def make(**kwargs: Any) -> Index:
        index = open_index(backend, tmp_path, **kwargs)
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()
