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

__all__ = [
    "FALSE",
    "SQLITE",
    "TRUE",
    "Dialect",
    "Field",
    "Sql",
    "compile_where",
    "fill",
    "validate_where",
]

# --- SQL fragments ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sql:
    """A piece of SQL and its parameters, in the order their ``?`` appear in the text."""

    text: str
    params: tuple[Any, ...] = ()


TRUE = Sql("1")
FALSE = Sql("0")


def fill(template: str, *args: Sql | Scalar | list[Any]) -> Sql:
    """Fill each ``{}`` of ``template``: a fragment is inlined, anything else becomes a ``?``.

    Building every piece through here keeps text and parameters in step by construction.
    """
    pieces = template.split("{}")
    if len(pieces) != len(args) + 1:
        raise AssertionError(f"template {template!r} wants {len(pieces) - 1} arguments")
    text = [pieces[0]]
    params: list[Any] = []
    for arg, piece in zip(args, pieces[1:], strict=True):
        if isinstance(arg, Sql):
            text.append(arg.text)
            params.extend(arg.params)
        else:
            text.append("?")
            params.append(arg)
        text.append(piece)
    return Sql("".join(text), tuple(params))


def _combine(keyword: str, parts: list[Sql]) -> Sql:
    """AND/OR as a balanced tree, so 1000 terms nest ~10 deep (SQLite caps depth at 1000)."""
    if len(parts) == 1:
        return parts[0]
    mid = len(parts) // 2
    left, right = _combine(keyword, parts[:mid]), _combine(keyword, parts[mid:])
    return fill(f"({{}}) {keyword} ({{}})", left, right)


def _and(*parts: Sql) -> Sql:
    if FALSE in parts:
        return FALSE
    kept = [p for p in parts if p != TRUE]
    return _combine("AND", kept) if kept else TRUE


def _or(*parts: Sql) -> Sql:
    if TRUE in parts:
        return TRUE
    kept = [p for p in parts if p != FALSE]
    return _combine("OR", kept) if kept else FALSE


def _not(part: Sql) -> Sql:
    # Every fragment built here is 0 or 1, never NULL, so NOT is a true complement.
    if part == TRUE:
        return FALSE
    if part == FALSE:
        return TRUE
    return fill("NOT ({})", part)


