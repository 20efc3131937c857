"""DOCX, PPTX and HTML through markitdown; XLSX through openpyxl. All produce Markdown.

markitdown's own converters for each format are called directly, not through
``MarkItDown().convert``: the dispatcher would sniff every file with magika (an ONNX model
load), fall back to other converters when one fails (its zip converter would unpack and
convert every entry of a broken DOCX), look for ``exiftool`` on the PATH and build a
``requests`` session. Called directly, the DOCX/PPTX/HTML converters only read the bytes
they are given: no URL is ever passed, no plugin is loaded, no LLM client is configured
(so no image captioning), and mammoth's external-file access stays off (linked images are
not opened). Every zip is checked for bombs before a library opens it (every entry inflated
in bounded steps), and at most ``MAX_CONCURRENT_OFFICE`` conversions run at once.

XLSX does not use markitdown: its xlsx converter needs pandas (84 MB installed) for what
openpyxl in read-only mode does in a few lines, with bounded memory.
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from guaipeca.convert._budget import check_budget
from guaipeca.convert._limits import (
    ZIP_MAX_ENTRIES,
    captured_warnings,
    check_office_zip,
    conversion_slot,
)
from guaipeca.errors import ConversionError, NoTextError

__all__ = ["OfficeResult", "convert_docx", "convert_html", "convert_pptx", "convert_xlsx"]


@dataclass(frozen=True, slots=True)
class OfficeResult:
    """Markdown text (LF only), slide start offsets for PPTX, and warnings."""

    text: str
    page_starts: tuple[int, ...] | None
    warnings: tuple[str, ...]


# Options for markitdown's HTML-to-Markdown step (markdownify). ATX headings ("#"), and no
# backslash escapes of "_" and "*": the text is indexed and quoted, and "snake\_case" would
# match neither a query nor what the reader sees in the document.
_MD_OPTIONS: dict[str, Any] = {
    "heading_style": "ATX",
    "escape_underscores": False,
    "escape_asterisks": False,
    "table_infer_header": True,  # a table without <th> uses its first row as the header
    "keep_data_uris": False,
}

# Word's "Title" is the document's "#"; "Heading 1" is a "##" section, and so on down. The
# chunker gives every chunk the path (title "#", section "##"), which is what Word's
# structure means. Style ids (p.Heading1) and names (both capitalisations) are matched.
_DOCX_STYLE_MAP = "\n".join(
    [
        "p.Title => h1:fresh",
        "p[style-name='Title'] => h1:fresh",
        "p[style-name='title'] => h1:fresh",
        *(f"p.Heading{n} => h{min(n + 1, 6)}:fresh" for n in range(1, 7)),
        *(f"p[style-name='Heading {n}'] => h{min(n + 1, 6)}:fresh" for n in range(1, 7)),
        *(f"p[style-name='heading {n}'] => h{min(n + 1, 6)}:fresh" for n in range(1, 7)),
        "p.Heading => h2:fresh",
        "p[style-name='Heading'] => h2:fresh",
    ]
)

# -- Markdown tidying --------------------------------------------------------------------

# Vertical tab (PowerPoint's line break inside a paragraph) and form feed become newlines;
# other C0 controls and DEL carry no text and are dropped.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _control(m: re.Match[str]) -> str:
    return "\n" if m.group(0) in "\x0b\x0c" else ""


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# Image syntax markitdown writes for pictures (``![alt](data:image/png;base64...)``,
# ``![](Picture3.jpg)``), possibly wrapped in a link (``[![](thumb.jpg)](full.webm)``), and
# the empty links an image leaves behind. Pictures are not text: the canonical Markdown
# drops them (and with them data URIs and media URLs).
_LINKED_IMAGE = re.compile(r"\[\s*!\[[^\]\n]*\]\([^)\n]*\)\s*\]\([^)\n]*\)")
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
_EMPTY_LINK = re.compile(r"(?<!!)\[\s*\]\([^)\n]*\)")
_EMPTY_ROW = re.compile(r" {0,3}\|(?:\s*\|)+")
_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_EMPTY_ATX = re.compile(r" {0,3}#{1,6}[ \t]*$")
_BLANK_RUNS = re.compile(r"\n{3,}")


def drop_images(line: str) -> str:
    """``line`` without Markdown image syntax (linked or not) and the empty links left."""
    if "](" not in line:
        return line
    body = line.lstrip()
    body = _EMPTY_LINK.sub("", _IMAGE.sub("", _LINKED_IMAGE.sub("", body)))
    return line[: len(line) - len(line.lstrip())] + body.lstrip()


def tidy_markdown(markdown: str, *, images: bool = True) -> str:
    """Canonical Markdown: LF line ends, no trailing spaces, no empty headings, tables set
    off by blank lines, at most one blank line in a row; ends with one newline (or is "").
    ``images=False`` drops image syntax outside code blocks (see ``drop_images``) and the
    table body rows left empty by it."""
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    if _CONTROL.search(text):  # rare: skip the substitution pass over big texts
        text = _CONTROL.sub(_control, text)
    out: list[str] = []
    fence: str | None = None
    prev_row = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        m = _FENCE.match(line)
        if fence is None and not images:
            line = drop_images(line).rstrip()
            if prev_row and _EMPTY_ROW.fullmatch(line):
                continue  # a body row that held only pictures (a header row stays)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if m:
            fence = m.group(1)
        elif _EMPTY_ATX.match(line):
            continue
        row = line.lstrip().startswith("|")
        if out and out[-1]:
            if row and not prev_row and not _ATX.match(out[-1]):
                out.append("")  # a table starts a block of its own
            elif prev_row and not row and line:
                out.append("")  # and ends one
        out.append(line)
        prev_row = row
    tidy = _BLANK_RUNS.sub("\n\n", "\n".join(out)).strip()
    return tidy + "\n" if tidy else ""


def _nonempty(text: str, kind: str) -> str:
    if not text.strip():
        raise NoTextError(f"no text found in the {kind}")
    return text


# -- DOCX ----------------------------------------------------------------------------------


def convert_docx(data: bytes, *, max_zip_entries: int = ZIP_MAX_ENTRIES) -> OfficeResult:
    """DOCX → Markdown: Title as ``#``, Heading N as ``#`` * (N + 1), tables as Markdown
    tables, lists; pictures are dropped. ``max_zip_entries``: ``limits.max_zip_entries``.

    Raises:
        ConversionError: not a DOCX, a zip bomb, or no text in it.
    """
    check_office_zip(data, "DOCX", max_entries=max_zip_entries)
    from markitdown import StreamInfo
    from markitdown.converters import DocxConverter

    warned: list[str] = []
    with conversion_slot(), captured_warnings(warned):
        result = DocxConverter().convert(  # type: ignore[no-untyped-call]
            io.BytesIO(data),
            StreamInfo(extension=".docx"),
            style_map=_DOCX_STYLE_MAP,
            **_MD_OPTIONS,
        )
    text = _nonempty(tidy_markdown(result.markdown, images=False), "DOCX")
    return OfficeResult(text, None, tuple(warned))


# -- PPTX ----------------------------------------------------------------------------------

_HEADING_LINE = re.compile(r"^#{1,6} .*$", re.MULTILINE)
_SLIDE_MARK = re.compile(r"^<!-- Slide number: (\d+) -->$", re.MULTILINE)


def convert_pptx(data: bytes, *, max_zip_entries: int = ZIP_MAX_ENTRIES) -> OfficeResult:
    """PPTX → Markdown, one "page" per slide (``page_starts`` holds each slide's offset).

    The first slide's title is the document's ``#``; later slide titles are ``##``
    sections. Tables and chart data become Markdown tables; speaker notes follow each slide
    under ``### Notes:``; pictures are dropped. ``max_zip_entries``:
    ``limits.max_zip_entries``.

    Raises:
        ConversionError: not a PPTX, a zip bomb, or no text in it.
    """
    check_office_zip(data, "PPTX", max_entries=max_zip_entries)
    from markitdown import StreamInfo
    from markitdown.converters import PptxConverter

    warned: list[str] = []
    with conversion_slot(), captured_warnings(warned):
        result = PptxConverter().convert(  # type: ignore[no-untyped-call]
            io.BytesIO(data), StreamInfo(extension=".pptx"), **_MD_OPTIONS
        )
    raw = result.markdown.replace("\r\n", "\n").replace("\r", "\n")
    # A line break inside a title (python-pptx gives "\v") must not split the heading.
    raw = _HEADING_LINE.sub(lambda m: m.group(0).replace("\v", " "), raw)
    marks = list(_SLIDE_MARK.finditer(raw))
    numbers = [int(m.group(1)) for m in marks]
    if not marks or numbers != list(range(1, len(marks) + 1)) or raw[: marks[0].start()].strip():
        # Not the layout we know (or a slide's own text imitates a marker): no slide pages.
        text = _nonempty(tidy_markdown(_SLIDE_MARK.sub("", raw), images=False), "PPTX")
        return OfficeResult(text, None, tuple(warned))
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(raw)
        body = raw[m.end() : end]
        if i > 0:  # later slide titles are sections under the first slide's title
            body = re.sub(r"^# ", "## ", body, flags=re.MULTILINE)
        body = tidy_markdown(body, images=False)
        starts.append(length)
        if body:
            chunk = body + "\n"  # blank line between slides
            parts.append(chunk)
            length += len(chunk)
    text = _nonempty("".join(parts).rstrip("\n") + "\n", "PPTX")
    return OfficeResult(text, tuple(min(s, len(text)) for s in starts), tuple(warned))


# -- HTML ----------------------------------------------------------------------------------

# Page chrome, not content. Generic landmarks first, then MediaWiki's (Wikipedia and other
# wikis are the commonest saved pages): edit links, tables of contents, navigation boxes,
# citation markers, category links, "From Wikipedia", language menus.
_JUNK_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "frame",
        "object",
        "embed",
        "svg",
        "img",
        "picture",
        "video",
        "audio",
        "source",
        "track",
        "map",
        "canvas",
        "nav",
        "aside",
        "footer",
        "button",
        "input",
        "select",
        "textarea",
        "dialog",
        "link",
        "meta",
    }
)
_JUNK_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_JUNK_IDS = frozenset(
    {"jump-to-nav", "siteSub", "contentSub", "contentSub2", "toc", "vector-toc", "catlinks"}
)
_JUNK_CLASSES = frozenset(
    {
        "mw-editsection",
        "mw-jump-link",
        "mw-indicators",
        "toc",
        "vector-toc",
        "navbox",
        "vertical-navbox",
        "catlinks",
        "printfooter",
        "noprint",
        "mw-cite-backlink",
        "vector-page-toolbar",
        "vector-dropdown",
        "mw-portlet",
        "navbox-styles",
        "sistersitebox",
        "mw-empty-elt",
    }
)


def _is_junk(tag: Any) -> bool:
    # One pass of plain attribute checks: a CSS selector list (soupsieve) over a 250 KB
    # Wikipedia page costs more than parsing it.
    if tag.name in _JUNK_TAGS:
        return True
    attrs = tag.attrs
    if not attrs:
        return False
    if attrs.get("role") in _JUNK_ROLES or attrs.get("id") in _JUNK_IDS:
        return True
    if "hidden" in attrs or attrs.get("aria-hidden") == "true":
        return True
    classes = attrs.get("class") or ()
    if any(c in _JUNK_CLASSES for c in classes):
        return True
    if tag.name == "sup" and "reference" in classes:  # citation markers: "[12]"
        return True
    return tag.name == "header" and tag.find(["h1", "h2"]) is None


_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9._:-]+)""")
# WHATWG: these labels mean windows-1252 in HTML.
_AS_CP1252 = {"ascii", "us-ascii", "latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1"}


