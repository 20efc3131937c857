"""Metadata filters (SPEC §6.4): a Mongo-style ``where`` mapping compiled to parameterised SQL.

The compiled expression runs against ``chunks c JOIN documents d ON d.doc_pk = c.doc_pk``.
Field names are checked against a fixed list or a strict pattern and never reach the SQL text
(metadata paths are bound parameters too); every value is a bound parameter. A filter can
therefore never inject SQL.

Shape
    A filter is a mapping of field -> condition, AND-ed, plus ``$and`` / ``$or`` whose values
    are non-empty lists of such mappings (at most :data:`MAX_DEPTH` levels, at most
    :data:`MAX_CONDITIONS` conditions in all). A condition is a bare value (``$eq``) or a
    mapping of operators, AND-ed: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $contains
    $startswith $endswith``. ``$in`` / ``$nin`` lists hold 1 to :data:`MAX_IN_VALUES` values
    (:data:`MAX_TOTAL_VALUES` in the whole filter). ``d.metadata`` must be valid JSON, as the
    catalog writes it.

Fields
    Built-in: ``corpus`` (the index's corpus, a string), ``doc_id``, ``source_path``,
    ``filename``, ``extension``, ``section_id`` (strings), ``modified`` (the file's mtime in
    seconds since the epoch), ``position`` (numbers) and ``page`` (see below). Any other
    name is a key of the document's JSON metadata: ``[A-Za-z_][A-Za-z0-9_-]{0,63}``, with
    ``a.b`` reaching into nested objects.
    A built-in name always means the built-in field, even when the metadata has that key.
    Chunk enrichment (SPEC §8) adds the list fields of :data:`ENRICHMENT_FIELDS`
    (``keywords``, ``entities``, ``entity_keys``, ``dates``, ``content_types``), read from
    ``c.enrichment``; their semantics are in the comment on that constant.

Values and types (type-strict)
    Values are strings, numbers (int or finite float; ``1 == 1.0``) and booleans, which stay
    distinct from numbers (``true`` never equals ``1``). ``None`` is allowed only with
    ``$eq`` / ``$ne``: ``{"x": None}`` matches when ``x`` is null *or absent*. A condition
    only matches a value of its own kind: ``{"n": {"$gt": 3}}`` never matches ``"10"``, and
    ``{"n": "3"}`` never matches ``3``. Strings compare by code point (SQLite BINARY).

    - ``$eq``, ``$in`` and the order operators look at the field's value itself: an array
      or object never equals a scalar. Use ``$contains`` to look inside arrays.
    - ``$ne`` is ``NOT $eq`` and ``$nin`` is ``NOT $in``: a missing field matches them
      (as in MongoDB), and so does a value of another kind.
    - ``$exists: true`` matches a present metadata key even when its value is null; a
      built-in field exists when it is not NULL.
    - ``$contains``: on a string, a case-sensitive substring test; on an array, "has an
      element equal to the value" (same kind rules; numbers and booleans only match array
      elements). ``$startswith`` / ``$endswith`` take strings; ``%`` and ``_`` are literal.

Page
    A chunk covers the pages ``page_start..page_end`` (``page_end`` NULL means one page;
    ``page_start`` NULL means no page information). A page condition matches when *any*
    page of the chunk satisfies it: ``{"page": 3}`` is ``page_start <= 3 <= page_end``,
    ``$gt``/``$gte`` compare ``page_end``, ``$lt``/``$lte`` compare ``page_start`` (so
    ``{"$gte": 3, "$lte": 5}`` means "overlaps pages 3..5"), ``$in`` is any listed page.
    ``$exists`` (and ``{"page": None}``, negated) test ``page_start IS NOT NULL``. Strings,
    booleans and the string operators never match a page.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from guaipeca.errors import InvalidFilterError

__all__ = [
    "BUILTIN_FIELDS",
    "CORPUS_FIELD",
    "ENRICHMENT_FIELDS",
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "MAX_IN_VALUES",
    "MAX_TOTAL_VALUES",
    "OPERATORS",
    "compile_where",
    "normalise_where",
    "parse_where_json",
    "validate_where",
]

#: Built-in field -> the SQL it reads (``page`` also reads ``c.page_end``; see the module doc).
BUILTIN_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "doc_id": "d.doc_id",
        "source_path": "d.source_path",
        "filename": "d.filename",
        "extension": "d.extension",
        "modified": "d.modified",
        "page": "c.page_start",
        "section_id": "c.section_id",
        # The heading path as stored: JSON text such as '["Guide", "Install"]'.
        "heading_path": "c.heading_path",
        "position": "c.position",
    }
)
#: Chunk enrichment lists (SPEC §8): JSON arrays of strings in ``c.enrichment``. A condition
#: on one of them matches when one element satisfies all its operators (``$eq``/``$in``: an
#: element equal to; ``$contains``: an element containing the substring; order operators
#: compare the element); ``$ne``/``$nin`` mean "no element equals"; ``$exists`` (and
#: ``{field: None}``, negated) test for at least one element.
ENRICHMENT_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "keywords": "$.keywords",
        "entities": "$.entities",
        "entity_keys": "$.entity_keys",
        "dates": "$.dates",
        "content_types": "$.content_types",
    }
)
#: The corpus is one per index, so it is compared in Python and compiled to a constant.
CORPUS_FIELD: Final = "corpus"

OPERATORS: Final = (
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
MAX_DEPTH: Final = 8  # levels of mappings, the top level being 1
MAX_CONDITIONS: Final = 256  # field/operator pairs in the whole filter
MAX_IN_VALUES: Final = 1000  # values in one $in / $nin list
# Values in all $in / $nin lists together: keeps the statement well under SQLite's limit of
# 32,766 bound parameters.
MAX_TOTAL_VALUES: Final = 10_000

_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")
_MAX_SEGMENTS: Final = 8
_LOGICAL = ("$and", "$or")
_ORDER_SQL: Final = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_INT64 = (-(2**63), 2**63 - 1)
_SHOW_CHARS = 60

Scalar = str | int | float | bool


# --- SQL fragments ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sql:
    """A piece of SQL and its parameters, in the order their ``?`` appear in the text."""

    text: str
    params: tuple[Any, ...] = ()


_TRUE = _Sql("1")
_FALSE = _Sql("0")


def _f(template: str, *args: _Sql | Scalar) -> _Sql:
    """Fill each ``{}`` of ``template``: a fragment is inlined, anything else becomes a ``?``.

    Building every piece through here keeps text and parameters in step by construction.
    """
    pieces = template.split("{}")
    if len(pieces) != len(args) + 1:
        raise AssertionError(f"template {template!r} wants {len(pieces) - 1} arguments")
    text = [pieces[0]]
    params: list[Any] = []
    for arg, piece in zip(args, pieces[1:], strict=True):
        if isinstance(arg, _Sql):
            text.append(arg.text)
            params.extend(arg.params)
        else:
            text.append("?")
            params.append(arg)
        text.append(piece)
    return _Sql("".join(text), tuple(params))


def _combine(keyword: str, parts: list[_Sql]) -> _Sql:
    """AND/OR as a balanced tree, so 1000 terms nest ~10 deep (SQLite caps depth at 1000)."""
    if len(parts) == 1:
        return parts[0]
    mid = len(parts) // 2
    left, right = _combine(keyword, parts[:mid]), _combine(keyword, parts[mid:])
    return _f(f"({{}}) {keyword} ({{}})", left, right)


def _and(*parts: _Sql) -> _Sql:
    if _FALSE in parts:
        return _FALSE
    kept = [p for p in parts if p != _TRUE]
    return _combine("AND", kept) if kept else _TRUE


def _or(*parts: _Sql) -> _Sql:
    if _TRUE in parts:
        return _TRUE
    kept = [p for p in parts if p != _FALSE]
    return _combine("OR", kept) if kept else _FALSE


def _not(part: _Sql) -> _Sql:
    # Every fragment built here is 0 or 1, never NULL, so NOT is a true complement.
    if part == _TRUE:
        return _FALSE
    if part == _FALSE:
        return _TRUE
    return _f("NOT ({})", part)


# --- fields ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    """How to read one field in SQL.

    ``kind`` is an expression giving the value's type with the names of SQLite's
    ``json_type``, which ``typeof`` shares for columns: 'null', 'integer', 'real', 'text',
    and for metadata also 'true', 'false', 'array', 'object', or NULL when the key is absent.
    """

    value: _Sql
    kind: _Sql
    exists: _Sql
    json_path: str | None = None  # set for metadata: lets $contains look inside arrays

    def is_text(self) -> _Sql:
        return _f("{} IS 'text'", self.kind)

    def is_number(self) -> _Sql:
        return _f("COALESCE({}, '') IN ('integer', 'real')", self.kind)

    def is_bool(self, flag: bool) -> _Sql:
        return _f("{} IS 'true'" if flag else "{} IS 'false'", self.kind)

    def absent(self) -> _Sql:
        """Null or missing: what ``{"x": None}`` matches."""
        return (
            _not(self.exists)
            if self.json_path is None
            else _f("COALESCE({}, 'null') = 'null'", self.kind)
        )


def _column(expr: str) -> _Field:
    return _Field(
        value=_Sql(expr), kind=_Sql(f"typeof({expr})"), exists=_Sql(f"{expr} IS NOT NULL")
    )


def _metadata(path: str) -> _Field:
    return _Field(
        value=_f("json_extract(d.metadata, {})", path),
        kind=_f("json_type(d.metadata, {})", path),
        exists=_f("json_type(d.metadata, {}) IS NOT NULL", path),
        json_path=path,
    )


_PAGE_LO = "c.page_start"
_PAGE_HI = "COALESCE(c.page_end, c.page_start)"
_HAS_PAGES = _Sql("c.page_start IS NOT NULL")


# --- messages --------------------------------------------------------------------------------


def _show(value: object) -> str:
    """A short, one-line rendering of user input for error messages."""
    if isinstance(value, str):
        # Cut the repr, not the string: escapes (\x00, \U0010ffff) can be 10 characters each.
        shown = repr(value[: _SHOW_CHARS * 2])
        if len(value) > _SHOW_CHARS * 2 or len(shown) > _SHOW_CHARS + 2:
            shown = shown[:_SHOW_CHARS] + "…" + shown[-1]
        return shown
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**20 else "a very large integer"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _kind_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return _show(value)


def _where(field: str, op: str) -> str:
    return f"filter field {_show(field)}: {op}"


# --- the compiler ----------------------------------------------------------------------------


class _Compiler:
    def __init__(self, corpus: str) -> None:
        self.corpus = corpus
        self.conditions = 0
        self.values = 0

    def clause(self, where: object, depth: int) -> _Sql:
        if not isinstance(where, Mapping):
            raise InvalidFilterError(
                f"filter: expected an object of field -> condition, got {_show(where)}"
            )
        parts: list[_Sql] = []
        for key, condition in where.items():
            if not isinstance(key, str):
                raise InvalidFilterError(f"filter: field names must be strings, got {_show(key)}")
            if key in _LOGICAL:
                parts.append(self.logical(key, condition, depth))
            elif key.startswith("$"):
                raise InvalidFilterError(
                    f"filter: unknown operator {_show(key)} where a field is expected; "
                    "use a field name, $and or $or"
                )
            else:
                parts.append(self.field(key, condition))
        return _and(*parts)

    def logical(self, key: str, items: object, depth: int) -> _Sql:
        if not isinstance(items, list | tuple) or not items:
            raise InvalidFilterError(
                f"filter: {key} expects a non-empty list of objects, got {_show(items)}"
            )
        if depth >= MAX_DEPTH:
            raise InvalidFilterError(
                f"filter: nested too deeply ({key} inside more than {MAX_DEPTH - 1} "
                "levels of $and/$or); flatten it"
            )
        parts: list[_Sql] = []
        for item in items:
            if isinstance(item, Mapping) and not item:
                raise InvalidFilterError(f"filter: {key} items must be non-empty objects")
            parts.append(self.clause(item, depth + 1))
        return _and(*parts) if key == "$and" else _or(*parts)

    def count(self) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise InvalidFilterError(
                f"filter: too many conditions (more than {MAX_CONDITIONS}); simplify it"
            )

    def field(self, name: str, condition: object) -> _Sql:
        _check_field_name(name)
        if name in ENRICHMENT_FIELDS:
            return self.element_field(name, condition)
        if isinstance(condition, list | tuple):
            raise InvalidFilterError(
                f"filter field {_show(name)}: a list is not a valid value; use $in for "
                "any of several values or $contains for an array element"
            )
        if not isinstance(condition, Mapping):
            self.count()
            return self.operator(name, "$eq", condition)
        if not condition:
            raise InvalidFilterError(
                f"filter field {_show(name)}: empty condition; give a value or operators "
                "such as $eq"
            )
        if not any(isinstance(k, str) and k.startswith("$") for k in condition):
            raise InvalidFilterError(
                f"filter field {_show(name)}: an object is not a valid value; use operators "
                "such as $eq, or a dotted name like 'field.key' for nested metadata"
            )
        parts: list[_Sql] = []
        for op, operand in condition.items():
            if op not in OPERATORS:
                raise InvalidFilterError(
                    f"filter field {_show(name)}: unknown operator {_show(op)}; valid "
                    f"operators: {', '.join(OPERATORS)}"
                )
            self.count()
            parts.append(self.operator(name, op, operand))
        return _and(*parts)

    def element_field(self, name: str, condition: object) -> _Sql:
        """A condition on an enrichment list: the positive operators must hold for one element."""
        if not isinstance(condition, Mapping):
            if isinstance(condition, list | tuple):
                raise InvalidFilterError(
                    f"filter field {_show(name)}: a list is not a valid value; use $in"
                )
            condition = {"$eq": condition}
        if not condition or not all(isinstance(k, str) and k in OPERATORS for k in condition):
            bad = next((k for k in condition if k not in OPERATORS), None)
            raise InvalidFilterError(
                f"filter field {_show(name)}: unknown operator {_show(bad)}; valid "
                f"operators: {', '.join(OPERATORS)}"
                if bad is not None
                else f"filter field {_show(name)}: empty condition"
            )
        path = ENRICHMENT_FIELDS[name]
        element = _Field(value=_Sql("ee.value"), kind=_Sql("ee.type"), exists=_TRUE)

        def some(cond: _Sql) -> _Sql:
            if cond == _FALSE:
                return _FALSE
            return _f(
                "EXISTS (SELECT 1 FROM json_each(c.enrichment, {}) AS ee "
                "WHERE ee.type = 'text' AND {})",
                path,
                cond,
            )

        positive: list[_Sql] = []
        parts: list[_Sql] = []
        for op, operand in condition.items():
            self.count()
            checked = _check_operand(name, op, operand)
            if isinstance(checked, list):
                self.values += len(checked)
                if self.values > MAX_TOTAL_VALUES:
                    raise InvalidFilterError(
                        f"filter: too many $in/$nin values in all (more than {MAX_TOTAL_VALUES})"
                    )
            if op == "$exists" or checked is None:
                present = checked if op == "$exists" else op == "$ne"
                parts.append(some(_TRUE) if present else _not(some(_TRUE)))
            elif op in ("$ne", "$nin"):
                same = _generic(element, "$eq" if op == "$ne" else "$in", checked)
                parts.append(_not(some(same)))
            else:  # $contains: a substring of the element (elements are strings)
                positive.append(_generic(element, op, checked))
        if positive:
            parts.append(some(_and(*positive)))
        return _and(*parts)

    def operator(self, name: str, op: str, operand: object) -> _Sql:
        checked = _check_operand(name, op, operand)
        if isinstance(checked, list):
            self.values += len(checked)
            if self.values > MAX_TOTAL_VALUES:
                raise InvalidFilterError(
                    f"filter: too many $in/$nin values in all (more than {MAX_TOTAL_VALUES})"
                )
        if name == CORPUS_FIELD:
            return _TRUE if _match_present(self.corpus, op, checked) else _FALSE
        if name == "page":
            return _page(op, checked)
        expr = BUILTIN_FIELDS.get(name)
        field = _column(expr) if expr is not None else _metadata(_json_path(name))
        return _generic(field, op, checked)


def _check_field_name(name: str) -> None:
    if name in BUILTIN_FIELDS or name in ENRICHMENT_FIELDS or name == CORPUS_FIELD:
        return
    segments = name.split(".")
    if len(segments) > _MAX_SEGMENTS or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidFilterError(
            f"filter: invalid field name {_show(name)}; a metadata key is 1-64 letters, "
            "digits, '_' or '-', not starting with a digit or '-', and nested keys are "
            f"joined with '.' (at most {_MAX_SEGMENTS})"
        )


def _json_path(name: str) -> str:
    # Safe to quote: each segment matched _SEGMENT, which admits no quote or backslash.
    return "$." + ".".join(f'"{segment}"' for segment in name.split("."))


_Operand = Scalar | None | list[Scalar]


def _check_scalar(
    field: str, op: str, value: object, *, expected: str, kinds: tuple[type, ...]
) -> Scalar | None:
    """``value`` if it is one of ``kinds`` and usable in SQLite, else InvalidFilterError."""
    if value is None:
        allowed = _NONE in kinds
    elif isinstance(value, bool):  # before the int test: bool is a subclass of int
        allowed = bool in kinds
    else:
        allowed = isinstance(value, tuple(k for k in kinds if k not in (bool, _NONE)))
    if not allowed:
        raise InvalidFilterError(f"{_where(field, op)} expects {expected}, got {_kind_name(value)}")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidFilterError(
                f"{_where(field, op)}: integer {_show(value)} is out of the 64-bit range"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidFilterError(f"{_where(field, op)} expects a finite number, got {value}")
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidFilterError(
                f"{_where(field, op)}: the string is not valid Unicode (lone surrogate)"
            ) from None
        return value
    raise InvalidFilterError(f"{_where(field, op)} expects {expected}, got {_kind_name(value)}")


_SCALAR_KINDS: Final = (str, int, float, bool)
_NONE = type(None)


def _check_operand(field: str, op: str, operand: object) -> _Operand:
    if op in ("$eq", "$ne"):
        return _check_scalar(
            field,
            op,
            operand,
            expected="a string, number, boolean or null",
            kinds=(*_SCALAR_KINDS, _NONE),
        )
    if op in _ORDER_SQL:
        return _check_scalar(
            field, op, operand, expected="a number or a string", kinds=(str, int, float)
        )
    if op in ("$in", "$nin"):
        if not isinstance(operand, list | tuple) or not operand:
            raise InvalidFilterError(
                f"{_where(field, op)} expects a non-empty list of values, got {_show(operand)}"
            )
        if len(operand) > MAX_IN_VALUES:
            raise InvalidFilterError(
                f"{_where(field, op)}: too many values ({len(operand)}; at most {MAX_IN_VALUES})"
            )
        out: list[Scalar] = []
        for item in operand:
            if item is None:
                raise InvalidFilterError(
                    f"{_where(field, op)}: null is not allowed in the list; use $eq/$ne null "
                    "or $exists"
                )
            checked = _check_scalar(
                field,
                op,
                item,
                expected="a list of strings, numbers or booleans",
                kinds=_SCALAR_KINDS,
            )
            assert checked is not None
            out.append(checked)
        return out
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidFilterError(
                f"{_where(field, op)} expects true or false, got {_show(operand)}"
            )
        return operand
    if op == "$contains":
        return _check_scalar(
            field, op, operand, expected="a string, number or boolean", kinds=_SCALAR_KINDS
        )
    # $startswith / $endswith
    return _check_scalar(field, op, operand, expected="a string", kinds=(str,))


# --- operators -------------------------------------------------------------------------------


def _same(a: Scalar, b: Scalar) -> bool:
    """Type-strict equality: booleans, numbers and strings never equal one another."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _match_present(value: str, op: str, operand: _Operand) -> bool:
    """Evaluate one operator on a present, non-null string (the corpus) in Python."""
    if op == "$eq":
        return operand is not None and not isinstance(operand, list) and _same(value, operand)
    if op == "$ne":
        return not _match_present(value, "$eq", operand)
    if op == "$in":
        assert isinstance(operand, list)
        return any(_same(value, item) for item in operand)
    if op == "$nin":
        return not _match_present(value, "$in", operand)
    if op == "$exists":
        return operand is True
    if not isinstance(operand, str):
        return False
    compare: dict[str, Callable[[str, str], bool]] = {
        "$gt": str.__gt__,
        "$gte": str.__ge__,
        "$lt": str.__lt__,
        "$lte": str.__le__,
        "$contains": str.__contains__,
        "$startswith": str.startswith,
        "$endswith": str.endswith,
    }
    return compare[op](value, operand)


