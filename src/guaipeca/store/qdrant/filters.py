"""The ``where`` dialect (:mod:`guaipeca.store.filters`) for the Qdrant backend.

Two halves:

- :func:`matches` evaluates a filter on one chunk's payload in Python, with exactly the
  semantics of the SQL compiler (type-strict comparisons, missing fields matching ``$ne``,
  page ranges, ``$contains`` on strings and arrays). The tests check it against the SQL on
  random filters and records.
- :func:`translate` turns a filter into a Qdrant ``Filter`` and says whether it is *exact*.
  When it is not, the Qdrant filter is a superset (it never drops a chunk the filter keeps),
  and the caller finishes the job with :func:`matches` on the candidates' payloads. Exact:
  every operator on the built-in fields except the string ones (``$gt``... on a string,
  ``$contains``, ``$startswith``, ``$endswith``); client-side step: those, and every
  operator on user metadata (Qdrant matches an array field by any element and does not
  keep integers and floats apart the way the dialect does, so metadata is checked in
  Python after a superset pre-filter by value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from qdrant_client import models

from guaipeca.store.filters import BUILTIN_FIELDS, CORPUS_FIELD, ENRICHMENT_FIELDS

__all__ = ["PAYLOAD_FIELDS", "Translation", "matches", "translate"]

_MISSING: Final = object()

#: Built-in field -> payload key on chunk points (``page`` reads ``page_start``/``page_hi``).
PAYLOAD_FIELDS: Final[Mapping[str, str]] = {
    "doc_id": "doc_id",
    "source_path": "source_path",
    "filename": "filename",
    "extension": "extension",
    "modified": "modified",
    "section_id": "section_id",
    "heading_path": "heading_path_json",
    "heading_trail": "heading_trail_json",
    "position": "position",
}
_NUMERIC = frozenset({"modified", "position"})
_ORDER: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


# --- Python evaluation -------------------------------------------------------------------


def _kind(value: object) -> str | None:
    if value is _MISSING:
        return None
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    return "array" if isinstance(value, list) else "object"


def _same_kind(operand: object) -> str:
    if isinstance(operand, bool):
        return "bool"
    return "text" if isinstance(operand, str) else "number"


def _eq(value: object, operand: object, *, metadata: bool) -> bool:
    if operand is None:
        return value is None or (metadata and value is _MISSING)
    return _kind(value) == _same_kind(operand) and value == operand


def _meta_value(payload: Mapping[str, Any], name: str) -> object:
    node: object = payload.get("metadata") or {}
    for segment in name.split("."):
        if not isinstance(node, dict) or segment not in node:
            return _MISSING
        node = node[segment]
    return node


def _field(payload: Mapping[str, Any], name: str, op: str, operand: Any) -> bool:
    metadata = name not in BUILTIN_FIELDS and name != CORPUS_FIELD
    if name == "page":
        return _page(payload.get("page_start"), payload.get("page_hi"), op, operand)
    if name == CORPUS_FIELD:
        value: object = payload["corpus"]
    elif metadata:
        value = _meta_value(payload, name)
    else:
        value = payload.get(PAYLOAD_FIELDS[name])
    return _apply(value, op, operand, metadata=metadata)


def _element_field(payload: Mapping[str, Any], name: str, condition: Any) -> bool:
    """An enrichment list: the positive operators must all hold for one element."""
    stored = (payload.get("enrichment") or {}).get(name) or []
    elements = [e for e in stored if isinstance(e, str)]
    if not isinstance(condition, Mapping):
        condition = {"$eq": condition}
    positive: list[tuple[str, Any]] = []
    for op, operand in condition.items():
        if op == "$exists" or operand is None:
            present = operand if op == "$exists" else op == "$ne"
            if bool(elements) is not present:
                return False
        elif op in ("$ne", "$nin"):
            inner = "$eq" if op == "$ne" else "$in"
            if any(_apply(e, inner, operand, metadata=False) for e in elements):
                return False
        else:
            positive.append(("$eq" if op == "$contains" else op, operand))
    if positive:
        return any(all(_apply(e, op, v, metadata=False) for op, v in positive) for e in elements)
    return True


def _apply(value: object, op: str, operand: Any, *, metadata: bool) -> bool:
    if op == "$eq":
        return _eq(value, operand, metadata=metadata)
    if op == "$ne":
        return not _eq(value, operand, metadata=metadata)
    if op == "$in":
        return any(_eq(value, item, metadata=metadata) for item in operand)
    if op == "$nin":
        return not any(_eq(value, item, metadata=metadata) for item in operand)
    if op == "$exists":
        present = value is not _MISSING if metadata else value is not None
        return present is operand
    kind = _kind(value)
    if op in _ORDER:
        return kind == _same_kind(operand) and _ORDER[op](value, operand)
    if op == "$contains":
        if isinstance(operand, str) and kind == "text":
            assert isinstance(value, str)
            if operand in value:
                return True
        if metadata and isinstance(value, list):
            return any(_kind(e) == _same_kind(operand) and e == operand for e in value)
        return False
    if kind != "text":
        return False
    assert isinstance(value, str)
    return value.startswith(operand) if op == "$startswith" else value.endswith(operand)


def _whole(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _page(lo: int | None, hi: int | None, op: str, operand: Any) -> bool:
    has = lo is not None
    if op == "$exists":
        return has is operand
    if op in ("$ne", "$nin"):
        return not _page(lo, hi, "$eq" if op == "$ne" else "$in", operand)
    if op == "$eq" and operand is None:
        return not has
    if not has:
        return False
    assert lo is not None and hi is not None
    if op == "$in":
        return any(_whole(p) and lo <= p <= hi for p in operand)
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        return False
    if op == "$eq":
        return _whole(operand) and lo <= operand <= hi
    if op in ("$gt", "$gte"):
        return _ORDER[op](hi, operand)
    if op in ("$lt", "$lte"):
        return _ORDER[op](lo, operand)
    return False


def matches(where: Mapping[str, Any] | None, payload: Mapping[str, Any]) -> bool:
    """Whether a chunk point's payload satisfies an already validated ``where``."""
    if not where:
        return True
    for key, condition in where.items():
        if key == "$and":
            if not all(matches(item, payload) for item in condition):
                return False
        elif key == "$or":
            if not any(matches(item, payload) for item in condition):
                return False
        elif key in ENRICHMENT_FIELDS:
            if not _element_field(payload, key, condition):
                return False
        elif isinstance(condition, Mapping):
            if not all(_field(payload, key, op, v) for op, v in condition.items()):
                return False
        elif not _field(payload, key, "$eq", condition):
            return False
    return True


