"""Every filter operator gives the same chunks on every backend (SPEC §6.4).

Random filters over documents with varied metadata (numbers, floats, booleans, strings,
arrays, nested objects, nulls, missing keys), built-in fields and pages: the Qdrant backend
(translation to Qdrant filters plus the client-side step for what Qdrant cannot express)
and the PostgreSQL backend (the filter compiled to SQL over JSONB, on a real server) must
select exactly the chunks the embedded backend's SQL selects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guaipeca import Index, NewDocument
from guaipeca.errors import InvalidFilterError
from guaipeca.store import validate_where
from guaipeca.store.qdrant.filters import translate
from support.qdrant import open_index

OPS = (
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$contains",
    "$startswith",
    "$endswith",
)
FIELDS = (
    "n",
    "s",
    "tags",
    "nested.x",
    "flag",
    "doc_id",
    "source_path",
    "filename",
    "extension",
    "modified",
    "position",
    "page",
    "section_id",
    "heading_path",
    "corpus",
    "absent",
)
VALUES: tuple[Any, ...] = (
    0,
    1,
    2,
    2.5,
    3,
    -1,
    2.0,
    "a",
    "b",
    "ab",
    "",
    ".md",
    "d1",
    "x",
    True,
    False,
)
META_VALUES: tuple[Any, ...] = (
    *VALUES,
    None,
    [],
    ["a", "b"],
    [1, 2.5],
    [True],
    {"x": 1},
    "ab.md",
)


def _documents() -> list[NewDocument]:
    docs = []
    for i in range(24):
        meta: dict[str, Any] = {}
        if i % 5:
            meta["n"] = META_VALUES[i % len(META_VALUES)]
        meta["s"] = ["a", "ab", "b", "", "x.md"][i % 5]
        if i % 3 == 0:
            meta["tags"] = [["a", "b"], [1, 2.5], ["x", 2], [True, "a"]][i % 4]
        if i % 4 == 1:
            meta["nested"] = {"x": META_VALUES[(i * 7) % len(META_VALUES)]}
        if i % 6 == 2:
            meta["flag"] = i % 4 == 2
        text = f"# Doc {i}\n\n" + "\n\n".join(
            f"## Part {j}\n\nwords {i} {j} " * 3 for j in range(3)
        )
        paged = i % 4 == 0
        docs.append(
            NewDocument(
                f"d{i}",
                text,
                metadata=meta,
                source_path=None if i % 7 == 3 else f"folder/file{i}{['.md', '.pdf', ''][i % 3]}",
                modified=None if i % 5 == 4 else 1_700_000_000.5 + i,
                page_starts=(0, len(text) // 3, 2 * len(text) // 3) if paged else None,
            )
        )
    return docs


OTHERS = ("qdrant", "postgres")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, pg_primary: object) -> Any:
    folder: Path = tmp_path_factory.mktemp("filters")
    indexes = {b: open_index(b, folder) for b in ("embedded", *OTHERS)}
    for index in indexes.values():
        index.add_documents(_documents())
    yield indexes
    for index in indexes.values():
        index.close()


def _selected(index: Index, where: dict[str, Any]) -> list[str]:
    hits = index.search("words", mode="dense", top_k=1000, where=where)
    return sorted(h.chunk_id for h in hits)


OPERANDS = (*VALUES, None, None, None)  # null (and so missing keys) often
conditions = st.one_of(
    st.sampled_from(OPERANDS),
    st.builds(
        lambda op, v, many: {op: many if op in ("$in", "$nin") else v},
        st.sampled_from(OPS),
        st.sampled_from(OPERANDS),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=4),
    ),
)
clauses = st.dictionaries(st.sampled_from(FIELDS), conditions, min_size=1, max_size=2)
wheres = st.recursive(
    clauses,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=4,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=wheres)
def test_random_filters_select_the_same_chunks(
    both: dict[str, Index], where: dict[str, Any]
) -> None:
    try:
        validate_where(where)
    except InvalidFilterError:
        assume(False)
    want = _selected(both["embedded"], where)
    for other in OTHERS:
        assert _selected(both[other], where) == want, (other, where)


@pytest.mark.parametrize(
    ("where", "exact"),
    [
        ({"doc_id": "d1"}, True),
        ({"extension": {"$in": [".md", ".pdf"]}}, True),
        ({"modified": {"$gte": 1_700_000_010}}, True),
        ({"page": {"$gte": 2, "$lte": 3}}, True),
        ({"source_path": {"$exists": False}}, True),
        ({"$or": [{"position": 0}, {"section_id": {"$ne": "x"}}]}, True),
        ({"filename": {"$endswith": ".md"}}, False),
        ({"heading_path": {"$contains": "Part"}}, False),
        ({"n": 2}, False),
        ({"tags": {"$contains": "a"}}, False),
    ],
)
def test_which_filters_qdrant_runs_exactly(
    both: dict[str, Index], where: dict[str, Any], exact: bool
) -> None:
    assert translate(where, "default").exact is exact
    selected = _selected(both["qdrant"], where)
    assert selected == _selected(both["embedded"], where) == _selected(both["postgres"], where)
    assert selected  # each case selects something, so agreement is not vacuous


def test_filters_of_every_operator_select_something_somewhere(both: dict[str, Index]) -> None:
    for op in OPS:
        operand: Any = ["a", 2] if op in ("$in", "$nin") else (True if op == "$exists" else "a")
        where = {"s": {op: operand}}
        want = _selected(both["embedded"], where)
        for other in OTHERS:
            assert _selected(both[other], where) == want, (other, where)


@pytest.mark.slow
def test_every_field_operator_and_kind_of_operand(both: dict[str, Index]) -> None:
    """Exhaustive single conditions: every field x operator x kind of value."""
    operands: tuple[Any, ...] = (1, 2.5, "a", "", True, None)
    lists: tuple[list[Any], ...] = ([1, "a"], [2, True, "x.md"])
    checked = 0
    for field in FIELDS:
        for op in OPS:
            for operand in lists if op in ("$in", "$nin") else operands:
                where = {field: {op: operand}}
                try:
                    validate_where(where)
                except InvalidFilterError:
                    continue
                want = _selected(both["embedded"], where)
                for other in OTHERS:
                    assert _selected(both[other], where) == want, (other, where)
                checked += 1
    assert checked > 500
