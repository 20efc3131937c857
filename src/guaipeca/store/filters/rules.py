"""What a valid filter is: the fields, the operators, the limits, and the checks that
name the problem in one line (:mod:`guaipeca.store.filters` has the semantics)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from guaipeca.errors import InvalidFilterError

__all__ = [
    "BUILTIN_FIELDS",
    "CORPUS_FIELD",
    "ENRICHMENT_FIELDS",
    "LOGICAL",
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "MAX_IN_VALUES",
    "MAX_TOTAL_VALUES",
    "OPERATORS",
    "ORDER_SQL",
    "SCALAR_KINDS",
    "Operand",
    "Scalar",
    "check_field_name",
    "check_operand",
    "check_scalar",
    "json_path",
    "kind_name",
    "show",
    "where_label",
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
        # Every heading level, JSON text too (chunks older than it have their path: m006).
        "heading_trail": "c.heading_trail",
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
LOGICAL = ("$and", "$or")
ORDER_SQL: Final = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_INT64 = (-(2**63), 2**63 - 1)
_SHOW_CHARS = 60

Scalar = str | int | float | bool


# --- messages --------------------------------------------------------------------------------


def show(value: object) -> str:
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


def kind_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return show(value)


def where_label(field: str, op: str) -> str:
    return f"filter field {show(field)}: {op}"


def check_field_name(name: str) -> None:
    if name in BUILTIN_FIELDS or name in ENRICHMENT_FIELDS or name == CORPUS_FIELD:
        return
    segments = name.split(".")
    if len(segments) > _MAX_SEGMENTS or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidFilterError(
            f"filter: invalid field name {show(name)}; a metadata key is 1-64 letters, "
            "digits, '_' or '-', not starting with a digit or '-', and nested keys are "
            f"joined with '.' (at most {_MAX_SEGMENTS})"
        )


def json_path(name: str) -> str:
    # Safe to quote: each segment matched _SEGMENT, which admits no quote or backslash.
    return "$." + ".".join(f'"{segment}"' for segment in name.split("."))


Operand = Scalar | None | list[Scalar]


def check_scalar(
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
        raise InvalidFilterError(
            f"{where_label(field, op)} expects {expected}, got {kind_name(value)}"
        )
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidFilterError(
                f"{where_label(field, op)}: integer {show(value)} is out of the 64-bit range"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidFilterError(
                f"{where_label(field, op)} expects a finite number, got {value}"
            )
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidFilterError(
                f"{where_label(field, op)}: the string is not valid Unicode (lone surrogate)"
            ) from None
        return value
    raise InvalidFilterError(f"{where_label(field, op)} expects {expected}, got {kind_name(value)}")


SCALAR_KINDS: Final = (str, int, float, bool)
_NONE = type(None)


def check_operand(field: str, op: str, operand: object) -> Operand:
    if op in ("$eq", "$ne"):
        return check_scalar(
            field,
            op,
            operand,
            expected="a string, number, boolean or null",
            kinds=(*SCALAR_KINDS, _NONE),
        )
    if op in ORDER_SQL:
        return check_scalar(
            field, op, operand, expected="a number or a string", kinds=(str, int, float)
        )
    if op in ("$in", "$nin"):
        if not isinstance(operand, list | tuple) or not operand:
            raise InvalidFilterError(
                f"{where_label(field, op)} expects a non-empty list of values, got {show(operand)}"
            )
        if len(operand) > MAX_IN_VALUES:
            raise InvalidFilterError(
                f"{where_label(field, op)}: too many values "
                f"({len(operand)}; at most {MAX_IN_VALUES})"
            )
        out: list[Scalar] = []
        for item in operand:
            if item is None:
                raise InvalidFilterError(
                    f"{where_label(field, op)}: null is not allowed in the list; use $eq/$ne null "
                    "or $exists"
                )
            checked = check_scalar(
                field,
                op,
                item,
                expected="a list of strings, numbers or booleans",
                kinds=SCALAR_KINDS,
            )
            assert checked is not None
            out.append(checked)
        return out
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidFilterError(
                f"{where_label(field, op)} expects true or false, got {show(operand)}"
            )
        return operand
    if op == "$contains":
        return check_scalar(
            field, op, operand, expected="a string, number or boolean", kinds=SCALAR_KINDS
        )
    # $startswith / $endswith
    return check_scalar(field, op, operand, expected="a string", kinds=(str,))
