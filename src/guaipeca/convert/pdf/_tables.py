"""Ruled tables in PDF pages, found by PyMuPDF's ``find_tables`` and written as Markdown.

Rows whose cells hold several aligned lines (records without rules between them) are split
back into one row per line from the word positions; leading title rows are left to the
running text; empty columns and dot leaders are dropped (see the package docstring's notes
on tables). PyMuPDF objects are typed ``Any``, as in ``_document.py``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from guaipeca.convert.pdf._repair import SPACES, clean

_MAX_DRAWINGS_FOR_TABLES = 20_000  # beyond this, table detection is skipped (too slow)
_LEADER_IN_CELL = re.compile(r"\s+(?:\.\s?){2,}(?=\s|$)")  # "$85 ........" → "$85"


@dataclass(slots=True)
class Table:
    """One table: its Markdown and the page area it covers (x0, y0, x1, y1)."""

    markdown: str
    rect: tuple[float, float, float, float]


def may_have_table(page: Any) -> bool:
    """Cheap pre-check: ruled tables need at least two horizontal and two vertical edges.

    ``find_tables`` costs ~0.2 s on a dense page even when there is nothing to find, so pages
    whose vector graphics cannot form a grid are skipped.
    """
    drawings = page.get_cdrawings()
    if not drawings or len(drawings) > _MAX_DRAWINGS_FOR_TABLES:
        return False
    horizontal = vertical = 0
    for d in drawings:
        for item in d.get("items", ()):
            kind = item[0]
            if kind == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                if abs(ay - by) < 1 and abs(ax - bx) >= 3:
                    horizontal += 1
                elif abs(ax - bx) < 1 and abs(ay - by) >= 3:
                    vertical += 1
            elif kind in ("re", "qu"):
                if kind == "re":
                    x0, y0, x1, y1 = item[1]
                else:
                    xs = [p[0] for p in item[1]]
                    ys = [p[1] for p in item[1]]
                    x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
                w, h = abs(x1 - x0), abs(y1 - y0)
                if w >= 3 and h >= 3:
                    horizontal += 2
                    vertical += 2
                elif w >= 3:
                    horizontal += 1
                elif h >= 3:
                    vertical += 1
            if horizontal >= 2 and vertical >= 2:
                return True
    return False


def _cell_text(text: str | None) -> str:
    if not text:
        return ""
    text = _LEADER_IN_CELL.sub("", clean(text.replace("\n", " ")))
    return SPACES.sub(" ", text).strip()


def find_tables(page: Any, flags: int) -> list[Table]:
    found = page.find_tables()
    words: list[tuple[float, float, float, float, str]] | None = None
    out: list[Table] = []
    for tb in found.tables:
        raw_rows: list[list[str | None]] = tb.extract()
        row_cells: list[list[Any]] = [list(r.cells) for r in tb.rows]
        if len(raw_rows) != len(row_cells) or not raw_rows:
            continue
        ncols = max(len(r) for r in row_cells)
        # Leading rows with at most one filled cell are titles: left to the running text.
        first = 0
        while first < len(raw_rows) and sum(1 for c in raw_rows[first] if _cell_text(c)) <= 1:
            first += 1
        if first >= len(raw_rows):
            continue
        col_x0 = _column_lefts(row_cells, ncols)
        rows: list[list[str]] = []
        for k in range(first, len(raw_rows)):
            cells = list(raw_rows[k]) + [None] * (ncols - len(raw_rows[k]))
            if any(c and "\n" in c for c in cells) and col_x0 is not None:
                if words is None:
                    words = [
                        (float(w[0]), float(w[1]), float(w[2]), float(w[3]), str(w[4]))
                        for w in page.get_text("words", flags=flags)
                    ]
                starts = [
                    j < len(row_cells[k]) and row_cells[k][j] is not None for j in range(ncols)
                ]
                x0, y0, x1, y1 = (float(v) for v in tb.rows[k].bbox)
                if k + 1 < len(raw_rows):  # cells spanning rows reach below: stop at the next
                    y1 = min(y1, max(y0, float(tb.rows[k + 1].bbox[1])))
                split = _split_row(words, (x0, y0, x1, y1), col_x0, starts, header=k == first)
                if split is not None:
                    rows.extend(split)
                    continue
            rows.append([_cell_text(c) for c in cells])
        markdown = _table_markdown(rows)
        if markdown is None:
            continue
        boxes = [tb.rows[k].bbox for k in range(first, len(raw_rows))]
        rect = (
            min(float(b[0]) for b in boxes),
            min(float(b[1]) for b in boxes),
            max(float(b[2]) for b in boxes),
            max(float(b[3]) for b in boxes),
        )
        out.append(Table(markdown=markdown, rect=rect))
    return out


def _column_lefts(row_cells: list[list[Any]], ncols: int) -> list[float] | None:
    lefts: list[float] = []
    for j in range(ncols):
        xs = [float(r[j][0]) for r in row_cells if j < len(r) and r[j] is not None]
        if not xs:
            return None
        lefts.append(min(xs))
    return lefts if lefts == sorted(lefts) else None


def _split_row(
    words: list[tuple[float, float, float, float, str]],
    bbox: Sequence[float],
    col_x0: list[float],
    cell_starts: list[bool],
    *,
    header: bool = False,
) -> list[list[str]] | None:
    """Rebuild one grid row whose cells hold several records, one row per visual line.

    Tables without horizontal rules come out of ``find_tables`` as a few tall rows whose
    cells hold many lines. Words are grouped into lines by their vertical centre and into
    the table's columns by their horizontal centre. Inside a cell this row merges across
    several columns (``cell_starts[j]`` is False where no cell of the row begins), words at
    normal word spacing stay in the cell of the phrase they continue (a note spanning the
    table stays one cell). A line that fills only one cell continues the row above (a
    wrapped cell); in the ``header`` row, so does a line whose cells all continue filled cells
    of the line above ("DATE" / "POSTED"). Returns None when the row does not look like
    several records.
    """
    x0, y0, x1, y1 = (float(v) for v in bbox)
    inside = [
        w
        for w in words
        if x0 - 1 <= (w[0] + w[2]) / 2 <= x1 + 1 and y0 - 1 <= (w[1] + w[3]) / 2 <= y1 + 1
    ]
    if not inside:
        return None
    inside.sort(key=lambda w: ((w[1] + w[3]) / 2, w[0]))
    lines: list[list[tuple[float, float, float, float, str]]] = []
    ref_y = ref_h = 0.0
    for w in inside:
        yc, h = (w[1] + w[3]) / 2, max(w[3] - w[1], 0.1)
        if lines and abs(yc - ref_y) <= 0.45 * min(h, ref_h):
            lines[-1].append(w)
        else:
            lines.append([w])
            ref_y, ref_h = yc, h
    ncols = len(col_x0)
    rows: list[list[str]] = []
    for line in lines:
        cells: list[list[str]] = [[] for _ in range(ncols)]
        last: tuple[float, float, float, float, str] | None = None
        cj = 0
        for w in sorted(line, key=lambda w: w[0]):
            j = max(0, min(ncols - 1, bisect_right(col_x0, (w[0] + w[2]) / 2) - 1))
            if (
                last is not None
                and j > cj
                and w[0] - last[2] <= 0.5 * (w[3] - w[1])
                and not any(cell_starts[cj + 1 : j + 1])
            ):
                j = cj  # same phrase, same merged cell
            cells[j].append(w[4])
            last, cj = w, j
        row = [_cell_text(" ".join(c)) for c in cells]
        filled = [j for j, c in enumerate(row) if c]
        above = [j for j, c in enumerate(rows[-1]) if c] if rows else []
        if (len(filled) == 1 and len(above) >= 2) or (
            header and filled and set(filled) <= set(above)
        ):
            for j in filled:
                rows[-1][j] = (rows[-1][j] + " " + row[j]).strip()
        else:
            rows.append(row)
    if header and len(rows) >= 2:
        # A header cell set higher than its neighbours ("Cost on U.S." over "operators").
        lone = [j for j, c in enumerate(rows[0]) if c]
        if len(lone) == 1 and rows[1][lone[0]]:
            j = lone[0]
            rows[1][j] = rows[0][j] + " " + rows[1][j]
            del rows[0]
    if len(rows) < 2 or not any(sum(1 for c in r if c) >= 2 for r in rows):
        return None
    return rows


def _table_markdown(rows: list[list[str]]) -> str | None:
    rows = [r for r in rows if any(r)]
    if len(rows) < 2:
        return None
    ncols = max(len(r) for r in rows)
    rows = [r + [""] * (ncols - len(r)) for r in rows]
    keep = [j for j in range(ncols) if any(r[j] for r in rows)]
    if len(keep) < 2:
        return None
    out: list[str] = []
    for i, r in enumerate(rows):
        cells = [r[j].replace("|", "\\|") for j in keep]
        out.append("| " + " | ".join(cells) + " |")
        if i == 0:
            out.append("|" + "---|" * len(keep))
    return "\n".join(out)
