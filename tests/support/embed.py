"""Helpers for the embedders' tests (tests/embed/)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from guaipeca.embed import Embedder


def assert_batch_equals_one_by_one(
    embedder: Embedder, texts: Sequence[str], *, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Embed ``texts`` in one call and each on its own; assert the rows agree to ``atol`` per
    component (0: identical, not merely close). Returns ``(together, alone)`` for the caller's
    own checks; each caller argues its tolerance where it calls this."""
    together = embedder.embed_passages(texts)
    alone = np.stack([embedder.embed_passages([t])[0] for t in texts])
    if atol == 0:
        assert np.array_equal(together, alone)
    else:
        np.testing.assert_allclose(together, alone, atol=atol)
    return together, alone
