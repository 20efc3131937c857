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

from guaipeca.store.filters.parse import normalise_where, parse_where_json
from guaipeca.store.filters.rules import (
    BUILTIN_FIELDS,
    CORPUS_FIELD,
    ENRICHMENT_FIELDS,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_IN_VALUES,
    MAX_TOTAL_VALUES,
    OPERATORS,
)
from guaipeca.store.filters.sql import compile_where, validate_where

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
