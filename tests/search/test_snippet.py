"""Snippets show the query terms in context."""

from __future__ import annotations

from guaipeca.lexical import Analyzer
from guaipeca.search.snippet import make_snippet

EN = Analyzer("english")


def _snip(text: str, query: str, width: int = 80) -> str:
    return make_snippet(text, set(EN.tokens(query)), EN.term_spans, width=width)


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


def test_a_term_inside_a_longer_word_marks_the_whole_word() -> None:
    # The analyser splits "covid19" into "covid" and "19"; the mark covers the word once.
    assert _snip("Cases of covid19 rose.", "covid") == "Cases of **covid19** rose."


def test_accented_text_is_matched_and_marked_in_place() -> None:
    pt = Analyzer("portuguese")
    text = "As ações do governo e a educação pública."
    snippet = make_snippet(text, set(pt.tokens("acoes educacao")), pt.term_spans, width=80)
    assert snippet == "As **ações** do governo e a **educação** pública."
