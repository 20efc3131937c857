"""AsciiDoc sources (``.adoc``, ``.asciidoc``) → Markdown, for their headings and code.

Not a full AsciiDoc converter, on purpose: what retrieval needs from a document's markup is
its structure, and the rest of AsciiDoc reads well as text. So two things change and the
rest stays as it is:

- a section title line, ``= Title``, ``== Section``, ... (the ``=`` run, a space, text),
  becomes the Markdown heading of the same level (a deeper one than six stays ``######``);
- a listing or literal block (a line of four or more ``-`` or ``.``, closed by the same
  line) becomes fenced code, its language taken from a ``[source,python]`` line above it;
  so does a literal paragraph (lines after a blank line, the first one indented).

Nothing inside a delimited block is a heading: listing, literal, passthrough (``++++``),
comment (``////``, dropped) and fenced (```` ``` ````) blocks are opaque; the blocks that
hold ordinary content (example ``====``, sidebar ``****``, quote ``____``, open ``--``) are
not, but their delimiter lines are never taken for titles.
"""

from __future__ import annotations

import re

__all__ = ["asciidoc_to_markdown"]

_TITLE = re.compile(r"(={1,6})[ \t]+(\S.*?)[ \t]*(?:[ \t]=+)?[ \t]*")
_DELIMITER = re.compile(r"(-{4,}|\.{4,}|\+{4,}|/{4,}|={4,}|\*{4,}|_{4,}|`{3,}|--)[ \t]*")
_SOURCE_ATTR = re.compile(r"\[(?:source)?,[ \t]*([\w+#.-]+)[^\]]*\]|\[source\]")
_MAX_LEVEL = 6


def _fence_for(lines: list[str]) -> str:
    longest = max((len(m) for ln in lines for m in re.findall(r"^[ \t]*(`{3,})", ln)), default=0)
    return "`" * max(3, longest + 1)


def asciidoc_to_markdown(text: str) -> str:
    """The Markdown of an AsciiDoc text (LF line ends in, LF line ends out)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line[:1] in (" ", "\t") and line.strip() and (not out or not out[-1].strip()):
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            fence = _fence_for(lines[i:end])
            out.extend([fence, *lines[i:end], fence])
            i = end
            continue
        delim = _DELIMITER.fullmatch(line)
        if delim is None or delim.group(1)[0] in "=*_" or delim.group(1) == "--":
            title = _TITLE.fullmatch(line) if delim is None else None
            if title:
                level = min(len(title.group(1)), _MAX_LEVEL)
                out.append("#" * level + " " + title.group(2))
            else:
                out.append(line)
            i += 1
            continue
        marker = line.rstrip()
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != marker:
            end += 1
        body = lines[i + 1 : end]
        kind = marker[0]
        if kind == "/":
            pass  # a comment block says nothing to a reader
        elif kind == "`":
            out.extend([line, *body, marker] if end < len(lines) else [line, *body])
        else:
            language = ""
            attr = _SOURCE_ATTR.fullmatch(out[-1].strip()) if out else None
            if attr:
                out.pop()
                language = attr.group(1) or ""
            fence = _fence_for(body)
            out.extend([fence + language, *body, fence])
        i = end + 1
    return "\n".join(out)
