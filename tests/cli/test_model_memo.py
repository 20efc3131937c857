"""LazyModel and the model note: the real model loads on the first call that needs a
vector, and the note is only trusted for the settings it was written with."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from guaipeca.cli.model_memo import lazy_model, note_model
from guaipeca.config import EmbeddingSettings
from guaipeca.embed import Embedder, HashingEmbedder, identity_of


def test_the_note_gives_a_lazy_model_for_the_same_settings_only(tmp_path: Path) -> None:
    settings = EmbeddingSettings()
    loads: list[int] = []

    def load() -> Embedder:
        loads.append(1)
        return HashingEmbedder(16)

    assert lazy_model(tmp_path, settings, load) is None  # nothing noted yet
    note_model(tmp_path, settings, HashingEmbedder(16))
    lazy = lazy_model(tmp_path, settings, load)
    assert lazy is not None and (lazy.name, lazy.dimension) == ("hashing-16", 16)
    assert lazy.identity == identity_of(HashingEmbedder(16))
    assert not lazy.loaded and not loads
    vector = lazy.embed_query("backup")
    assert lazy.loaded and loads == [1]
    assert np.array_equal(vector, HashingEmbedder(16).embed_query("backup"))
    lazy.embed_passages(["a", "b"])
    assert loads == [1]  # loaded once
    other = settings.model_copy(update={"batch_size": settings.batch_size + 1})
    assert lazy_model(tmp_path, other, load) is None
    # Another model's note is kept beside this one (a corpus with its own model).
    note_model(tmp_path, other, HashingEmbedder(24))
    assert lazy_model(tmp_path, settings, load) is not None
    assert lazy_model(tmp_path, other, load).dimension == 24  # type: ignore[union-attr]
    (tmp_path / "model.json").write_text("{broken", encoding="utf-8")
    assert lazy_model(tmp_path, settings, load) is None
