"""Shared fixtures: a tmp GUAIPECA_HOME for every test, the real bundled model (loaded once,
passages memoised so several indexes of the same texts embed them once), and the test data
kept in ``tests/data`` (documents and a SciFact sample)."""

from __future__ import annotations

import pytest

from guaipeca.embed import OnnxEmbedder
from support import CountingEmbedder, MemoEmbedder, beir_corpus


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUAIPECA_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture(scope="session")
def real_embedder() -> MemoEmbedder:
    return MemoEmbedder(OnnxEmbedder())


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(scope="session")
def scifact_sample() -> dict[str, str]:
    """150 SciFact abstracts as Markdown documents (title as a heading)."""
    return {k: f"# {t}\n\n{x}" for k, (t, x) in beir_corpus("scifact", 150).items()}
