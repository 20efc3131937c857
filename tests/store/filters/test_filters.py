"""Metadata filters (SPEC §6.4) against a real in-memory SQLite catalog.

Every result is checked against ``reference_match``, a plain-Python evaluator of the same
Mongo-like, type-strict rules; a hypothesis test drives random filters through both.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guaipeca.errors import InvalidFilterError
from guaipeca.store.filters import (
    BUILTIN_FIELDS,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_IN_VALUES,
    OPERATORS,
    compile_where,
    parse_where_json,
    validate_where,
)

CORPUS = "main"

SCHEMA = """
CREATE TABLE documents (
  doc_pk INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, source_path TEXT, filename TEXT,
  extension TEXT, modified REAL, text TEXT NOT NULL, text_sha256 TEXT NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{}', chunk_count INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE chunks (
  chunk_pk INTEGER PRIMARY KEY AUTOINCREMENT, doc_pk INTEGER NOT NULL REFERENCES documents(doc_pk),
  position INTEGER NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL,
  heading_path TEXT NOT NULL, section_id TEXT NOT NULL, page_start INTEGER, page_end INTEGER,
  slot INTEGER NOT NULL, embed_sha256 TEXT NOT NULL, heading_trail TEXT);
"""

# (doc_id, source_path, modified, metadata, chunks as (section_id, page_start, page_end))
DOCS: list[tuple[str, str | None, float | None, dict[str, Any], list[tuple[str, Any, Any]]]] = [
    (
        "a",
        "/docs/a.md",
        1_700_000_000.0,
        {
            "author": "Ana",
            "year": 2020,
            "score": 4.5,
            "draft": False,
            "tags": ["python", "sql"],
            "info": {"lang": "pt", "pages": 10},
        },
        [("intro", None, None), ("body", None, None)],
    ),
    (
        "b",
        "/docs/sub/b.pdf",
        1_700_000_500.5,
        {
            "author": "Bruno",
            "year": 2021,
            "score": 3,
            "draft": True,
            "tags": ["rust"],
            "x-y": "dash",
            "filename": "meta-shadow",
        },
        [("s1", 1, 1), ("s1", 1, 3), ("s2", 4, None)],
    ),
    ("c", None, None, {}, [("unstructured:c", None, None)]),
    (
        "d",
        "/docs/d.txt",
        1_600_000_000.0,
        {"author": None, "year": "2020", "score": 0.001, "tags": [], "info": {"lang": "en"}},
        [("s1", None, None)],
    ),
    (
        "e",
        "/docs/e.MD",
        1_650_000_000.0,
        {
            "author": "100%_sure",
            "year": 1999,
            "score": -2,
            "draft": 1,
            "tags": ["python", 1, True, 2.5, None, ["nested"]],
            "info": "flat",
        },
        [("s1", None, None), ("s2", None, None)],
    ),
    (
        "f",
        "/docs/f.pdf",
        1_700_000_000.0,
        {
            "author": "' OR '1'='1",
            "year": 2020.0,
            "score": 0,
            "draft": 0,
            "tags": "python, sql",
            "info": {"lang": "pt", "pages": 3.5},
        },
        [("s1", 2, 2), ("s2", 3, 5)],
    ),
    (
        "g",
        "/docs/g.md",
        1_690_000_000.0,
        {"author": "anã 🐍", "year": True, "tags": [False, 0], "info": {"lang": None}},
        [("s1", None, None)],
    ),
    (
        "h",
        "/docs/h.md",
        1_690_000_001.0,
        {"author": "", "score": 9_007_199_254_740_993, "tags": {"python": 1}},
        [("s1", None, None)],
    ),
    (
        "i",
        "/docs/i.pdf",
        1_710_000_000.0,
        {"author": "Ana", "year": 2022, "score": 4.5, "draft": False, "tags": ["sql", "python"]},
        [("s1", 10, 12), ("s2", 12, 12)],
    ),
    (
        "j",
        "/docs/j.htm",
        1_710_000_000.0,
        {"author": "ana", "year": -1, "score": 1.0, "info": {"lang": "pt", "pages": None}},
        [("s1", None, None)],
    ),
]


def _records() -> list[dict[str, Any]]:
    """One record per chunk, in insertion order: what the reference evaluator reads."""
    out: list[dict[str, Any]] = []
    for doc_pk, (doc_id, source_path, modified, metadata, chunks) in enumerate(DOCS, start=1):
        filename = None if source_path is None else source_path.rsplit("/", 1)[1]
        extension = None if filename is None else "." + filename.rsplit(".", 1)[1].lower()
        for position, (section_id, page_start, page_end) in enumerate(chunks):
            out.append(
                {
                    "doc_pk": doc_pk,
                    "doc_id": doc_id,
                    "source_path": source_path,
                    "filename": filename,
                    "extension": extension,
                    "modified": modified,
                    "section_id": section_id,
                    "heading_path": "[]",
                    "heading_trail": "[]",
                    "position": position,
                    "pages": (page_start, page_end),
                    "metadata": metadata,
                }
            )
    return out


def _build(con: sqlite3.Connection) -> dict[int, dict[str, Any]]:
    """Fill the catalog; return chunk_pk -> record."""
    con.executescript(SCHEMA)
    records: dict[int, dict[str, Any]] = {}
    for rec in _records():
        if rec["position"] == 0:
            con.execute(
                "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rec["doc_pk"],
                    rec["doc_id"],
                    rec["source_path"],
                    rec["filename"],
                    rec["extension"],
                    rec["modified"],
                    f"text of {rec['doc_id']}",
                    "0" * 64,
                    json.dumps(rec["metadata"], ensure_ascii=False, sort_keys=True),
                    len(DOCS[rec["doc_pk"] - 1][4]),
                    0.0,
                ),
            )
        page_start, page_end = rec["pages"]
        cur = con.execute(
            'INSERT INTO chunks (doc_pk, position, start, "end", heading_path, section_id, '
            "page_start, page_end, slot, embed_sha256, heading_trail) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                *(rec["doc_pk"], rec["position"], 0, 1, "[]", rec["section_id"]),
                *(page_start, page_end, 0, "0" * 64, "[]"),
            ),
        )
        assert cur.lastrowid is not None
        records[cur.lastrowid] = rec
    con.commit()
    return records


@pytest.fixture(scope="module")
def catalog() -> Iterator[tuple[sqlite3.Connection, dict[int, dict[str, Any]]]]:
    con = sqlite3.connect(":memory:")
    try:
        records = _build(con)
        yield con, records
    finally:
        con.close()


# --- the reference evaluator -----------------------------------------------------------------

MISSING = object()


def _lookup(record: Mapping[str, Any], field: str, corpus: str) -> Any:
    if field == "corpus":
        return corpus
    if field in BUILTIN_FIELDS:
        value = record[field]
        return MISSING if value is None else value  # a NULL column is an absent field
    current: Any = record["metadata"]
    for segment in field.split("."):
        if not isinstance(current, dict) or segment not in current:
            return MISSING
        current = current[segment]
    return current


def _kind(value: Any) -> str:
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "array"
    return "object"


def _equal(value: Any, operand: Any) -> bool:
    if operand is None:
        return value is MISSING or value is None
    return _kind(value) == _kind(operand) and bool(value == operand)


def _page_op(pages: tuple[Any, Any], op: str, operand: Any) -> bool:
    start, end = pages
    covered = [] if start is None else list(range(start, (start if end is None else end) + 1))
    numeric = _kind(operand) == "number"
    if op == "$eq":
        return not covered if operand is None else numeric and operand in covered
    if op == "$ne":
        return not _page_op(pages, "$eq", operand)
    if op == "$in":
        return any(_page_op(pages, "$eq", item) for item in operand)
    if op == "$nin":
        return not _page_op(pages, "$in", operand)
    if op == "$exists":
        return bool(covered) is operand
    if op == "$gt":
        return numeric and any(p > operand for p in covered)
    if op == "$gte":
        return numeric and any(p >= operand for p in covered)
    if op == "$lt":
        return numeric and any(p < operand for p in covered)
    if op == "$lte":
        return numeric and any(p <= operand for p in covered)
    return False  # string operators


def _op(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _equal(value, operand)
    if op == "$ne":
        return not _equal(value, operand)
    if op == "$in":
        return any(_equal(value, item) for item in operand)
    if op == "$nin":
        return not any(_equal(value, item) for item in operand)
    if op == "$exists":
        return (value is not MISSING) is operand
    same_kind = _kind(value) == _kind(operand) and _kind(value) in ("text", "number")
    if op == "$gt":
        return same_kind and value > operand
    if op == "$gte":
        return same_kind and value >= operand
    if op == "$lt":
        return same_kind and value < operand
    if op == "$lte":
        return same_kind and value <= operand
    if op == "$contains":
        if isinstance(value, list):
            return any(_kind(e) == _kind(operand) and e == operand for e in value)
        return isinstance(value, str) and isinstance(operand, str) and operand in value
    if op == "$startswith":
        return isinstance(value, str) and value.startswith(operand)
    if op == "$endswith":
        return isinstance(value, str) and value.endswith(operand)
    raise AssertionError(op)


def reference_match(record: Mapping[str, Any], where: Mapping[str, Any], corpus: str) -> bool:
    for key, condition in where.items():
        if key == "$and":
            ok = all(reference_match(record, w, corpus) for w in condition)
        elif key == "$or":
            ok = any(reference_match(record, w, corpus) for w in condition)
        else:
            ops = condition if isinstance(condition, dict) else {"$eq": condition}
            if key == "page":
                ok = all(_page_op(record["pages"], op, x) for op, x in ops.items())
            else:
                value = _lookup(record, key, corpus)
                ok = all(_op(value, op, x) for op, x in ops.items())
        if not ok:
            return False
    return True


def run(con: sqlite3.Connection, where: Mapping[str, Any] | None, corpus: str = CORPUS) -> set[int]:
    sql, params = compile_where(where, corpus=corpus)
    rows = con.execute(
        "SELECT c.chunk_pk, c.slot FROM chunks c JOIN documents d ON d.doc_pk = c.doc_pk "
        f"WHERE {sql}",
        params,
    ).fetchall()
    return {int(r[0]) for r in rows}


def expected(
    records: Mapping[int, Mapping[str, Any]], where: Mapping[str, Any], corpus: str = CORPUS
) -> set[int]:
    return {pk for pk, rec in records.items() if reference_match(rec, where, corpus)}


def docs(records: Mapping[int, Mapping[str, Any]], pks: set[int]) -> set[str]:
    return {str(records[pk]["doc_id"]) for pk in pks}


Catalog = tuple[sqlite3.Connection, dict[int, dict[str, Any]]]


# --- explicit semantics ----------------------------------------------------------------------

# (filter, the documents whose chunks all match it); each also checked against the reference.
SEMANTICS: list[tuple[dict[str, Any], set[str]]] = [
    ({"author": "Ana"}, {"a", "i"}),
    ({"author": {"$eq": "ana"}}, {"j"}),
    ({"author": None}, {"c", "d"}),  # null or absent
    ({"author": {"$ne": None}}, {"a", "b", "e", "f", "g", "h", "i", "j"}),
    ({"author": {"$exists": True}}, {"a", "b", "d", "e", "f", "g", "h", "i", "j"}),
    ({"author": {"$exists": False}}, {"c"}),
    ({"author": {"$ne": "Ana"}}, {"b", "c", "d", "e", "f", "g", "h", "j"}),  # missing matches
    ({"author": {"$nin": ["Ana", "ana"]}}, {"b", "c", "d", "e", "f", "g", "h"}),
    ({"author": {"$in": ["Ana", "Bruno", 1]}}, {"a", "b", "i"}),
    # booleans and numbers stay apart
    ({"draft": True}, {"b"}),
    ({"draft": False}, {"a", "i"}),
    ({"draft": 1}, {"e"}),
    ({"draft": 0}, {"f"}),
    ({"draft": {"$in": [False, 0]}}, {"a", "f", "i"}),
    ({"year": 2020}, {"a", "f"}),  # int and float, not the string "2020"
    ({"year": "2020"}, {"d"}),
    ({"year": {"$gt": 2020}}, {"b", "i"}),
    ({"year": {"$gt": "2000"}}, {"d"}),  # strings compare only with strings
    ({"year": {"$gte": 1999, "$lt": 2021}}, {"a", "e", "f"}),
    ({"score": {"$lte": 0}}, {"e", "f"}),
    ({"score": 9_007_199_254_740_993}, {"h"}),  # exact beyond 2**53
    ({"score": 9_007_199_254_740_992.0}, set()),
    # $contains: substring of a string, element of an array
    ({"tags": {"$contains": "python"}}, {"a", "e", "f", "i"}),
    ({"tags": {"$contains": "pyth"}}, {"f"}),
    ({"tags": {"$contains": 1}}, {"e"}),
    ({"tags": {"$contains": True}}, {"e"}),
    ({"tags": {"$contains": False}}, {"g"}),
    ({"tags": {"$contains": 0}}, {"g"}),
    ({"tags": {"$contains": 2.5}}, {"e"}),
    ({"tags": {"$eq": "python"}}, set()),  # an array never equals a scalar
    ({"author": {"$contains": "n"}}, {"a", "b", "g", "i", "j"}),
    ({"author": {"$contains": ""}}, {"a", "b", "e", "f", "g", "h", "i", "j"}),
    # LIKE wildcards are literal
    ({"author": {"$startswith": "100%"}}, {"e"}),
    ({"author": {"$startswith": "1_0"}}, set()),
    ({"author": {"$startswith": "%"}}, set()),
    ({"author": {"$endswith": "_sure"}}, {"e"}),
    ({"author": {"$endswith": "🐍"}}, {"g"}),
    ({"author": {"$endswith": "a"}}, {"a", "i", "j"}),
    ({"author": {"$endswith": ""}}, {"a", "b", "e", "f", "g", "h", "i", "j"}),
    ({"author": {"$startswith": "An", "$endswith": "a"}}, {"a", "i"}),
    # nested objects and odd names
    ({"info.lang": "pt"}, {"a", "f", "j"}),
    ({"info.lang": None}, {"b", "c", "e", "g", "h", "i"}),
    ({"info.pages": {"$gt": 3}}, {"a", "f"}),
    ({"info.lang.x": {"$exists": True}}, set()),
    ({"x-y": "dash"}, {"b"}),
    ({"filename": "meta-shadow"}, set()),  # built-in names win over metadata keys
    # built-in fields
    ({"filename": "a.md"}, {"a"}),
    ({"filename": None}, {"c"}),
    ({"extension": {"$in": [".md", ".pdf"]}}, {"a", "b", "e", "f", "g", "h", "i"}),
    ({"source_path": {"$startswith": "/docs/sub/"}}, {"b"}),
    ({"doc_id": {"$gte": "i"}}, {"i", "j"}),
    ({"modified": {"$gte": 1_700_000_000}}, {"a", "b", "f", "i", "j"}),
    ({"modified": {"$exists": False}}, {"c"}),
    ({"section_id": {"$startswith": "unstructured:"}}, {"c"}),
    ({"corpus": CORPUS}, {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}),
    ({"corpus": "other"}, set()),
    ({"corpus": {"$startswith": "ma", "$ne": "x"}, "author": "Ana"}, {"a", "i"}),
    # logic
    ({"$or": [{"author": "Ana"}, {"draft": True}]}, {"a", "b", "i"}),
    ({"$and": [{"author": "Ana"}, {"year": {"$lt": 2021}}]}, {"a"}),
    ({"$or": [{"$and": [{"year": 2020}, {"score": 0}]}, {"x-y": {"$exists": True}}]}, {"b", "f"}),
]


@pytest.mark.parametrize(("where", "doc_ids"), SEMANTICS, ids=[repr(w) for w, _ in SEMANTICS])
def test_filter_selects_the_documents_the_rules_say(
    catalog: Catalog, where: dict[str, Any], doc_ids: set[str]
) -> None:
    con, records = catalog
    got = run(con, where)
    assert got == expected(records, where)
    assert docs(records, got) == doc_ids


def _chunks(records: Mapping[int, Mapping[str, Any]], pks: set[int]) -> set[tuple[str, int]]:
    return {(str(records[pk]["doc_id"]), int(records[pk]["position"])) for pk in pks}


# b: [1], [1..3], [4]; f: [2], [3..5]; i: [10..12], [12]; the rest have no pages.
PAGES: list[tuple[dict[str, Any], set[tuple[str, int]]]] = [
    ({"page": 3}, {("b", 1), ("f", 1)}),
    ({"page": 3.0}, {("b", 1), ("f", 1)}),
    ({"page": 2.5}, set()),
    ({"page": "3"}, set()),
    ({"page": True}, set()),
    ({"page": 4}, {("b", 2), ("f", 1)}),
    ({"page": {"$gte": 5}}, {("f", 1), ("i", 0), ("i", 1)}),
    ({"page": {"$gt": 4.5}}, {("f", 1), ("i", 0), ("i", 1)}),
    ({"page": {"$lte": 1}}, {("b", 0), ("b", 1)}),
    ({"page": {"$gte": 3, "$lte": 4}}, {("b", 1), ("b", 2), ("f", 1)}),
    ({"page": {"$in": [2, 11, 99]}}, {("b", 1), ("f", 0), ("i", 0)}),
    (
        {"page": {"$exists": True}},
        {("b", 0), ("b", 1), ("b", 2), ("f", 0), ("f", 1)}
        | {
            ("i", 0),
            ("i", 1),
        },
    ),
    ({"page": {"$startswith": "1"}}, set()),
]


@pytest.mark.parametrize(("where", "chunks"), PAGES, ids=[repr(w) for w, _ in PAGES])
def test_page_conditions_match_any_page_of_the_chunk(
    catalog: Catalog, where: dict[str, Any], chunks: set[tuple[str, int]]
) -> None:
    con, records = catalog
    got = run(con, where)
    assert got == expected(records, where)
    assert _chunks(records, got) == chunks


def test_page_ne_and_nin_include_chunks_without_pages(catalog: Catalog) -> None:
    con, records = catalog
    got = run(con, {"page": {"$ne": 3}})
    assert ("a", 0) in _chunks(records, got)
    assert ("b", 1) not in _chunks(records, got)
    assert run(con, {"page": {"$nin": [3]}}) == got


def test_empty_or_none_filter_matches_everything(catalog: Catalog) -> None:
    con, records = catalog
    assert compile_where(None, corpus=CORPUS) == ("1", [])
    assert compile_where({}, corpus=CORPUS) == ("1", [])
    assert run(con, {}) == set(records)


def test_corpus_compiles_to_a_constant_with_no_parameters() -> None:
    assert compile_where({"corpus": "main"}, corpus="main") == ("1", [])
    assert compile_where({"corpus": "main"}, corpus="other") == ("0", [])
    assert compile_where({"corpus": {"$in": ["a", "b"]}}, corpus="b") == ("1", [])
    assert compile_where({"corpus": {"$exists": False}}, corpus="b") == ("0", [])


def test_compiled_sql_keeps_names_and_values_out_of_the_text() -> None:
    where = {
        "zzfield": {"$in": ["zzvalue1", 4242]},
        "zzother.zznested": {"$contains": "zzvalue2", "$startswith": "zzvalue3"},
        "$or": [{"filename": "zzvalue4"}, {"page": 4343}],
    }
    sql, params = compile_where(where, corpus="zzcorpus")
    for text in ("zzfield", "zzother", "zznested", "zzvalue", "4242", "4343", "zzcorpus"):
        assert text not in sql
    assert sql.count("?") == len(params)
    assert '$."zzother"."zznested"' in params
    assert "LIKE" not in sql.upper()


# --- random filters against the reference ----------------------------------------------------

FIELDS = [
    *BUILTIN_FIELDS,
    "corpus",
    "author",
    "year",
    "score",
    "draft",
    "tags",
    "info",
    "info.lang",
    "info.pages",
    "info.lang.deeper",
    "x-y",
    "missing",
    "tags.python",
]
DATA_TEXTS = [
    "Ana",
    "ana",
    "An",
    "na",
    "Bruno",
    "",
    "%",
    "_",
    "100%",
    "_sure",
    "' OR '1'='1",
    "anã 🐍",
    "🐍",
    "python",
    "py",
    "sql",
    "rust",
    "pt",
    "en",
    "dash",
    "flat",
    "2020",
    "main",
    "ma",
    "a.md",
    ".md",
    ".pdf",
    "/docs/",
    "/docs/sub/b.pdf",
    "s1",
    "s2",
    "intro",
    "unstructured:c",
    "meta-shadow",
    "a",
    "i",
]
DATA_NUMBERS: list[int | float] = [
    0,
    1,
    -1,
    2,
    3,
    4,
    5,
    10,
    12,
    1999,
    2020,
    2021,
    2022,
    0.001,
    1.0,
    2.5,
    3.5,
    4.5,
    -2,
    2020.0,
    1_700_000_000,
    1_700_000_500.5,
    9_007_199_254_740_993,
    9_007_199_254_740_992.0,
    2**63 - 1,
    -(2**63),
]


def _values_in_data(field: str) -> list[Any]:
    """Scalars ``field`` holds in the data, array elements, and pieces of its strings."""
    found: list[Any] = []
    for rec in _records():
        if field == "page":
            found.extend(p for p in rec["pages"] if p is not None)
            continue
        value = _lookup(rec, field, CORPUS)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                found.extend([item, item[:2], item[-2:]])
            elif item is not MISSING and not isinstance(item, dict | list):
                found.append(item)
    return found or ["none"]


# Values the field really holds come up most often, so that filters do select something.
texts = st.one_of(st.sampled_from(DATA_TEXTS), st.text(max_size=8))
numbers = st.one_of(
    st.sampled_from(DATA_NUMBERS),
    st.sampled_from(DATA_NUMBERS),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.one_of(texts, numbers, st.booleans())
FIELD_VALUES = {field: _values_in_data(field) for field in FIELDS}


def operand_for(op: str, field: str) -> st.SearchStrategy[Any]:
    known = st.sampled_from(FIELD_VALUES[field])
    known_texts = st.sampled_from([v for v in FIELD_VALUES[field] if isinstance(v, str)] or [""])
    likely = st.one_of(known, known, scalars)
    if op in ("$eq", "$ne"):
        return st.one_of(likely, likely, st.none())
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return st.one_of(likely, texts, numbers).filter(
            lambda v: v is not None and not isinstance(v, bool)
        )
    if op in ("$in", "$nin"):
        return st.lists(likely.filter(lambda v: v is not None), min_size=1, max_size=5)
    if op == "$exists":
        return st.booleans()
    if op == "$contains":
        return likely.filter(lambda v: v is not None)
    return st.one_of(known_texts, known_texts, texts)


@st.composite
def conditions(draw: st.DrawFn, field: str) -> Any:
    if draw(st.integers(0, 2)) == 0:
        return draw(operand_for("$eq", field))
    ops = draw(st.lists(st.sampled_from(OPERATORS), min_size=1, max_size=2, unique=True))
    return {op: draw(operand_for(op, field)) for op in ops}


@st.composite
def filters(draw: st.DrawFn, depth: int = 1) -> dict[str, Any]:
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=2, unique=True))
    where: dict[str, Any] = {field: draw(conditions(field)) for field in fields}
    if depth < 3:
        for key in ("$and", "$or"):
            if draw(st.integers(0, 5)) == 0:
                where[key] = draw(st.lists(filters(depth + 1), min_size=1, max_size=3))
    return where


@st.composite
def single_conditions(draw: st.DrawFn) -> dict[str, Any]:
    field = draw(st.sampled_from(FIELDS))
    op = draw(st.sampled_from(OPERATORS))
    return {field: {op: draw(operand_for(op, field))}}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=single_conditions())
def test_random_single_conditions_match_the_reference_evaluator(
    catalog: Catalog, where: dict[str, Any]
) -> None:
    con, records = catalog
    assert run(con, where) == expected(records, where)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=filters(), corpus=st.sampled_from([CORPUS, "other", "ma"]))
def test_random_filters_match_the_reference_evaluator(
    catalog: Catalog, where: dict[str, Any], corpus: str
) -> None:
    con, records = catalog
    assert run(con, where, corpus) == expected(records, where, corpus)


json_like = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=6),
        st.sampled_from([*OPERATORS, "$and", "$or", "$not", *FIELDS]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from([*OPERATORS, "$and", "$or", *FIELDS]), st.text(max_size=6)),
            children,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.dictionaries(st.sampled_from([*FIELDS, "$and", "$or"]), json_like, max_size=4))
def test_any_input_is_refused_cleanly_or_runs(catalog: Catalog, where: dict[str, Any]) -> None:
    con, _ = catalog
    try:
        run(con, where)
    except InvalidFilterError as exc:
        message = str(exc)
        assert "\n" not in message
        assert len(message) < 400


# --- SQL injection ---------------------------------------------------------------------------

BAD_NAMES = [
    "x'); DROP TABLE documents;--",
    'a" OR 1=1 --',
    'author" OR 1=1 --',
    "author')) OR 1=1 --",
    '$."author"',
    "author[0]",
    "a..b",
    ".a",
    "a.",
    "1abc",
    "-a",
    "a b",
    "author\n",
    "a\x00b",
    "añ",
    "",
    "a" * 65,
    ".".join(["a"] * 9),
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_injected_field_names_are_refused(catalog: Catalog, name: str) -> None:
    con, records = catalog
    refused = "invalid field name|unknown operator"  # names starting with $ are operators
    with pytest.raises(InvalidFilterError, match=refused):
        run(con, {name: 1})
    with pytest.raises(InvalidFilterError, match=refused):
        run(con, {"$or": [{"author": "Ana"}, {name: {"$exists": True}}]})
    assert con.execute("SELECT count(*) FROM documents").fetchone() == (len(DOCS),)
    assert con.execute("SELECT count(*) FROM chunks").fetchone() == (len(records),)


BAD_VALUES = [
    "' OR '1'='1",
    "'; DROP TABLE documents; --",
    '"); DROP TABLE chunks; --',
    "*/ OR 1=1 /*",
    "%",
    "_",
    "\\",
    '$."author"',
    "a\x00b",
]


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("field", ["author", "filename", "corpus", "page", "info.lang"])
@pytest.mark.parametrize(
    "op", ["$eq", "$ne", "$gt", "$in", "$nin", "$contains", "$startswith", "$endswith"]
)
def test_injected_values_are_literal(catalog: Catalog, field: str, op: str, value: str) -> None:
    con, records = catalog
    where = {field: {op: [value] if op in ("$in", "$nin") else value}}
    assert run(con, where) == expected(records, where)
    assert con.execute("SELECT count(*) FROM documents").fetchone() == (len(DOCS),)
    assert con.execute("SELECT count(*) FROM chunks").fetchone() == (len(records),)


def test_the_injection_string_stored_as_metadata_matches_only_itself(catalog: Catalog) -> None:
    con, records = catalog
    assert docs(records, run(con, {"author": "' OR '1'='1"})) == {"f"}


def test_injected_operators_and_corpus_are_harmless(catalog: Catalog) -> None:
    con, records = catalog
    with pytest.raises(InvalidFilterError, match="unknown operator"):
        run(con, {"author": {"$eq' OR 1=1 --": "x"}})
    with pytest.raises(InvalidFilterError, match="unknown operator"):
        run(con, {"$or' OR 1=1": [{"author": "x"}]})
    assert run(con, {"corpus": "x' OR 1=1 --"}, corpus="x' OR 1=1 --") == set(records)
    assert run(con, {"corpus": "main"}, corpus="x' OR 1=1 --") == set()


# --- errors ----------------------------------------------------------------------------------


def _error(where: Any) -> str:
    with pytest.raises(InvalidFilterError) as info:
        compile_where(where, corpus=CORPUS)
    message = str(info.value)
    assert "\n" not in message
    with pytest.raises(InvalidFilterError) as again:
        validate_where(where)
    assert str(again.value) == message
    return message


def test_unknown_operator_is_named_and_the_valid_ones_listed() -> None:
    message = _error({"title": {"$regex": "^a"}})
    assert "'$regex'" in message
    assert "'title'" in message
    for op in OPERATORS:
        assert op in message


def test_unknown_top_level_operator_is_named() -> None:
    message = _error({"$not": {"author": "Ana"}})
    assert "'$not'" in message
    assert "$and" in message
    assert "$or" in message


def test_bad_field_name_is_named() -> None:
    message = _error({"bad name": 1})
    assert "'bad name'" in message
    assert "invalid field name" in message


def test_in_needs_a_non_empty_list() -> None:
    assert "$in expects a non-empty list" in _error({"tags": {"$in": "python"}})
    assert "$nin expects a non-empty list" in _error({"tags": {"$nin": []}})
    assert "at most 1000" in _error({"tags": {"$in": list(range(MAX_IN_VALUES + 1))}})
    assert "null is not allowed" in _error({"tags": {"$in": ["a", None]}})
    assert "$in" in _error({"tags": {"$in": [["nested"]]}})


def _nested(levels: int) -> dict[str, Any]:
    where: dict[str, Any] = {"author": "Ana"}
    for _ in range(levels - 1):
        where = {"$and": [where]}
    return where


def test_too_deep_nesting_is_refused(catalog: Catalog) -> None:
    con, records = catalog
    assert run(con, _nested(MAX_DEPTH)) == expected(records, {"author": "Ana"})
    message = _error(_nested(MAX_DEPTH + 1))
    assert "nested too deeply" in message


def test_too_many_conditions_are_refused(catalog: Catalog) -> None:
    con, _ = catalog
    fine = {"$or": [{"year": 1900 + n} for n in range(MAX_CONDITIONS)]}
    assert run(con, fine)
    assert "too many conditions" in _error(
        {"$or": [{"year": n} for n in range(MAX_CONDITIONS + 1)]}
    )
    assert "too many conditions" in _error(
        {"year": {"$ne": 1}, "$or": [{"year": n} for n in range(MAX_CONDITIONS)]}
    )


def test_largest_allowed_filter_runs(catalog: Catalog) -> None:
    """Ten lists of 1000 values and a deep OR stay within SQLite's own limits."""
    con, _ = catalog
    where = {
        "$or": [{f"k{i}": {"$in": [*range(MAX_IN_VALUES - 2), "a", True]}} for i in range(10)]
        + [{"page": {"$in": list(range(MAX_IN_VALUES))}}]
    }
    assert "too many" in _error(where)  # 11,000 values in all
    where["$or"] = where["$or"][1:]
    assert run(con, where)