# --- fields ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """How to read one field in SQL.

    ``kind`` is an expression giving the value's type with the names of SQLite's
    ``json_type``, which ``typeof`` shares for columns: 'null', 'integer', 'real', 'text',
    and for metadata also 'true', 'false', 'array', 'object', or NULL when the key is absent.
    ``text`` and ``number`` read the value as a string or a number (only looked at when
    ``kind`` says it is one); SQLite's values are typed, so both are ``value`` there.
    """

    value: Sql
    kind: Sql
    exists: Sql
    json_path: str | None = None  # set for metadata: lets $contains look inside arrays
    text: Sql | None = None
    number: Sql | None = None

    def as_text(self) -> Sql:
        return self.text if self.text is not None else self.value

    def as_number(self) -> Sql:
        return self.number if self.number is not None else self.value

    def is_text(self) -> Sql:
        return fill("COALESCE({}, '') = 'text'", self.kind)

    def is_number(self) -> Sql:
        return fill("COALESCE({}, '') IN ('integer', 'real')", self.kind)

    def is_bool(self, flag: bool) -> Sql:
        return fill(
            "COALESCE({}, '') = 'true'" if flag else "COALESCE({}, '') = 'false'", self.kind
        )

    def absent(self) -> Sql:
        """Null or missing: what ``{"x": None}`` matches."""
        return (
            _not(self.exists)
            if self.json_path is None
            else fill("COALESCE({}, 'null') = 'null'", self.kind)
        )


class Dialect:
    """The SQL of one database for what differs between engines (SQLite here; the
    PostgreSQL backend subclasses it). Fragments read ``c`` (chunks) and ``d`` (documents)."""

    page_lo = "c.page_start"
    page_hi = "COALESCE(c.page_end, c.page_start)"

    def has_pages(self) -> Sql:
        return Sql(f"{self.page_lo} IS NOT NULL")

    def column(self, name: str, expr: str) -> Field:
        """A built-in field (``expr`` is its SQLite column from BUILTIN_FIELDS)."""
        return Field(
            value=Sql(expr), kind=Sql(f"typeof({expr})"), exists=Sql(f"{expr} IS NOT NULL")
        )

    def metadata(self, name: str) -> Field:
        path = json_path(name)
        return Field(
            value=fill("json_extract(d.metadata, {})", path),
            kind=fill("json_type(d.metadata, {})", path),
            exists=fill("json_type(d.metadata, {}) IS NOT NULL", path),
            json_path=path,
        )

    def element(self) -> Field:
        """One string element of an enrichment list (inside :meth:`some_element`)."""
        return Field(value=Sql("ee.value"), kind=Sql("ee.type"), exists=TRUE)

    def some_element(self, name: str, cond: Sql) -> Sql:
        """True when some string element of enrichment list ``name`` satisfies ``cond``."""
        return fill(
            "EXISTS (SELECT 1 FROM json_each(c.enrichment, {}) AS ee "
            "WHERE ee.type = 'text' AND {})",
            ENRICHMENT_FIELDS[name],
            cond,
        )

    def order(self, field: Field, op: str, operand: str | int | float) -> Sql:
        value = field.as_text() if isinstance(operand, str) else field.as_number()
        return fill(f"{{}} {ORDER_SQL[op]} {{}}", value, operand)

    def substring(self, field: Field, operand: str) -> Sql:
        return fill("instr({}, {}) > 0", field.as_text(), operand)

    def ends_with(self, field: Field, operand: str) -> Sql:
        return fill("substr({}, {}) = {}", field.as_text(), -len(operand), operand)

    def array_has(self, field: Field, operand: Scalar) -> Sql:
        """The metadata array ``field`` has an element equal to ``operand`` (type-strict)."""
        # json_each walks objects and scalars too, so check for an array first.
        assert field.json_path is not None
        if isinstance(operand, bool):
            element = "je.type = 'true'" if operand else "je.type = 'false'"
            match = fill(
                f"EXISTS (SELECT 1 FROM json_each(d.metadata, {{}}) AS je WHERE {element})",
                field.json_path,
            )
        else:
            element = (
                "je.type = 'text'" if isinstance(operand, str) else "je.type IN ('integer', 'real')"
            )
            match = fill(
                f"EXISTS (SELECT 1 FROM json_each(d.metadata, {{}}) AS je WHERE {element} "
                "AND je.value = {})",
                field.json_path,
                operand,
            )
        return _and(fill("COALESCE({}, '') = 'array'", field.kind), match)

    def page_in(self, pages: list[int]) -> Sql:
        # One JSON parameter of whole numbers: exact, and no OR chain 1000 terms long.
        return fill(
            f"EXISTS (SELECT 1 FROM json_each({{}}) AS p WHERE p.value BETWEEN {self.page_lo} "
            f"AND {self.page_hi})",
            json.dumps(pages),
        )


SQLITE = Dialect()


# --- the compiler ----------------------------------------------------------------------------


class _Compiler:
    def __init__(self, corpus: str, dialect: Dialect) -> None:
        self.corpus = corpus
        self.dialect = dialect
        self.conditions = 0
        self.values = 0

    def clause(self, where: object, depth: int) -> Sql:
        if not isinstance(where, Mapping):
            raise InvalidFilterError(
                f"filter: expected an object of field -> condition, got {show(where)}"
            )
        parts: list[Sql] = []
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

    def logical(self, key: str, items: object, depth: int) -> Sql:
        if not isinstance(items, list | tuple) or not items:
            raise InvalidFilterError(
                f"filter: {key} expects a non-empty list of objects, got {show(items)}"
            )
        if depth >= MAX_DEPTH:
            raise InvalidFilterError(
                f"filter: nested too deeply ({key} inside more than {MAX_DEPTH - 1} "
                "levels of $and/$or); flatten it"
            )
        parts: list[Sql] = []
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

    def field(self, name: str, condition: object) -> Sql:
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
        parts: list[Sql] = []
        for op, operand in condition.items():
            if op not in OPERATORS:
                raise InvalidFilterError(
                    f"filter field {show(name)}: unknown operator {show(op)}; valid "
                    f"operators: {', '.join(OPERATORS)}"
                )
            self.count()
            parts.append(self.operator(name, op, operand))
        return _and(*parts)

    def element_field(self, name: str, condition: object) -> Sql:
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
        element = self.dialect.element()

        def some(cond: Sql) -> Sql:
            return FALSE if cond == FALSE else self.dialect.some_element(name, cond)

        positive: list[Sql] = []
        parts: list[Sql] = []
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
                parts.append(some(TRUE) if present else _not(some(TRUE)))
            elif op in ("$ne", "$nin"):
                same = _generic(self.dialect, element, "$eq" if op == "$ne" else "$in", checked)
                parts.append(_not(some(same)))
            else:  # $contains: a substring of the element (elements are strings)
                positive.append(_generic(self.dialect, element, op, checked))
        if positive:
            parts.append(some(_and(*positive)))
        return _and(*parts)

    def operator(self, name: str, op: str, operand: object) -> Sql:
        checked = check_operand(name, op, operand)
        if isinstance(checked, list):
            self.values += len(checked)
            if self.values > MAX_TOTAL_VALUES:
                raise InvalidFilterError(
                    f"filter: too many $in/$nin values in all (more than {MAX_TOTAL_VALUES})"
                )
        if name == CORPUS_FIELD:
            return TRUE if _match_present(self.corpus, op, checked) else FALSE
        if name == "page":
            return _page(self.dialect, op, checked)
        expr = BUILTIN_FIELDS.get(name)
        d = self.dialect
        field = d.column(name, expr) if expr is not None else d.metadata(name)
        return _generic(d, field, op, checked)


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


def _generic(d: Dialect, field: Field, op: str, operand: Operand) -> Sql:
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
        return _and(check, d.order(field, op, operand))
    if op == "$contains":
        return _contains(d, field, operand)
    assert isinstance(operand, str)
    if op == "$startswith":
        # substr counts characters, as len() does; no LIKE, so % and _ stay literal.
        return _and(
            field.is_text(), fill("substr({}, 1, {}) = {}", field.as_text(), len(operand), operand)
        )
    if not operand:  # substr(x, -0) would be the whole string
        return field.is_text()
    return _and(field.is_text(), d.ends_with(field, operand))


def _eq(field: Field, operand: Operand) -> Sql:
    if operand is None:
        return field.absent()
    if isinstance(operand, bool):
        return field.is_bool(operand)
    if isinstance(operand, str):
        return _and(field.is_text(), fill("{} = {}", field.as_text(), operand))
    assert isinstance(operand, int | float)
    return _and(field.is_number(), fill("{} = {}", field.as_number(), operand))


def _in(field: Field, operand: Operand) -> Sql:
    assert isinstance(operand, list)
    texts = [v for v in operand if isinstance(v, str)]
    numbers = [v for v in operand if isinstance(v, int | float) and not isinstance(v, bool)]
    flags = {v for v in operand if isinstance(v, bool)}
    parts = [field.is_bool(flag) for flag in sorted(flags)]
    for values, check, value in (
        (texts, field.is_text(), field.as_text()),
        (numbers, field.is_number(), field.as_number()),
    ):
        if values:
            marks = ", ".join("{}" for _ in values)
            parts.append(_and(check, fill(f"{{}} IN ({marks})", value, *values)))
    return _or(*parts)


def _contains(d: Dialect, field: Field, operand: Operand) -> Sql:
    assert operand is not None and not isinstance(operand, list)
    parts: list[Sql] = []
    if isinstance(operand, str):
        parts.append(_and(field.is_text(), d.substring(field, operand)))
    if field.json_path is not None:
        parts.append(d.array_has(field, operand))
    return _or(*parts)


def _page(d: Dialect, op: str, operand: Operand) -> Sql:
    has_pages = d.has_pages()
    if op == "$exists":
        return has_pages if operand else _not(has_pages)
    if op in ("$ne", "$nin"):
        return _not(_page(d, "$eq" if op == "$ne" else "$in", operand))
    if op == "$eq" and operand is None:
        return _not(has_pages)
    lo, hi = d.page_lo, d.page_hi
    if op == "$in":
        assert isinstance(operand, list)
        pages = sorted({int(v) for v in operand if _is_page_number(v)})
        return _and(has_pages, d.page_in(pages)) if pages else FALSE
    if not isinstance(operand, int | float) or isinstance(operand, bool):
        return FALSE  # strings, booleans and the string operators never match a page
    if op == "$eq":
        if not _is_page_number(operand):
            return FALSE
        return _and(has_pages, fill(f"{lo} <= {{}} AND {hi} >= {{}}", operand, operand))
    if op in ("$gt", "$gte"):
        return _and(has_pages, fill(f"{hi} {ORDER_SQL[op]} {{}}", operand))
    if op in ("$lt", "$lte"):
        return _and(has_pages, fill(f"{lo} {ORDER_SQL[op]} {{}}", operand))
    return FALSE


def _is_page_number(value: object) -> bool:
    """Pages are whole numbers: 3 and 3.0 can match a page, 2.5 cannot."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


# --- public API ------------------------------------------------------------------------------


def compile_where(
    where: Mapping[str, Any] | None, *, corpus: str, dialect: Dialect = SQLITE
) -> tuple[str, list[Any]]:
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
    sql = _Compiler(corpus, dialect).clause(where, 1)
    text = sql.text if sql in (TRUE, FALSE) else f"({sql.text})"
    return text, list(sql.params)


def validate_where(where: Mapping[str, Any] | None) -> None:
    """Check ``where`` as :func:`compile_where` does, without building SQL for a corpus.

    Raises:
        InvalidFilterError: as :func:`compile_where`.
    """
    compile_where(where, corpus="")