def _generic(field: _Field, op: str, operand: _Operand) -> _Sql:
    if op == "$eq":
        return _eq(field, operand)
    if op == "$ne":
        return _not(_eq(field, operand))
    if op == "$in":
        return _in(field, operand)
    if op == "$nin":
        return _not(_in(field, operand))
    if op == "$exists":
        return field.exists if operand else _not(field.exists)
    if op in _ORDER_SQL:
        assert isinstance(operand, str | int | float) and not isinstance(operand, bool)
        check = field.is_text() if isinstance(operand, str) else field.is_number()
        return _and(check, _f(f"{{}} {_ORDER_SQL[op]} {{}}", field.value, operand))
    if op == "$contains":
        return _contains(field, operand)
    assert isinstance(operand, str)
    if op == "$startswith":
        # substr counts characters, as len() does; no LIKE, so % and _ stay literal.
        return _and(
            field.is_text(), _f("substr({}, 1, {}) = {}", field.value, len(operand), operand)
        )
    if not operand:  # substr(x, -0) would be the whole string
        return field.is_text()
    return _and(field.is_text(), _f("substr({}, {}) = {}", field.value, -len(operand), operand))


def _eq(field: _Field, operand: _Operand) -> _Sql:
    if operand is None:
        return field.absent()
    if isinstance(operand, bool):
        return field.is_bool(operand)
    if isinstance(operand, str):
        return _and(field.is_text(), _f("{} = {}", field.value, operand))
    assert isinstance(operand, int | float)
    return _and(field.is_number(), _f("{} = {}", field.value, operand))


