"""A docutils doctree → Markdown, the product's canonical text.

Sections become ATX headings at the depth docutils gives them (the first adornment style
met is ``#``, the next ``##``, ...; deeper than six stays ``######``), with their title as
plain text, so heading trails and the ToC read "QuerySet API reference", not markup.
Literal blocks, doctest blocks and code directives become fenced code, so nothing in them
can pass for a heading. Inline markup keeps its Markdown form (emphasis, strong, code,
external links); what has none (roles, substitutions, footnote references) is its text.
Lines of running text that Markdown would read as block markup (a ``#``, ``>``, ``-``
or ``1.`` at the start, a ``===`` underline) are escaped with a backslash.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from docutils import nodes

__all__ = ["to_markdown"]

_MAX_LEVEL = 6
# What opens a Markdown block at a line start: heading, quote, bullet, number, setext
# underline, table row, fence.
_BLOCK_START = re.compile(
    r"(?:#{1,6}(?:\s|$)|>|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|[=-]+\s*$|\||`{3}|~{3})"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_SKIPPED = (
    nodes.comment,
    nodes.substitution_definition,
    nodes.system_message,
    nodes.raw,
    nodes.pending,
    nodes.decoration,
    nodes.meta,
)


def _escape_lines(text: str) -> str:
    """Running text with each line's leading block marker escaped (a backslash before its
    punctuation: "1\\." for a number, "\\#" for a hash)."""
    out = []
    for line in text.split("\n"):
        line = line.strip()
        m = _BLOCK_START.match(line)
        if m:
            at = m.start() + len(m.group(0)) - len(m.group(0).lstrip("0123456789"))
            line = line[:at] + "\\" + line[at:]
        out.append(line)
    return "\n".join(out)


def _code_span(text: str) -> str:
    text = text.replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(code: str, language: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"(?m)^[ \t]*(`{3,})", code)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{code.rstrip()}\n{ticks}"


def _wrap(mark: str, inner: str) -> str:
    """``inner`` between two ``mark``s, the marks kept off its outer spaces."""
    stripped = inner.strip()
    if not stripped:
        return inner
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    return f"{lead}{mark}{stripped}{mark}{trail}"


def _inline(node: nodes.Node) -> str:
    """The Markdown of an inline node and its children."""
    if isinstance(node, nodes.Text):
        return node.astext()  # str(node) keeps docutils' NUL escape marks
    if isinstance(node, (nodes.system_message, nodes.raw, nodes.comment)):
        return ""
    assert isinstance(node, nodes.Element)
    if isinstance(node, (nodes.literal, nodes.math)):
        text = node.astext()
        return f"${text}$" if isinstance(node, nodes.math) else _code_span(text)
    if isinstance(node, nodes.image):
        return str(node.get("alt", ""))
    inner = "".join(_inline(child) for child in node.children)
    if isinstance(node, nodes.strong):
        return _wrap("**", inner)
    if isinstance(node, (nodes.emphasis, nodes.title_reference)):
        return _wrap("*", inner)
    if isinstance(node, (nodes.footnote_reference, nodes.citation_reference)):
        return f"[{inner}]"
    if isinstance(node, nodes.reference):
        uri = str(node.get("refuri", ""))
        if uri and _SCHEME.match(uri) and inner.strip():
            return f"[{inner}]({uri.replace(')', '%29').replace(' ', '%20')})"
    return inner


def _text_of(node: nodes.Element) -> str:
    """An element's inline content as escaped running text."""
    return _escape_lines("".join(_inline(child) for child in node.children))


def _plain(node: nodes.Element) -> str:
    """A title as one line of plain text (no markup: trails and the ToC show it as it is)."""
    parts = [
        child.astext()
        for child in node.children
        if not isinstance(child, (nodes.system_message, nodes.raw, nodes.comment))
    ]
    return " ".join("".join(parts).split())


def _indent(text: str, first: str, rest: str) -> str:
    lines = text.split("\n")
    out = [first + lines[0]]
    out.extend(rest + line if line.strip() else "" for line in lines[1:])
    return "\n".join(out)


