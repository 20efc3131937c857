"""Opening a corpus after a crash (store/embedded/corpus/recovery.py): a lexical index a
crash left unclean is rebuilt from the catalog, with the same rankings."""

from __future__ import annotations

from pathlib import Path

from guaipeca import Index
from support import CountingEmbedder, ranking


def test_a_lexical_index_left_behind_by_a_crash_is_rebuilt_from_the_catalog(
    tmp_path: Path, counting_embedder: CountingEmbedder
) -> None:
    with Index(tmp_path / "idx", embedder=counting_embedder) as index:
        index.add_documents({f"d{i}": f"searchable words {i}" for i in range(20)})
        before = ranking(index, "searchable words 7", mode="keyword")
    state = tmp_path / "idx/corpora/default/lexical.state"
    state.write_text('{"generation": 0, "clean": false}')  # as a crash mid-write leaves it
    with Index(tmp_path / "idx", embedder=counting_embedder) as index:
        assert ranking(index, "searchable words 7", mode="keyword") == before
    assert '"clean": true' in state.read_text()