def _in(field: _Field, operand: _Operand) -> _Sql:
    assert isinstance(operand, list)
    texts = [v for v in operand if isinstance(v, str)]
    numbers = [v for v in operand if isinstance(v, int | float) and not isinstance(v, bool)]
    flags = {v for v in operand if isinstance(v, bool)}
    parts = [field.is_bool(flag) for flag in sorted(flags)]
    for values, check in ((texts, field.is_text()), (numbers, field.is_number())):
        if values:
            marks = ", ".join("{}" for _ in values)
            parts.append(_and(check, _f(f"{{}} IN ({marks})", field.value, *values)))
    return _or(*parts)


def _contains(field: _Field, operand: _Operand) -> _Sql:
    assert operand is not None and not isinstance(operand, list)
    parts: list[_Sql] = []
    if isinstance(operand, str):
        parts.append(_and(field.is_text(), _f("instr({}, {}) > 0", field.value, operand)))
    if field.json_path is not None:
        # json_each walks objects and scalars too, so check for an array first.
        if isinstance(operand, bool):
            element = "je.type = 'true'" if operand else "je.type = 'false'"
            match = _f(
                f"EXISTS (SELECT 1 FROM json_each(d.metadata, {{}}) AS je WHERE {element})",
                field.json_path,
            )
        else:
            element = (
                "je.type = 'text'" if isinstance(operand, str) else "je.type IN ('integer', 'real')"
            )
            match = _f(
                f"EXISTS (SELECT 1 FROM json_each(d.metadata, {{}}) AS je WHERE {element} "
                "AND je.value = {})",
                field.json_path,
                operand,
            )
        parts.append(_and(_f("{} IS 'array'", field.kind), match))
    return _or(*parts)


