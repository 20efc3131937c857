"""Snippets show the query terms in context."""

from __future__ import annotations

from guaipeca.lexical import Analyzer
from guaipeca.search.snippet import make_snippet

EN = Analyzer("english")


def _snip(text: str, query: str, width: int = 80) -> str:
    return make_snippet(text, set(EN.tokens(query)), EN.term_spans, width=width).text


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
    snippet = make_snippet(text, set(pt.tokens("acoes educacao")), pt.term_spans, width=80).text
    assert snippet == "As **ações** do governo e a **educação** pública."


def test_markup_is_stripped_and_highlights_are_offsets_into_the_chunk_text() -> None:
    text = (
        "### Feeding\n\n[![](//upload.wikimedia.org/a/Duckling.webm.jpg)](//x.org/a.webm)\n"
        "Ducks **eat** food such as [grasses](https://x.org/grass) and `seeds`.\n"
    )
    snip = make_snippet(text, set(EN.tokens("what do ducks eat?")), EN.term_spans, width=200)
    assert snip.text == "Feeding **Ducks** **eat** food such as grasses and seeds."
    assert [text[a:b] for a, b in snip.highlights] == ["Ducks", "eat"]


def test_table_pipes_become_cell_separators_and_rules_disappear() -> None:
    text = "| Kingdom: | | Animalia |\n|---|---|---|\n| Phylum: | | Chordata \\| x |\n"
    snip = make_snippet(text, set(EN.tokens("phylum")), EN.term_spans, width=200)
    assert snip.text == "Kingdom: | Animalia **Phylum**: | Chordata | x"
    assert [text[a:b] for a, b in snip.highlights] == ["Phylum"]


def test_a_literal_double_star_is_escaped_in_the_marked_form() -> None:
    text = "Python writes powers as 2 ** 10, and a power of two is cheap."
    snip = make_snippet(text, set(EN.tokens("power")), EN.term_spans, width=200)
    assert snip.text == "Python writes **powers** as 2 \\*\\* 10, and a **power** of two is cheap."
    assert [text[a:b] for a, b in snip.highlights] == ["powers", "power"]


def test_the_window_is_centred_on_the_densest_cluster_not_the_first_match() -> None:
    text = (
        "Ducks appear early. "
        + "Filler sentence about nothing in particular. " * 12
        + "Ducks eat grasses; ducks eat insects; ducks eat seeds. "
        + "More filler follows here. " * 12
    )
    snip = make_snippet(text, set(EN.tokens("ducks eat")), EN.term_spans, width=120)
    assert "**Ducks** **eat** grasses; **ducks** **eat** insects" in snip.text
    assert snip.text.startswith("…") and snip.text.endswith("…")
    assert len(snip.highlights) == 7  # every match in the chunk, not only the shown ones


def test_list_bullets_read_as_bullets_not_escaped_stars() -> None:
    text = "## See also\n\n* Domestic duck\n* Duck as food\n- Rubber duck\n"
    snip = make_snippet(text, set(EN.tokens("duck")), EN.term_spans, width=200)
    assert snip.text == "See also • Domestic **duck** • **Duck** as food • Rubber **duck**"


def test_a_lone_star_is_escaped_only_where_it_touches_a_marker() -> None:
    snip = make_snippet("A 4* hotel, a *duck pond.", set(EN.tokens("duck")), EN.term_spans)
    assert snip.text == "A 4* hotel, a \\***duck** pond."
