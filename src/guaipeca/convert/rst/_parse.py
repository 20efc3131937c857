"""reStructuredText → a docutils doctree, with Sphinx's markup read as docutils would not.

docutils knows only its own directives and roles; most RST in the wild is written for Sphinx
(``.. method::``, ``.. versionadded::``, ``.. code-block:: python`` with ``:caption:``,
``:class:`Foo```, ``:doc:`title <path>```). Left alone, each of those is an error node and
its content is lost. Here they become plain nodes: an unknown role shows its text (code for
the roles that name code, as Sphinx shows them), an unknown directive shows its argument and
parses its content as RST, a code directive of any name keeps its content as a literal block.

The parse never reports, never halts and never reads another file: ``include`` and ``raw``
are off, no configuration file is read, and an error in the markup stays in the tree as a
system message, which the Markdown writer leaves out.
"""

from __future__ import annotations

import io
import re
from typing import Any, ClassVar

from docutils import nodes
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, Parser, directives, roles
from docutils.parsers.rst.languages import en
from docutils.parsers.rst.states import Inliner

__all__ = ["parse_rst"]


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Sphinx roles whose text is a name in code (an object, a setting, a file, a command line);
# every other unknown role shows as plain text.
_CODE_ROLES = _names(
    "attr class const data exc func meth mod obj type member var macro enum setting "
    "lookup fieldlookup option envvar file samp command kbd makevar regexp token keyword "
    "ttag tfilter djadmin djadminopt"
)
# Roles Sphinx shows with "()" after the name, as its add_function_parentheses does.
_CALL_ROLES = frozenset({"func", "meth"})
# Directives that describe an object: the argument is its signature, shown as code.
_OBJECT_DIRECTIVES = _names(
    "method function class attribute data exception decorator decoratormethod "
    "staticmethod classmethod property describe object type member macro var enum "
    "fieldlookup templatetag templatefilter setting django-admin django-admin-option "
    "option cmdoption envvar program"
)
# Directives whose content is code, whatever their name.
_CODE_DIRECTIVES = _names(
    "code code-block sourcecode console doctest testcode testoutput testsetup "
    "testcleanup productionlist prompt"
)
# Directives Sphinx shows nothing of (navigation, indexing, settings of the build).
_SILENT_DIRECTIVES = _names(
    "index highlight currentmodule module default-domain toctree tabularcolumns "
    "sectionauthor moduleauthor codeauthor autosummary"
)
# What Sphinx writes before a version note's text.
_VERSION_LABELS = {
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
_REFERENCE_ROLES = {"rfc": "RFC", "pep": "PEP", "rfc-reference": "RFC", "pep-reference": "PEP"}
_LABELS = {"seealso": "See also:", "todo": "To do:"}
_TITLE_TARGET = re.compile(r"(?s)(.*?\S)\s*<([^<>]+)>\s*")
_DIRECTIVE_NAME = re.compile(r"(?m)^[ \t]*\.\.[ \t]+([A-Za-z][\w:+.-]*)[ \t]*::")


class _AnyOptions(dict[str, Any]):
    """An option spec that takes any option as a string (Sphinx's are unknown to docutils)."""

    def __getitem__(self, key: str) -> Any:
        return directives.unchanged

    def __contains__(self, key: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


def _bare(name: str) -> str:
    """A role or directive name without its Sphinx domain ("py:class" → "class")."""
    return name.lower().rsplit(":", 1)[-1]


def _display(role: str, text: str) -> str:
    """The text Sphinx shows for a cross-reference role: the title of ``title <target>``,
    else the target without its ``!`` and, after ``~``, its last dotted part."""
    m = _TITLE_TARGET.fullmatch(text)
    if m:
        return " ".join(m.group(1).split())
    shown = " ".join(text.split()).lstrip("!")
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    if role in _CALL_ROLES and shown and not shown.endswith(")"):
        shown += "()"
    return shown


class _Inliner(Inliner):
    """docutils' inline parser, with an unknown role shown as its text instead of an error."""

    def interpreted(
        self, rawsource: str, text: str, role: str, lineno: int
    ) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        name = _bare(role)
        if name in _REFERENCE_ROLES:  # Sphinx allows "title <target>" in these; docutils not
            shown = _display(name, text)
            if shown == " ".join(text.split()):
                shown = f"{_REFERENCE_ROLES[name]} {shown}"
            return [nodes.Text(shown)], []
        role_fn, messages = roles.role(role, self.language, lineno, self.reporter)
        if role_fn is not None:  # docutils' own role (the lookup is cached)
            return super().interpreted(rawsource, text, role, lineno)
        shown = _display(name, text)
        node = nodes.literal(rawsource, shown) if name in _CODE_ROLES else nodes.Text(shown)
        return [node], messages


def _copy_patterns() -> None:
    """Give :class:`_Inliner` the pattern strings of its base as its own: docutils formats
    its regular expressions with ``vars(type(self))``, which lists a subclass's names only."""
    for name, value in vars(Inliner).items():
        if isinstance(value, str) and not name.startswith("__"):
            setattr(_Inliner, name, value)


_copy_patterns()


class _Generic(Directive):
    """Any directive docutils does not know: its argument as a line, its content as RST."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = _AnyOptions()

    def run(self) -> list[nodes.Node]:
        name = _bare(self.name)
        if name in _SILENT_DIRECTIVES:
            return []
        box = nodes.container()
        argument = " ".join(self.arguments[0].split()) if self.arguments else ""
        lead = self._lead(name, argument)
        if lead is not None:
            box += lead
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, box)
        return [box]

    @staticmethod
    def _lead(name: str, argument: str) -> nodes.paragraph | None:
        """The line that stands for the directive's name and argument, if any."""
        if name in _VERSION_LABELS:
            version, _, rest = argument.partition(" ")
            line = f"{_VERSION_LABELS[name]} {version}.".replace(" .", ".")
            return nodes.paragraph("", "", nodes.emphasis(line, line), nodes.Text(" " + rest))
        if name in _LABELS:
            label = _LABELS[name]
            return nodes.paragraph("", "", nodes.strong(label, label), nodes.Text(" " + argument))
        if not argument:
            return None
        if name in _OBJECT_DIRECTIVES:
            return nodes.paragraph("", "", nodes.literal(argument, argument))
        return nodes.paragraph(argument, argument)


class _Code(Directive):
    """A code directive of any name: its content stays code, its language a class."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = _AnyOptions()

    def run(self) -> list[nodes.Node]:
        code = "\n".join(self.content)
        language = self.arguments[0].split()[0] if self.arguments else ""
        if not language and _bare(self.name) == "console":
            language = "console"
        classes = ["code", language] if language else ["code"]
        return [nodes.literal_block(code, code, classes=classes)]


def _register(source: str) -> None:
    """Register :class:`_Code` for the code directives and :class:`_Generic` for each directive
    in ``source`` that docutils has no entry for (docutils keeps one registry per process;
    these entries only ever stand where docutils had nothing, or where Sphinx means another
    thing: ``class``)."""
    for name in _CODE_DIRECTIVES:
        directives.register_directive(name, _Code)
    for name in _OBJECT_DIRECTIVES:
        directives.register_directive(name, _Generic)
    for found in set(_DIRECTIVE_NAME.findall(source)):
        name = found.lower()
        if name not in en.directives and name not in _CODE_DIRECTIVES:
            directives.register_directive(name, _Generic)


def parse_rst(source: str) -> nodes.document:
    """Parse ``source`` into a doctree; bad markup degrades to system messages.

    Raises:
        Exception: whatever docutils raises on input it cannot parse at all (the caller
            falls back to plain text).
    """
    _register(source)
    settings = {
        "_disable_config": True,  # no docutils.conf of the user's or the system's
        "report_level": 5,
        "halt_level": 5,
        "exit_status_level": 5,
        "warning_stream": io.StringIO(),
        "traceback": True,  # raise instead of printing and exiting
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "syntax_highlight": "none",
        "doctitle_xform": False,
        "sectsubtitle_xform": False,
        "docinfo_xform": False,
        "language_code": "en",
    }
    document: nodes.document = publish_doctree(
        source, parser=Parser(inliner=_Inliner()), settings_overrides=settings
    )
    return document