def _page(op: str, operand: _Operand) -> _Sql:
    if op == "$exists":
        return _HAS_PAGES if operand else _not(_HAS_PAGES)
    if op in ("$ne", "$nin"):
        return _not(_page("$eq" if op == "$ne" else "$in", operand))
    if op == "$eq" and operand is None:
        return _not(_HAS_PAGES)
    if op == "$in":
        assert isinstance(operand, list)
        pages = sorted({int(v) for v in operand if _is_page_number(v)})
        if not pages:
            return _FALSE
        # One JSON parameter of whole numbers: exact, and no OR chain 1000 terms long.
        return _and(
            _HAS_PAGES,
            _f(
                f"EXISTS (SELECT 1 FROM json_each({{}}) AS p WHERE p.value BETWEEN {_PAGE_LO} "
                f"AND {_PAGE_HI})",
                json.dumps(pages),
            ),
        )
    if not isinstance(operand, int | float) or isinstance(operand, bool):
        return _FALSE  # strings, booleans and the string operators never match a page
    if op == "$eq":
        if not _is_page_number(operand):
            return _FALSE
        return _and(_HAS_PAGES, _f(f"{_PAGE_LO} <= {{}} AND {_PAGE_HI} >= {{}}", operand, operand))
    if op in ("$gt", "$gte"):
        return _and(_HAS_PAGES, _f(f"{_PAGE_HI} {_ORDER_SQL[op]} {{}}", operand))
    if op in ("$lt", "$lte"):
        return _and(_HAS_PAGES, _f(f"{_PAGE_LO} {_ORDER_SQL[op]} {{}}", operand))
    return _FALSE