# --- translation to Qdrant ---------------------------------------------------------------

Cond = models.Condition | bool  # True: no restriction, False: nothing


@dataclass(frozen=True, slots=True)
class Translation:
    """A Qdrant condition and whether it is the filter itself (else a superset of it)."""

    cond: Cond
    exact: bool

    def as_filter(self) -> models.Filter | None:
        if self.cond is True:
            return None
        if self.cond is False:
            raise AssertionError("a filter that matches nothing has no Qdrant form")
        assert not isinstance(self.cond, bool)
        return (
            self.cond if isinstance(self.cond, models.Filter) else models.Filter(must=[self.cond])
        )


_TRUE = Translation(True, True)
_FALSE = Translation(False, True)
_UNKNOWN = Translation(True, False)  # the client-side step decides


def _all(parts: list[Translation]) -> Translation:
    if any(p.cond is False for p in parts):
        return _FALSE
    exact = all(p.exact for p in parts)
    conds = [p.cond for p in parts if p.cond is not True]
    if not conds:
        return Translation(True, exact)
    if len(conds) == 1:
        return Translation(conds[0], exact)
    return Translation(models.Filter(must=conds), exact)


def _any(parts: list[Translation]) -> Translation:
    exact = all(p.exact for p in parts)
    if any(p.cond is True for p in parts):
        return Translation(True, exact)
    conds = [p.cond for p in parts if p.cond is not False]
    if not conds:
        return _FALSE
    if len(conds) == 1:
        return Translation(conds[0], exact)
    return Translation(models.Filter(should=conds), exact)


def _not(part: Translation) -> Translation:
    if not part.exact:
        return _UNKNOWN
    if isinstance(part.cond, bool):
        return _FALSE if part.cond else _TRUE
    return Translation(models.Filter(must_not=[part.cond]), True)


def _match(key: str, value: str | int | bool) -> Translation:
    return Translation(models.FieldCondition(key=key, match=models.MatchValue(value=value)), True)


def _range(key: str, **bounds: float) -> models.FieldCondition:
    return models.FieldCondition(key=key, range=models.Range(**bounds))