@pytest.mark.parametrize(
    ("where", "fragment"),
    [
        ({"year": {"$gt": True}}, "$gt expects a number or a string, got a boolean"),
        ({"year": {"$gt": None}}, "$gt expects a number or a string, got null"),
        ({"year": {"$exists": "yes"}}, "$exists expects true or false"),
        ({"year": {"$startswith": 1}}, "$startswith expects a string, got a number"),
        ({"year": {"$contains": None}}, "$contains expects a string, number or boolean"),
        ({"year": float("nan")}, "finite number"),
        ({"year": float("inf")}, "finite number"),
        ({"year": 2**63}, "64-bit"),
        ({"year": "\ud800"}, "not valid Unicode"),
        ({"year": [2020, 2021]}, "use $in"),
        ({"info": {"lang": "pt"}}, "dotted name"),
        ({"info": {}}, "empty condition"),
        ({"$and": []}, "$and expects a non-empty list"),
        ({"$or": {"author": "Ana"}}, "$or expects a non-empty list"),
        ({"$or": [{}]}, "non-empty objects"),
        ({"$and": ["author"]}, "expected an object"),
        ({1: "x"}, "field names must be strings"),
        (["author"], "expected an object"),
    ],
)
def test_bad_values_get_one_line_errors(where: Any, fragment: str) -> None:
    assert fragment in _error(where)


