"""Filters compiled to parameterised SQL for the embedded catalog (semantics in
:mod:`guaipeca.store.filters`): field names never reach the SQL text and every value is a
bound parameter, so a filter can never inject SQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from guaipeca.errors import InvalidFilterError
from guaipeca.store.filters.rules import (
    BUILTIN_FIELDS,
    CORPUS_FIELD,
    ENRICHMENT_FIELDS,
    LOGICAL,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_TOTAL_VALUES,
    OPERATORS,
    ORDER_SQL,
    Operand,
    Scalar,
    check_field_name,
    check_operand,
    json_path,
    show,
)

__all__ = ["compile_where", "validate_where"]

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


# --- the compiler ----------------------------------------------------------------------------


class _Compiler:
    def __init__(self, corpus: str) -> None:
        self.corpus = corpus
        self.conditions = 0
        self.values = 0

    def clause(self, where: object, depth: int) -> _Sql:
        if not isinstance(where, Mapping):
            raise InvalidFilterError(
                f"filter: expected an object of field -> condition, got {show(where)}"
            )
        parts: list[_Sql] = []
        for key, condition in where.items():
            if not isinstance(key, str):
                raise InvalidFilterError(f"filter: field names must be strings, got {show(key)}")
            if key in LOGICAL:
                parts.append(self.logical(key, condition, depth))
            elif key.startswith("$"):
                raise InvalidFilterError(
                    f"filter: unknown operator {show(key)} where a field is expected; "
                    "use a field name, $and or $or"
                )
            else:
                parts.append(self.field(key, condition))
        return _and(*parts)

    def logical(self, key: str, items: object, depth: int) -> _Sql:
        if not isinstance(items, list | tuple) or not items:
            raise InvalidFilterError(
                f"filter: {key} expects a non-empty list of objects, got {show(items)}"
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
        check_field_name(name)
        if name in ENRICHMENT_FIELDS:
            return self.element_field(name, condition)
        if isinstance(condition, list | tuple):
            raise InvalidFilterError(
                f"filter field {show(name)}: a list is not a valid value; use $in for "
                "any of several values or $contains for an array element"
            )
        if not isinstance(condition, Mapping):
            self.count()
            return self.operator(name, "$eq", condition)
        if not condition:
            raise InvalidFilterError(
                f"filter field {show(name)}: empty condition; give a value or operators such as $eq"
            )
        if not any(isinstance(k, str) and k.startswith("$") for k in condition):
            raise InvalidFilterError(
                f"filter field {show(name)}: an object is not a valid value; use operators "
                "such as $eq, or a dotted name like 'field.key' for nested metadata"
            )
        parts: list[_Sql] = []
        for op, operand in condition.items():
            if op not in OPERATORS:
                raise InvalidFilterError(
                    f"filter field {show(name)}: unknown operator {show(op)}; valid "
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
                    f"filter field {show(name)}: a list is not a valid value; use $in"
                )
            condition = {"$eq": condition}
        if not condition or not all(isinstance(k, str) and k in OPERATORS for k in condition):
            bad = next((k for k in condition if k not in OPERATORS), None)
            raise InvalidFilterError(
                f"filter field {show(name)}: unknown operator {show(bad)}; valid "
                f"operators: {', '.join(OPERATORS)}"
                if bad is not None
                else f"filter field {show(name)}: empty condition"
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
            checked = check_operand(name, op, operand)
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
        checked = check_operand(name, op, operand)
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
        field = _column(expr) if expr is not None else _metadata(json_path(name))
        return _generic(field, op, checked)


# --- operators -------------------------------------------------------------------------------


def _same(a: Scalar, b: Scalar) -> bool:
    """Type-strict equality: booleans, numbers and strings never equal one another."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _match_present(value: str, op: str, operand: Operand) -> bool:
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


def _generic(field: _Field, op: str, operand: Operand) -> _Sql:
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
    if op in ORDER_SQL:
        assert isinstance(operand, str | int | float) and not isinstance(operand, bool)
        check = field.is_text() if isinstance(operand, str) else field.is_number()
        return _and(check, _f(f"{{}} {ORDER_SQL[op]} {{}}", field.value, operand))
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


def _eq(field: _Field, operand: Operand) -> _Sql:
    if operand is None:
        return field.absent()
    if isinstance(operand, bool):
        return field.is_bool(operand)
    if isinstance(operand, str):
        return _and(field.is_text(), _f("{} = {}", field.value, operand))
    assert isinstance(operand, int | float)
    return _and(field.is_number(), _f("{} = {}", field.value, operand))


def _in(field: _Field, operand: Operand) -> _Sql:
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


def _contains(field: _Field, operand: Operand) -> _Sql:
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


def _page(op: str, operand: Operand) -> _Sql:
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
        return _and(_HAS_PAGES, _f(f"{_PAGE_HI} {ORDER_SQL[op]} {{}}", operand))
    if op in ("$lt", "$lte"):
        return _and(_HAS_PAGES, _f(f"{_PAGE_LO} {ORDER_SQL[op]} {{}}", operand))
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