def _is_null(key: str) -> Translation:
    return Translation(models.IsNullCondition(is_null=models.PayloadField(key=key)), True)


def _number(operand: object) -> bool:
    return isinstance(operand, int | float) and not isinstance(operand, bool)


_RANGE_ARG = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def _builtin(name: str, op: str, operand: Any) -> Translation:
    key = PAYLOAD_FIELDS[name]
    numeric = name in _NUMERIC
    if op == "$ne":
        return _not(_builtin(name, "$eq", operand))
    if op == "$nin":
        return _not(_builtin(name, "$in", operand))
    if op == "$exists":
        return _not(_is_null(key)) if operand else _is_null(key)
    if op == "$eq":
        if operand is None:
            return _is_null(key)
        if numeric and _number(operand):
            return Translation(_range(key, gte=operand, lte=operand), True)
        if not numeric and isinstance(operand, str):
            return _match(key, operand)
        return _FALSE
    if op == "$in":
        if numeric:
            return _any([_builtin(name, "$eq", v) for v in operand if _number(v)])
        texts = [v for v in operand if isinstance(v, str)]
        if not texts:
            return _FALSE
        return Translation(models.FieldCondition(key=key, match=models.MatchAny(any=texts)), True)
    if op in _RANGE_ARG:
        if numeric and _number(operand):
            return Translation(_range(key, **{_RANGE_ARG[op]: operand}), True)
        return _UNKNOWN if not numeric and isinstance(operand, str) else _FALSE
    # $contains / $startswith / $endswith: only strings ever match, and only text fields.
    return _UNKNOWN if not numeric and isinstance(operand, str) else _FALSE


def _page_cond(op: str, operand: Any) -> Translation:
    has = _not(_is_null("page_start"))
    if op == "$exists":
        return has if operand else _is_null("page_start")
    if op in ("$ne", "$nin"):
        return _not(_page_cond("$eq" if op == "$ne" else "$in", operand))
    if op == "$eq" and operand is None:
        return _is_null("page_start")
    if op == "$in":
        return _any([_page_cond("$eq", p) for p in operand if _whole(p)])
    if not _number(operand):
        return _FALSE
    if op == "$eq":
        if not _whole(operand):
            return _FALSE
        return Translation(
            models.Filter(must=[_range("page_start", lte=operand), _range("page_hi", gte=operand)]),
            True,
        )
    if op in ("$gt", "$gte"):
        return Translation(_range("page_hi", **{_RANGE_ARG[op]: operand}), True)
    if op in ("$lt", "$lte"):
        return Translation(_range("page_start", **{_RANGE_ARG[op]: operand}), True)
    return _FALSE


def _metadata(name: str, op: str, operand: Any) -> Translation:
    """A superset by value (any array element, any number type), or no restriction."""
    key = f"metadata.{name}"
    if op == "$eq" and operand is not None:
        if _number(operand):
            return Translation(_range(key, gte=operand, lte=operand), False)
        return Translation(_match(key, operand).cond, False)
    if op == "$in":
        return _any([_metadata(name, "$eq", v) for v in operand])
    if op in _RANGE_ARG and _number(operand):
        return Translation(_range(key, **{_RANGE_ARG[op]: operand}), False)
    return _UNKNOWN


def _condition(name: str, op: str, operand: Any, corpus: str) -> Translation:
    if name == CORPUS_FIELD:
        return _TRUE if _field({"corpus": corpus}, name, op, operand) else _FALSE
    if name == "page":
        return _page_cond(op, operand)
    if name in BUILTIN_FIELDS:
        return _builtin(name, op, operand)
    return _metadata(name, op, operand)


def translate(where: Mapping[str, Any] | None, corpus: str) -> Translation:
    """The Qdrant form of an already validated ``where`` (see the module docstring)."""
    if not where:
        return _TRUE
    parts: list[Translation] = []
    for key, condition in where.items():
        if key in ("$and", "$or"):
            items = [translate(item, corpus) for item in condition]
            parts.append(_all(items) if key == "$and" else _any(items))
        elif key in ENRICHMENT_FIELDS:
            parts.append(_UNKNOWN)  # element semantics: checked in Python
        elif isinstance(condition, Mapping):
            parts.extend(_condition(key, op, v, corpus) for op, v in condition.items())
        else:
            parts.append(_condition(key, "$eq", condition, corpus))
    return _all(parts)