def _is_page_number(value: object) -> bool:
    """Pages are whole numbers: 3 and 3.0 can match a page, 2.5 cannot."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


# --- public API ------------------------------------------------------------------------------


def compile_where(where: Mapping[str, Any] | None, *, corpus: str) -> tuple[str, list[Any]]:
    """Compile ``where`` to ``(sql, params)``: a boolean SQL expression and its parameters.

    The expression reads ``c`` (chunks) and ``d`` (documents) and is parenthesised, so it
    can be joined to other conditions. ``None`` or ``{}`` gives ``("1", [])``. Semantics are
    in the module docstring.

    Raises:
        InvalidFilterError: the filter is malformed (bad field name, unknown operator, a
            value of the wrong kind, too deep or too large); the message is one line and
            names the field and operator.
    """
    if where is None:
        return "1", []
    sql = _Compiler(corpus).clause(where, 1)
    text = sql.text if sql in (_TRUE, _FALSE) else f"({sql.text})"
    return text, list(sql.params)


def validate_where(where: Mapping[str, Any] | None) -> None:
    """Check ``where`` as :func:`compile_where` does, without building SQL for a corpus.

    Raises:
        InvalidFilterError: as :func:`compile_where`.
    """
    compile_where(where, corpus="")


def _extension(value: Any) -> Any:
    if isinstance(value, str) and value:
        value = value.strip().lower()
        return value if value.startswith(".") else "." + value
    return value


def normalise_where(where: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``where`` with every ``extension`` value written as stored (``".pdf"``): ``"pdf"``,
    ``"PDF"`` and ``".pdf"`` all match PDF files. Anything malformed is left for
    :func:`validate_where` to name."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, Mapping):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key != "extension":
                out[key] = walk(value) if key in ("$and", "$or", "$not") else value
            elif isinstance(value, Mapping):
                out[key] = {
                    op: [_extension(v) for v in operand]
                    if isinstance(operand, list)
                    else _extension(operand)
                    if op in ("$eq", "$ne")
                    else operand
                    for op, operand in value.items()
                }
            else:
                out[key] = _extension(value)
        return out

    return None if where is None else walk(where)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidFilterError(f"filter: key {_show(key)} appears twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise InvalidFilterError(f"filter: {name} is not a valid JSON value")


def parse_where_json(text: str) -> dict[str, Any]:
    """Parse a filter given as JSON text (CLI ``--where``, MCP arguments) and validate it.

    Raises:
        InvalidFilterError: the text is not JSON, not an object, repeats a key in one
            object, contains NaN/Infinity, or is not a valid filter.
    """
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidFilterError(
            f"filter: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidFilterError("filter: JSON is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python will parse
        raise InvalidFilterError(f"filter: invalid JSON ({str(exc)[:80]})") from None
    if not isinstance(value, dict):
        raise InvalidFilterError(
            f"filter: expected a JSON object of field -> condition, got {_show(value)}"
        )
    validate_where(value)
    return value
