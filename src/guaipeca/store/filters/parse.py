"""Filters as users write them: JSON text (CLI ``--where``, MCP arguments) and the
``extension`` spellings that all mean the same stored value."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from guaipeca.errors import InvalidFilterError
from guaipeca.store.filters.rules import show
from guaipeca.store.filters.sql import validate_where

__all__ = ["normalise_where", "parse_where_json"]


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
            raise InvalidFilterError(f"filter: key {show(key)} appears twice in one object")
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
            f"filter: expected a JSON object of field -> condition, got {show(value)}"
        )
    validate_where(value)
    return value
