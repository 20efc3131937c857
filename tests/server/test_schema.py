"""The MCP wire models are the records' fields under the same names, filled by name."""

import dataclasses

from guaipeca import Chunk, Hit, ScoreParts
from guaipeca.server.schema import ChunkOut, HitOut, ScoresOut, chunk_out, hit_out


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_wire_models_name_only_fields_of_their_records() -> None:
    assert set(ChunkOut.model_fields) == _names(Chunk)
    assert set(HitOut.model_fields) == _names(Hit)
    assert set(ScoresOut.model_fields) == _names(ScoreParts)


def test_records_become_wire_models_with_the_source_path_shown_to_clients() -> None:
    hit = Hit(
        chunk_id="docs:7",
        corpus="docs",
        doc_id="guide",
        source_path="/srv/docs/guide.md",
        start=0,
        end=5,
        text="hello",
        position=0,
        heading_path=("Guide",),
        heading_trail=("Guide",),
        section_id="s:1",
        page_start=None,
        page_end=None,
        score=0.25,
        scores=ScoreParts(dense=0.5, dense_rank=2),
        snippet="**hello**",
        highlights=((0, 5),),
        metadata={"k": 1},
    )
    out = hit_out(hit, "guide.md").model_dump()
    assert out["source_path"] == "guide.md" and out["heading_path"] == ["Guide"]
    assert out["highlights"] == [[0, 5]] and out["scores"]["dense_rank"] == 2
    assert {k: v for k, v in out.items() if k not in ("source_path", "scores", "explanation")} == {
        k: v
        for k, v in hit.to_dict().items()
        if k in HitOut.model_fields and k not in ("source_path", "scores")
    }
    assert list(chunk_out(hit, None).model_dump()) == list(ChunkOut.model_fields)
    assert chunk_out(hit, None).source_path is None