class _Writer:
    """Renders block nodes; ``depth`` is the section depth, the heading level of a title."""

    def __init__(self) -> None:
        self.depth = 0
        self.blocks: dict[type[nodes.Node], Callable[[nodes.Element], str]] = {
            nodes.section: self.section,
            nodes.title: self.label,
            nodes.subtitle: self.label,
            nodes.rubric: self.label,
            nodes.paragraph: _text_of,
            nodes.literal_block: self.literal,
            nodes.doctest_block: self.literal,
            nodes.math_block: self.literal,
            nodes.bullet_list: self.items,
            nodes.enumerated_list: self.items,
            nodes.definition_list: self.definitions,
            nodes.field_list: self.fields,
            nodes.docinfo: self.fields,
            nodes.option_list: self.options,
            nodes.block_quote: self.quote,
            nodes.line_block: self.lines,
            nodes.table: self.table,
            nodes.transition: lambda _node: "---",
            nodes.image: lambda node: f"![{node.get('alt', '')}]({node.get('uri', '')})",
            nodes.footnote: self.note,
            nodes.citation: self.note,
            nodes.attribution: lambda node: "— " + _text_of(node),
            nodes.target: lambda node: _text_of(node) if node.children else "",
        }

    def render(self, node: nodes.Node) -> str:
        """One block node as Markdown ("" for what shows nothing)."""
        if isinstance(node, _SKIPPED):
            return ""
        if isinstance(node, nodes.Text):
            return _escape_lines(node.astext())
        assert isinstance(node, nodes.Element)
        for kind in type(node).__mro__:
            handler = self.blocks.get(kind)
            if handler is not None:
                return handler(node)
        if isinstance(node, nodes.Admonition):
            return self.admonition(node)
        if isinstance(node, nodes.topic) and "contents" in node.get("classes", []):
            return ""  # a ".. contents::" list repeats the headings the ToC already has
        if isinstance(node, nodes.TextElement):
            return _text_of(node)
        return self.children(node)

    def children(self, node: nodes.Element, sep: str = "\n\n") -> str:
        parts = (self.render(child) for child in node.children)
        return sep.join(p for p in parts if p.strip())

    def section(self, node: nodes.Element) -> str:
        self.depth += 1
        try:
            out = []
            for child in node.children:
                if isinstance(child, nodes.title):
                    title = _plain(child)
                    if title:
                        out.append("#" * min(self.depth, _MAX_LEVEL) + " " + title)
                else:
                    out.append(self.render(child))
            return "\n\n".join(p for p in out if p.strip())
        finally:
            self.depth -= 1

    def label(self, node: nodes.Element) -> str:
        title = _plain(node)
        return f"**{title}**" if title else ""

    def literal(self, node: nodes.Element) -> str:
        found: list[str] = node.get("classes", [])
        classes = [str(name) for name in found if name != "code"]
        if isinstance(node, nodes.doctest_block):
            language = "pycon"
        elif isinstance(node, nodes.math_block):
            language = "math"
        else:
            language = classes[0] if classes else ""
        return _fence(node.astext(), language)

    def items(self, node: nodes.Element) -> str:
        items = [c for c in node.children if isinstance(c, nodes.list_item)]
        numbered = isinstance(node, nodes.enumerated_list)
        start = int(node.get("start", 1)) if numbered else 1
        out = []
        for n, item in enumerate(items):
            marker = f"{start + n}." if numbered else "-"
            body = self.children(item) or ""
            out.append(_indent(body, marker + " ", " " * (len(marker) + 1)))
        loose = any(len([c for c in i.children if isinstance(c, nodes.Body)]) > 1 for i in items)
        return ("\n\n" if loose else "\n").join(out)

    def definitions(self, node: nodes.Element) -> str:
        out = []
        for item in node.children:
            if not isinstance(item, nodes.Element):
                continue
            terms = [c for c in item.children if isinstance(c, (nodes.term, nodes.classifier))]
            head = " : ".join(_plain(t) for t in terms)
            body = [self.children(c) for c in item.children if isinstance(c, nodes.definition)]
            out.append("\n\n".join(p for p in (f"**{head}**" if head else "", *body) if p))
        return "\n\n".join(out)

    def fields(self, node: nodes.Element) -> str:
        out = []
        for field in node.children:
            if not isinstance(field, nodes.Element):
                continue
            name = next((c for c in field.children if isinstance(c, nodes.field_name)), None)
            body = next((c for c in field.children if isinstance(c, nodes.field_body)), None)
            if name is None:  # a docinfo entry (author, version, ...) is a bare element
                text = field.astext()
                out.append(f"**{field.tagname.title()}:** {' '.join(text.split())}")
                continue
            rendered = self.children(body) if body is not None else ""
            out.append(f"**{_plain(name)}:** {rendered}".rstrip())
        return "\n\n".join(out)

    def options(self, node: nodes.Element) -> str:
        out = []
        for item in node.children:
            if not isinstance(item, nodes.Element):
                continue
            group = next((c for c in item.children if isinstance(c, nodes.option_group)), None)
            desc = next((c for c in item.children if isinstance(c, nodes.description)), None)
            name = ", ".join(o.astext() for o in group.children) if group is not None else ""
            text = self.children(desc) if desc is not None else ""
            out.append(f"{_code_span(name)} {text}".strip())
        return "\n\n".join(out)

    def quote(self, node: nodes.Element) -> str:
        body = self.children(node)
        return "\n".join("> " + line if line else ">" for line in body.split("\n"))

    def lines(self, node: nodes.Element) -> str:
        parts = (_text_of(line) for line in node.findall(nodes.line))
        return "\n".join(p for p in parts if p)

    def note(self, node: nodes.Element) -> str:
        label = next((c for c in node.children if isinstance(c, nodes.label)), None)
        body = "\n\n".join(self.render(c) for c in node.children if not isinstance(c, nodes.label))
        return f"[{label.astext() if label else ''}] {body}".strip()

    def admonition(self, node: nodes.Element) -> str:
        title = next((c for c in node.children if isinstance(c, nodes.title)), None)
        name = _plain(title) if title is not None else node.tagname.title()
        body = "\n\n".join(
            p for p in (self.render(c) for c in node.children if c is not title) if p.strip()
        )
        return f"**{name}:**\n\n{body}" if body else f"**{name}:**"

    def table(self, node: nodes.Element) -> str:
        rows: list[list[str]] = []
        header_rows = 0
        title = next((c for c in node.children if isinstance(c, nodes.title)), None)
        for group in node.findall(nodes.tgroup):
            spanned: set[tuple[int, int]] = set()
            for part in group.children:
                if not isinstance(part, (nodes.thead, nodes.tbody)):
                    continue
                for row in part.children:
                    rows.append(self._row(row, len(rows), spanned))
                    if isinstance(part, nodes.thead):
                        header_rows += 1
        if not rows:
            return ""
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        head, body = (rows[0], rows[1:]) if header_rows or len(rows) > 1 else (rows[0], [])
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * width]
        lines.extend("| " + " | ".join(r) + " |" for r in body)
        table = "\n".join(lines)
        return f"**{_plain(title)}**\n\n{table}" if title is not None else table

    def _row(self, row: nodes.Node, index: int, spanned: set[tuple[int, int]]) -> list[str]:
        """One table row's cells; a cell that a cell above or to the left spans is empty."""
        cells: list[str] = []
        entries = row.children if isinstance(row, nodes.Element) else []
        for entry in entries:
            if not isinstance(entry, nodes.entry):
                continue
            while (index, len(cells)) in spanned:
                cells.append("")
            col = len(cells)
            cells.append(" ".join(self.children(entry, " ").split()).replace("|", "\\|"))
            cells.extend("" for _ in range(int(entry.get("morecols", 0))))
            for down in range(1, int(entry.get("morerows", 0)) + 1):
                spanned.update((index + down, c) for c in range(col, len(cells)))
        while (index, len(cells)) in spanned:
            cells.append("")
        return cells


def to_markdown(document: nodes.document) -> str:
    """The Markdown of a parsed document (LF line ends, one trailing newline)."""
    return _Writer().children(document).strip("\n") + "\n"