def _declared_charset(data: bytes) -> str | None:
    head = data[:4096]
    m = _META_CHARSET.search(head) or _XML_ENCODING.match(head)
    if m is None:
        return None
    label = m.group(1).decode("ascii").lower()
    if label in _AS_CP1252:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A UTF-16/32 declaration in ASCII-readable bytes is wrong by construction.
    return None if name.startswith(("utf-16", "utf-32")) else name


def _drop_junk(soup: Any) -> None:
    """Remove junk elements without descending into what is removed.

    (Iterative, and no ``Tag.decomposed`` check: on bs4 4.15 that property falls back to a
    subtree search for tags that were not decomposed, which is quadratic on deep nesting.)
    """
    from bs4 import Tag

    stack = [soup]
    while stack:
        for child in list(stack.pop().children):
            if isinstance(child, Tag):
                if _is_junk(child):
                    child.decompose()
                else:
                    stack.append(child)


def _decode_html(data: bytes, warned: list[str]) -> str:
    """Decode by BOM, else the declared charset, else UTF-8, else Windows-1252 (warned)."""
    for bom, codec in (
        (b"\xef\xbb\xbf", "utf-8"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    if b"\x00" in data:
        raise ConversionError("looks binary (NUL bytes), not HTML")
    declared = _declared_charset(data)
    if declared is not None:
        try:
            return data.decode(declared)
        except UnicodeDecodeError:
            warned.append(f"some bytes are not valid {declared} as declared; replaced")
            return data.decode(declared, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        warned.append("no charset declared and not UTF-8; read as Windows-1252")
        return data.decode("cp1252", errors="replace")


def _main_content(soup: Any) -> Any:
    """The page's main element if it marks one (``<main>``, ``role=main``, a lone
    ``<article>``), else ``<body>``."""
    candidates = soup.find_all("main") or soup.find_all(attrs={"role": "main"})
    if not candidates:
        articles = soup.find_all("article")
        candidates = articles if len(articles) == 1 else []
    if candidates:
        return max(candidates, key=lambda tag: len(tag.get_text()))
    return soup.body or soup


def convert_html(data: bytes) -> OfficeResult:
    """HTML → Markdown of the page's main content, its ``<h1>`` (or ``<title>``) first.

    Scripts, styles, navigation, headers, footers, sidebars, forms, images and media
    (``img``, ``picture``, ``video``, ``audio``) and MediaWiki chrome (edit links, navigation
    boxes, tables of contents) are dropped; links keep their text, not their URL (a link's
    target is not the document's text, and media URLs were most of them). Nothing the page
    references is ever fetched.

    Raises:
        ConversionError: binary data, or no text in the page.
    """
    from bs4 import BeautifulSoup
    from markitdown.converters import HtmlConverter

    warned: list[str] = []
    with captured_warnings(warned):
        soup = BeautifulSoup(_decode_html(data, warned), "html.parser")
        _drop_junk(soup)
        root = _main_content(soup)
        h1 = soup.find("h1")
        if h1 is not None and not any(p is root for p in h1.parents):
            root.insert(0, h1.extract())
        elif h1 is None and soup.title is not None and soup.title.get_text(strip=True):
            title = soup.new_tag("h1")
            title.string = soup.title.get_text(" ", strip=True)
            root.insert(0, title)
        for a in root.find_all("a"):
            a.unwrap()
        for caption in root.find_all("caption"):
            # markdownify only gives a table its header row when the first <tr> has no
            # preceding sibling, so the caption moves out, as a paragraph before the table.
            table = caption.find_parent("table")
            caption.extract()
            caption.name = "p"
            if table is not None:
                table.insert_before(caption)
        for piece in root.find_all(string=lambda t: "|" in t):
            if piece.find_parent(["td", "th"]) is not None:  # a "|" would split the cell
                piece.replace_with(piece.replace("|", "\\|"))
        body = root.decode_contents() if root.name in ("body", "[document]") else str(root)
        result = HtmlConverter().convert_string(f"<html><body>{body}</body></html>", **_MD_OPTIONS)
    text = _nonempty(tidy_markdown(result.markdown, images=False), "HTML page")
    return OfficeResult(text, None, tuple(warned))


# -- XLSX ----------------------------------------------------------------------------------

XLSX_MAX_CELLS = 5_000_000
"""Cells read (empty ones included) before the rest of a workbook is skipped, with a warning."""
XLSX_MAX_ROWS = 200_000
"""Non-empty rows kept before the rest of a workbook is skipped, with a warning."""

_CELL_BREAK = re.compile(r"[\r\n\v\f\u2028\u2029]")
_CELL_BREAKS = re.compile(r"\s*[\r\n\v\f\u2028\u2029]+\s*")


def _cell_text(value: object) -> str:
    """A cell's cached value as one line of table text (numbers as Excel shows 15 digits)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, float):
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}"
    elif isinstance(value, datetime):
        text = value.date().isoformat() if value.time() == time(0) else value.isoformat(" ")
    elif isinstance(value, date | time):
        text = value.isoformat()
    elif isinstance(value, timedelta):
        text = str(value)
    else:
        text = str(value)
    if _CELL_BREAK.search(text):  # the full pattern is slow to scan on every cell
        text = _CELL_BREAKS.sub(" ", text)
    return text.strip().replace("|", "\\|")


def _table(rows: Sequence[Sequence[str]], cols: Sequence[int]) -> str:
    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(row[c] if c < len(row) else "" for c in cols) + " |"

    head, *body = rows
    return "\n".join([line(head), "|" + "---|" * len(cols), *(line(r) for r in body)])


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of True."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            out.append((start, i))
            start = None
    return out


def _block_tables(rows: list[list[str]]) -> Iterable[str]:
    """Tables of one block of consecutive non-empty rows. Columns empty in the whole block
    separate side-by-side tables; within each, empty rows separate tables again."""
    width = max(len(r) for r in rows)
    used = [any(c < len(r) and r[c] for r in rows) for c in range(width)]
    for lo, hi in _runs(used):
        filled = [any(r[lo:hi]) for r in rows]
        for top, bottom in _runs(filled):
            part = rows[top:bottom]
            cols = [c for c in range(lo, hi) if any(c < len(r) and r[c] for r in part)]
            yield _table(part, cols)


def convert_xlsx(
    data: bytes, *, max_cells: int = XLSX_MAX_CELLS, max_zip_entries: int = ZIP_MAX_ENTRIES
) -> OfficeResult:
    """XLSX → Markdown: each non-empty sheet as ``## Sheet name`` and its Markdown tables.

    Cached formula results are used (formulas never saved with a value read as empty).
    Blank rows and columns separate tables; the first row of each is its header. Reading
    stops after ``max_cells`` cells (``limits.max_cells``) or ``XLSX_MAX_ROWS`` rows, with
    a warning naming the limit. ``max_zip_entries``: ``limits.max_zip_entries``.

    Raises:
        ConversionError: not an XLSX, a zip bomb, or every sheet empty.
    """
    check_office_zip(data, "XLSX", max_entries=max_zip_entries)
    import openpyxl

    warned: list[str] = []
    sections: list[str] = []
    scanned = kept = 0
    with conversion_slot(), captured_warnings(warned):
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            for ws in wb.worksheets:
                # Trust the cells, not the declared dimension: a sheet claiming A1:XFD1048576
                # would otherwise pad every row to 16,384 cells.
                ws.reset_dimensions()
                tables: list[str] = []
                block: list[list[str]] = []
                stopped = False
                for n, values in enumerate(ws.iter_rows(values_only=True), start=1):
                    if n % 1024 == 0:
                        check_budget()  # the file's time budget
                    scanned += max(1, len(values))
                    if scanned > max_cells:
                        warned.append(
                            f"sheet {ws.title!r} cut at row {n}: the workbook has more than "
                            f"{max_cells:,} cells, the limit limits.max_cells"
                        )
                        stopped = True
                        break
                    if kept >= XLSX_MAX_ROWS:
                        warned.append(
                            f"sheet {ws.title!r} cut at row {n}: the workbook has more than "
                            f"{XLSX_MAX_ROWS:,} non-empty rows"
                        )
                        stopped = True
                        break
                    row = [_cell_text(v) for v in values]
                    if any(row):
                        block.append(row)
                        kept += 1
                    elif block:
                        tables.extend(_block_tables(block))
                        block = []
                if block:
                    tables.extend(_block_tables(block))
                if tables:
                    title = ws.title.strip() or "Sheet"
                    sections.append(f"## {title}\n\n" + "\n\n".join(tables))
                if stopped:
                    break
        finally:
            wb.close()
    text = _nonempty("\n\n".join(sections), "XLSX (every sheet is empty)")
    return OfficeResult(tidy_markdown(text), None, tuple(warned))