def test_errors_never_echo_long_input() -> None:
    long_name = "x" * 10_000
    for where in (
        {long_name: 1},
        {"author": {long_name: 1}},
        {"author": {"$gt": [long_name]}},
        {"$" + long_name: 1},
        {"\x00" * 500: 1},
        {"\U0010ffff" * 500: 1},
        {"author": {"$in": "\x01" * 500}},
    ):
        message = _error(where)
        assert "x" * 100 not in message
        assert len(message) < 300


# --- JSON input ------------------------------------------------------------------------------


def test_parse_where_json_returns_the_object() -> None:
    assert parse_where_json('{"author": "Ana", "page": {"$gte": 3}}') == {
        "author": "Ana",
        "page": {"$gte": 3},
    }


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"author": ', "invalid JSON"),
        ("author = 'Ana'", "invalid JSON"),
        ("", "invalid JSON"),
        ('["author"]', "expected a JSON object"),
        ('"author"', "expected a JSON object"),
        ("null", "expected a JSON object"),
        ('{"a": 1, "a": 2}', "appears twice"),
        ('{"a": NaN}', "NaN is not a valid JSON value"),
        ('{"a": {"$gt": -Infinity}}', "Infinity is not a valid JSON value"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' + "9" * 5000 + "}", "invalid JSON"),
        ('{"a": {"$regex": "x"}}', "unknown operator"),
    ],
)
def test_parse_where_json_errors_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(InvalidFilterError) as info:
        parse_where_json(text)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert len(message) < 400
