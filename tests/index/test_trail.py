"""Heading trails, table header rows and snippet highlights through the Index (§3.4b, §6.7),
and migration m006 on an index written before them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from guaipeca import Index
from guaipeca.config import ChunkingSettings, EngineSettings
from guaipeca.embed import HashingEmbedder

GUIDE = (
    "# Duck\n\nDucks are birds.\n\n## Behaviour\n\nDucks swim.\n\n"
    "### Feeding\n\nDucks eat grasses, aquatic plants, fish and insects.\n\n"
    "### Predators\n\nFoxes and hawks hunt ducks.\n\n"
    "## Species\n\n| species | weight |\n|---|---|\n"
    + "\n".join(f"| species number {i} with a long descriptive name | {i} kg |" for i in range(40))
    + "\n"
)


def _index(path: Path | None = None) -> Index:
    settings = EngineSettings(chunking=ChunkingSettings(max_size=400))
    return Index(path, embedder=HashingEmbedder(64), settings=settings)


def test_hits_from_a_third_level_section_carry_the_full_trail() -> None:
    with _index() as ix:
        ix.add_documents({"duck": GUIDE})
        hit = ix.search("what do ducks eat?", mode="keyword")[0]
        assert hit.heading_path == ("Duck", "Behaviour")
        assert hit.heading_trail == ("Duck", "Behaviour", "Feeding")
        assert "**eat**" in hit.snippet
        assert [hit.text[a:b].lower() for a, b in hit.highlights] == ["ducks", "eat"]
        as_dict = hit.to_dict()
        assert as_dict["heading_trail"] == ["Duck", "Behaviour", "Feeding"]
        assert as_dict["highlights"] == [list(h) for h in hit.highlights]
        assert as_dict["ocr"] is False
        assert ix.get_chunk(hit.chunk_id).heading_trail == hit.heading_trail


def test_section_filter_matches_a_trail_prefix_or_the_two_level_path() -> None:
    with _index() as ix:
        ix.add_documents({"duck": GUIDE})
        hits = ix.search("ducks", mode="keyword", section_filter="Duck > Behaviour > Predators")
        assert {h.heading_trail for h in hits} == {("Duck", "Behaviour", "Predators")}
        hits = ix.search("ducks", mode="keyword", section_filter="Duck > Behaviour")
        assert {h.heading_trail[-1] for h in hits} == {"Behaviour", "Feeding", "Predators"}


def test_table_chunks_carry_their_header_row() -> None:
    with _index() as ix:
        ix.add_documents({"duck": GUIDE})
        hits = ix.search("species number 33", mode="keyword", top_k=3)
        top = hits[0]
        assert "| species number 33 " in top.text and "| species | weight |" not in top.text
        assert top.table_header == "| species | weight |"
        assert top.to_dict()["table_header"] == "| species | weight |"
        assert "|---|" not in top.snippet and "name | **33** kg" in top.snippet


def test_an_index_written_before_m006_gets_trails_and_headers_filled_in(tmp_path: Path) -> None:
    folder = tmp_path / "ix"
    with _index(folder) as ix:
        ix.add_documents({"duck": GUIDE})
        before = {
            c.chunk_id: (c.heading_trail, c.table_header)
            for h in ix.search("ducks species", mode="keyword", top_k=50)
            for c in [ix.get_chunk(h.chunk_id)]
        }
    assert any(len(t) == 3 for t, _ in before.values())
    assert any(header for _, header in before.values())
    db = sqlite3.connect(folder / "corpora" / "default" / "catalog.sqlite")
    db.executescript(
        "ALTER TABLE chunks DROP COLUMN heading_trail; ALTER TABLE chunks DROP COLUMN table_header;"
        "UPDATE meta SET value = '5' WHERE key = 'schema_version';"
    )
    db.close()
    with _index(folder) as ix:
        after = {
            cid: (ix.get_chunk(cid).heading_trail, ix.get_chunk(cid).table_header) for cid in before
        }
    assert after == before
