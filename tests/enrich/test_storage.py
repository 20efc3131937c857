"""Where enrichment lives: migration m003 on an existing catalog, the chunk columns and
term table, cascade on delete, and where-filters on the enrichment lists."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from guaipeca import Index, InvalidFilterError, agentic
from guaipeca.embed import HashingEmbedder
from guaipeca.store import validate_where
from guaipeca.store.embedded.migrations import MIGRATIONS, SCHEMA_VERSION

MEMO = (
    "# Memo\n\n## One\n\nMaria Silva joined NASA on 3 March 2024.\n\n"
    "## Two\n\nThe Banco do Brasil met ESA in 2019.\n\n"
    "## Three\n\n| team | size |\n|---|---|\n| ops | 4 |\n"
)


def test_an_index_from_schema_2_migrates_and_keeps_working(tmp_path: Path) -> None:
    folder = tmp_path / "ix"
    with Index(folder, embedder=HashingEmbedder(64)) as ix:
        ix.add_documents({"memo": MEMO})
        before = [h.chunk_id for h in ix.search("NASA", top_k=3)]
    # Turn the catalog back into schema 2: drop what m003 and the later migrations added.
    db = sqlite3.connect(folder / "corpora" / "default" / "catalog.sqlite")
    db.executescript(
        "DROP TABLE chunk_terms; DROP TABLE llm_cache; ALTER TABLE chunks DROP COLUMN enrichment;"
        "ALTER TABLE chunks DROP COLUMN heading_trail; ALTER TABLE chunks DROP COLUMN table_header;"
        "DROP TABLE pending_vectors; DROP TABLE vector_identity;"
        "UPDATE meta SET value = '2' WHERE key = 'schema_version';"
    )
    db.close()
    with Index(folder, embedder=HashingEmbedder(64)) as ix:
        assert [h.chunk_id for h in ix.search("NASA", top_k=3)] == before
        assert set(agentic.enrichment(ix, before).values()) == {None}  # old chunks: none stored
        related = agentic.find_related(ix, before[0], same_document=True)  # extracted on the fly
        assert related is not None
        ix.add_documents({"memo2": MEMO + "\nMore."})
        assert agentic.filtered_search(ix, "NASA", entities=["NASA"])[0].doc_id == "memo2"
    db = sqlite3.connect(folder / "corpora" / "default" / "catalog.sqlite")
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(version[0]) == SCHEMA_VERSION == len(MIGRATIONS) >= 3
    db.close()


def test_terms_follow_their_chunks_out() -> None:
    with Index(embedder=HashingEmbedder(64)) as ix:
        ix.add_documents({"memo": MEMO})
        catalog = ix.store("default").catalog
        assert catalog.term_frequencies([("e", "nasa")]) == {("e", "nasa"): 1}
        ix.add_documents({"memo": MEMO.replace("NASA", "JAXA")})  # replaced
        assert catalog.term_frequencies([("e", "nasa"), ("e", "jaxa")]) == {
            ("e", "nasa"): 0,
            ("e", "jaxa"): 1,
        }
        ix.delete_document("memo")
        assert catalog.term_frequencies([("e", "jaxa")]) == {("e", "jaxa"): 0}


@pytest.mark.parametrize(
    ("where", "sections"),
    [
        ({"entities": "NASA"}, {"One"}),
        ({"entities": {"$contains": "Brasil"}}, {"Two"}),
        ({"entity_keys": {"$in": ["esa", "nasa"]}}, {"One", "Two"}),
        ({"entities": {"$ne": "NASA"}}, {"Memo", "Two", "Three"}),
        ({"dates": {"$gte": "2024", "$lte": "2024\uffff"}}, {"One"}),
        ({"dates": {"$exists": True}}, {"One", "Two"}),
        ({"dates": None}, {"Memo", "Three"}),
        ({"content_types": "table"}, {"Three"}),
        ({"keywords": {"$startswith": "maria"}}, {"One"}),
        ({"entities": {"$gt": 3}}, set()),
    ],
)
def test_where_filters_reach_the_enrichment_lists(
    where: dict[str, object], sections: set[str]
) -> None:
    with Index(embedder=HashingEmbedder(64)) as ix:
        ix.add_documents({"memo": MEMO})
        docs = ix.list_documents(where=where)
        assert bool(docs) == bool(sections)
        pks, _ = ix.store("default").catalog.filtered_slots(where, corpus="default")
        got = {ix.get_chunk(f"default:{pk}").heading_path[-1] for pk in pks.tolist()}
        assert got == sections


def test_bad_enrichment_filters_are_one_line_errors() -> None:
    for bad, message in (
        ({"entities": ["NASA"]}, "a list is not a valid value"),
        ({"dates": {"$near": "2020"}}, "unknown operator"),
        ({"keywords": {}}, "empty condition"),
        ({"entities": {"$in": "NASA"}}, "non-empty list"),
    ):
        with pytest.raises(InvalidFilterError, match=message):
            validate_where(bad)
    # an injection attempt is a literal value, never SQL
    validate_where({"entities": "x') OR 1=1 --"})
