"""Snippets show the query terms in context."""

from __future__ import annotations

from guaipeca.lexical import Analyzer
from guaipeca.search.snippet import make_snippet

EN = Analyzer("english")


def _snip(text: str, query: str, width: int = 80) -> str:
    return make_snippet(text, set(EN.tokens(query)), EN.tokens, width=width)


def test_the_window_with_most_query_terms_is_chosen_and_terms_are_marked() -> None:
    text = (
        "Intro words. " * 20 + "Vaccines train the immune system against viruses. " + "Tail. " * 20
    )
    snippet = _snip(text, "how do vaccines train immunity")
    assert "**Vaccines**" in snippet and "**train**" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet.replace("**", "")) <= 80 + 2


def test_stemming_matches_other_word_forms() -> None:
    assert "**running**" in _snip("She was running fast.", "runs")


def test_without_matches_the_opening_is_shown() -> None:
    assert _snip("Short text here.", "zebra") == "Short text here."
    assert _snip("a " * 100, "zebra").endswith("…")
    assert _snip("", "x") == ""
