"""The ``where`` dialect (:mod:`guaipeca.store.filters`) compiled to PostgreSQL over JSONB.

The compiler is the embedded backend's (:mod:`guaipeca.store.filters.sql`), with the SQL of
PostgreSQL for what differs: metadata read with ``#>`` from ``d.metadata`` (JSONB) and
typed with ``jsonb_typeof``, strings compared in the "C" collation (code point order, as
SQLite's BINARY), arrays searched with ``@>``. Field names never reach the SQL text (a
metadata path is a ``text[]`` parameter) and every value is a bound parameter, so a filter
cannot inject SQL; the semantics, type-strictness included, are the embedded backend's, and
the tests compare both on random filters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from guaipeca.store.filters import ENRICHMENT_FIELDS
from guaipeca.store.filters.rules import Scalar
from guaipeca.store.filters.sql import FALSE, TRUE, Dialect, Field, Sql, compile_where, fill

__all__ = ["POSTGRES", "PostgresDialect", "compile_pg_where"]

_NUMERIC: Final = frozenset({"modified", "position"})


def _typed(json_value: Sql) -> Sql:
    """The SQLite json_type name of a JSONB value (NULL when the key is absent)."""
    return fill(
        "CASE jsonb_typeof({}) WHEN 'string' THEN 'text' WHEN 'number' THEN 'real' "
        "WHEN 'boolean' THEN ({} #>> ARRAY[]::text[]) ELSE jsonb_typeof({}) END",
        json_value,
        json_value,
        json_value,
    )


class PostgresDialect(Dialect):
    """PostgreSQL's SQL for the filter compiler (``?`` marks become ``%s`` at the end)."""

    def column(self, name: str, expr: str) -> Field:
        # A column has one type: comparing it with a value of the other kind is a NULL
        # of the right type (the kind check makes it false), never a type error.
        numeric = name in _NUMERIC
        return Field(
            value=Sql(expr),
            kind=Sql(
                f"CASE WHEN {expr} IS NULL THEN 'null' ELSE '{'real' if numeric else 'text'}' END"
            ),
            exists=Sql(f"{expr} IS NOT NULL"),
            text=Sql("NULL::text" if numeric else f'({expr} COLLATE "C")'),
            number=Sql(expr if numeric else "NULL::numeric"),
        )

    def metadata(self, name: str) -> Field:
        value = fill("(d.metadata #> {})", name.split("."))
        number = fill(
            "CASE WHEN jsonb_typeof({}) = 'number' THEN ({} #>> ARRAY[]::text[])::numeric END",
            value,
            value,
        )
        return Field(
            value=value,
            kind=_typed(value),
            exists=fill("{} IS NOT NULL", value),
            json_path=name,
            text=fill('(({} #>> ARRAY[]::text[]) COLLATE "C")', value),
            number=number,
        )

    def element(self) -> Field:
        return Field(
            value=Sql('((ee.v #>> ARRAY[]::text[]) COLLATE "C")'), kind=Sql("'text'"), exists=TRUE
        )

    def some_element(self, name: str, cond: Sql) -> Sql:
        key = ENRICHMENT_FIELDS[name].removeprefix("$.")
        lst = fill("(c.enrichment -> {}::text)", key)
        where = "" if cond == TRUE else " AND ({})"
        template = (
            "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof({}) = 'array' "
            "THEN {} ELSE '[]'::jsonb END) AS ee(v) WHERE jsonb_typeof(ee.v) = 'string'"
            + where
            + ")"
        )
        return fill(template, lst, lst, *(() if cond == TRUE else (cond,)))

    def substring(self, field: Field, operand: str) -> Sql:
        return fill("strpos({}, {}::text) > 0", field.as_text(), operand)

    def ends_with(self, field: Field, operand: str) -> Sql:
        return fill("right({}, {}::int) = {}::text", field.as_text(), len(operand), operand)

    def array_has(self, field: Field, operand: Scalar) -> Sql:
        # JSONB containment: top-level elements only, numbers by value, kinds kept apart.
        if operand is None:
            return FALSE
        return fill(
            "CASE WHEN jsonb_typeof({}) = 'array' THEN {} @> {}::jsonb ELSE false END",
            field.value,
            field.value,
            json.dumps([operand]),
        )

    def page_in(self, pages: list[int]) -> Sql:
        return fill(
            f"EXISTS (SELECT 1 FROM unnest({{}}::bigint[]) AS p(v) WHERE p.v BETWEEN "
            f"{self.page_lo} AND {self.page_hi})",
            pages,
        )


POSTGRES = PostgresDialect()


def compile_pg_where(where: Mapping[str, Any] | None, *, corpus: str) -> tuple[str, list[Any]]:
    """``where`` as a PostgreSQL boolean expression over ``c`` (chunks) and ``d``
    (documents) with ``%s`` parameters, and its parameters.

    Raises:
        InvalidFilterError: as :func:`~guaipeca.store.filters.compile_where`.
    """
    text, params = compile_where(where, corpus=corpus, dialect=POSTGRES)
    if text in ("1", "0"):
        return ("TRUE" if text == "1" else "FALSE"), []
    # No fragment holds a literal '?' or '%': every '?' is a parameter mark.
    return text.replace("?", "%s"), params
