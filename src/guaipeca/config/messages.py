"""Configuration problems worded for people (loading.py): one line per problem,
``key.path: message (in FILE)``, pydantic's wording rewritten ("must be >= 0, got -1",
"unknown key (did you mean 'model'?)"), and the values of secret and unknown keys never shown.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, get_args, get_origin

from pydantic import (
    BaseModel,
    SecretStr,
    ValidationError,
)

from guaipeca.config.legacy import ORIGINAL_KEYS
from guaipeca.errors import KeyProblems, dotted_key


def _strip_optional(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and type(None) in get_args(annotation):
        return args[0]
    return annotation


def annotation_at(root: type[BaseModel] | None, loc: tuple[Any, ...]) -> Any:
    """The type at ``loc`` below ``root`` (``None`` when the path leaves the schema)."""
    current: Any = root
    for part in loc:
        current = _strip_optional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            current = field.annotation
        elif isinstance(part, int) and get_origin(current) in (list, tuple) and get_args(current):
            current = get_args(current)[0]
        else:
            return None
    return _strip_optional(current)


def _show(value: object) -> str:
    """A short, YAML-flavoured rendering of a bad value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) or (isinstance(value, int) and abs(value) < 10**30):
        return repr(value)
    if isinstance(value, int):
        return "a very large number"
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def value_kind(value: object) -> str:
    """What a value is, without showing it (a file holding only a pasted token)."""
    kinds = {str: "text", bool: "true/false", int: "a number", float: "a number"}
    return kinds.get(type(value)) or _show(value)


_TYPE_MESSAGES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "int_type": "must be a whole number",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be text",
        "list_type": "must be a list",
        "tuple_type": "must be a list",
        "model_type": "must be a section (a mapping of keys)",
        "model_attributes_type": "must be a section (a mapping of keys)",
        "dict_type": "must be a mapping",
        "path_type": "must be a path",
    }
)

_BOUNDS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "greater_than_equal": ("ge", ">="),
        "greater_than": ("gt", ">"),
        "less_than_equal": ("le", "<="),
        "less_than": ("lt", "<"),
    }
)


def _message(error: Mapping[str, Any], secret: bool) -> str:
    """A sentence a user understands, echoing the bad value only when it cannot be a
    secret (never for secret keys, never for unknown keys: a misspelt `auth_tokn: …`
    holds a token)."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    got = "" if secret else f", got {_show(value)}"
    if kind == "missing":
        return "required key is missing"
    if kind in _TYPE_MESSAGES:
        text = _TYPE_MESSAGES[kind] + got
        if kind == "string_type" and isinstance(value, int | float | bool):
            text += " (put it in quotes)"
        return text
    if kind in _BOUNDS:
        name, op = _BOUNDS[kind]
        bound = ctx.get(name)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # "must be >= 0", as the user would write it
        return f"must be {op} {bound}{got}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    msg = str(error.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """``"did you mean 'model'?"`` for the choice closest to a misspelt ``word`` (a config
    key, a corpus name, a tool argument), or None when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _unknown_key(root: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    parent = annotation_at(root, loc[:-1])
    if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
        return "unknown key"
    keys = list(parent.model_fields)
    # The original Guaipeca's names are accepted too, so a misspelling of one is suggested.
    old = [key for (section, key) in ORIGINAL_KEYS if loc[-2:-1] == (section,)]
    hint = did_you_mean(str(loc[-1]), keys + old)
    return f"unknown key ({hint or 'valid keys: ' + ', '.join(keys)})"


def _problems(
    err: ValidationError, root: type[BaseModel] | None
) -> list[tuple[tuple[Any, ...], str]]:
    out: list[tuple[tuple[Any, ...], str]] = []
    for error in err.errors():
        loc = tuple(error["loc"])
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, KeyProblems):
            out.extend((loc + sub, msg) for sub, msg in cause.problems)
        elif error["type"] in ("extra_forbidden", "invalid_key"):
            out.append((loc, _unknown_key(root, loc)))
        else:
            secret = annotation_at(root, loc) is SecretStr
            out.append((loc, _message(error, secret)))
    return out


def format_problems(
    err: ValidationError,
    source: str | os.PathLike[str] | None,
    from_env: Mapping[tuple[Any, ...], str] | None = None,
    root: type[BaseModel] | None = None,
    origin: Mapping[tuple[Any, ...], str] | None = None,
) -> str:
    """``origin``: where a key's value came from when not from the key itself (an old
    system's key or variable, config/legacy.py), said in the message."""
    parts = []
    for loc, msg in _problems(err, root):
        var = next((v for k, v in (from_env or {}).items() if loc[: len(k)] == k), None)
        old = next((v for k, v in (origin or {}).items() if loc[: len(k)] == k), None)
        if var is not None:
            where = f" (from environment variable {var})"
        elif old is not None and old.isupper():
            where = f" (from A-RAG-OG's {old})"
        elif old is not None:
            where = f" (written as {old}" + (f" in {os.fspath(source)})" if source else ")")
        elif source is not None:
            where = f" (in {os.fspath(source)})"
        else:
            where = ""
        parts.append(" ".join(f"{dotted_key(loc)}: {msg}{where}".split()))
    return "; ".join(parts)
