"""Text made safe for a terminal: nothing it would act on survives, printable text is kept."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from guaipeca.text.terminal import UNSAFE_CHARACTERS, visible

# Every character class the terminal acts on, plus ordinary text around them.
_UNSAFE = "\x00\x07\x08\t\n\r\x1b\x7f\x80\x9b\x9d\u061c\u200e\u200f\u2028\u2029"
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _is_unsafe(char: str) -> bool:
    category = unicodedata.category(char)
    return category in ("Cc", "Cs", "Zl", "Zp") or char in _BIDI + "\u061c\u200e\u200f"


@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(_UNSAFE + _BIDI))))
def test_nothing_a_terminal_acts_on_is_left(text: str) -> None:
    shown = visible(text)
    assert not any(_is_unsafe(c) for c in shown)
    assert UNSAFE_CHARACTERS.search(shown) is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))))
def test_printable_text_comes_out_unchanged(text: str) -> None:
    text = "".join(c for c in text if not _is_unsafe(c))
    assert visible(text) == text


def test_each_kind_is_written_as_a_readable_escape() -> None:
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("one\ntwo\rthree\tfour") == "one\\ntwo\\rthree\\tfour"
    assert visible("\x7f\x9b") == "\\x7f\\x9b"
    assert visible("cod\u202eexe.doc") == "cod\\u202eexe.doc"
    assert visible("\u2066x\u2069\u200f") == "\\u2066x\\u2069\\u200f"
    assert visible("caf\udce9.txt") == "caf\\udce9.txt"  # a Latin-1 name read as UTF-8
    assert visible("ação [red]x[/red] C:\\x1b") == "ação [red]x[/red] C:\\x1b"
