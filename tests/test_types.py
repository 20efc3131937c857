"""The chunk records: one set of shared fields, and the public shapes of Chunk and Hit."""

import dataclasses

import pytest

from guaipeca import Chunk, Hit, ScoreParts
from guaipeca.store import ChunkRow
from guaipeca.types import ChunkLocation, ChunkSpan, location_of

LOCATION = {
    "start",
    "end",
    "text",
    "position",
    "heading_path",
    "section_id",
    "page_start",
    "page_end",
    "heading_trail",
    "table_header",
}


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _hit(**changes: object) -> Hit:
    fields: dict[str, object] = {
        "chunk_id": "docs:7",
        "corpus": "docs",
        "doc_id": "guide",
        "source_path": "/docs/guide.md",
        "start": 9,
        "end": 14,
        "text": "hello",
        "position": 1,
        "heading_path": ("Guide", "Install"),
        "section_id": "s:1",
        "page_start": 1,
        "page_end": 2,
        "score": 0.5,
        "scores": ScoreParts(lexical=1.5, lexical_rank=1),
        "snippet": "**hello**",
        "highlights": ((0, 5),),
        "metadata": {"lang": "en"},
    }
    return Hit(**{**fields, **changes})  # type: ignore[arg-type]


def test_every_chunk_record_shares_the_location_fields() -> None:
    assert _names(ChunkLocation) == LOCATION
    for cls in (ChunkSpan, Chunk, Hit, ChunkRow):
        assert issubclass(cls, ChunkLocation) and _names(cls) >= LOCATION
    assert issubclass(Hit, Chunk)


def test_chunk_and_hit_keep_their_public_fields() -> None:
    chunk = {"chunk_id", "corpus", "doc_id", "source_path", "metadata", "ocr"} | LOCATION
    assert _names(Chunk) == chunk
    assert _names(Hit) == chunk | {
        "score",
        "scores",
        "snippet",
        "highlights",
        "embedded",
        "rerank_error",
        "truncated",
        "explanation",
    }


def test_hit_to_dict_keeps_its_keys_in_order() -> None:
    d = _hit().to_dict()
    assert list(d) == [
        "chunk_id",
        "corpus",
        "doc_id",
        "source_path",
        "heading_path",
        "heading_trail",
        "section_id",
        "table_header",
        "ocr",
        "page_start",
        "page_end",
        "start",
        "end",
        "position",
        "score",
        "scores",
        "snippet",
        "highlights",
        "text",
        "metadata",
        "embedded",
        "rerank_error",
        "truncated",
    ]
    assert d["heading_path"] == ["Guide", "Install"] and d["highlights"] == [[0, 5]]
    assert d["scores"] == {
        "dense": None,
        "lexical": 1.5,
        "dense_rank": None,
        "lexical_rank": 1,
        "rerank": None,
    }
    assert (d["embedded"], d["ocr"], d["truncated"], d["rerank_error"]) == (
        True,
        False,
        False,
        None,
    )


def test_a_span_is_checked_but_a_stored_chunk_is_taken_as_read() -> None:
    with pytest.raises(ValueError, match="bad span"):
        ChunkSpan(start=5, end=2, text="", position=0, heading_path=(), section_id="s")
    with pytest.raises(ValueError, match="does not match"):
        ChunkSpan(start=0, end=3, text="ab", position=0, heading_path=(), section_id="s")
    # A widened hit whose document vanished meanwhile keeps its text: no check on reads.
    assert _hit(end=40).text == "hello"


def test_location_of_copies_the_shared_fields_into_another_record() -> None:
    hit = _hit(heading_trail=("Guide", "Install", "Linux"), table_header="| a |")
    span = ChunkSpan(**location_of(hit))
    assert location_of(span) == location_of(hit)
    assert span.heading_trail == ("Guide", "Install", "Linux") and span.table_header == "| a |"
    assert set(location_of(hit)) == LOCATION
