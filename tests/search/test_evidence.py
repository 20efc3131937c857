"""search/evidence.py: packing spans into a character budget (SPEC 6.8).

The guarantees, stated as properties over generated documents: the spans fit the budget,
each lies inside its document and is exactly its text, spans never overlap, and a larger
budget keeps every character a smaller one returned.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.lexical import Analyzer
from guaipeca.search.evidence import Passage, blocks, idf_weights, pack, sentences

ANALYZER = Analyzer("english")
WORDS = ["tax", "rate", "law", "court", "water", "river", "the", "of", "income", "appeal"]


def _tokenize(_: int, text: str) -> list[str]:
    return ANALYZER.tokens(text)


def _weights(query: str) -> dict[str, float]:
    terms = ANALYZER.tokens(query)
    return idf_weights(terms, 100, {t: 10 for t in terms})


def _passages(doc_texts: list[str], per_chunk: int) -> list[Passage]:
    """Each document cut into chunks of ``per_chunk`` paragraphs, as the chunker keeps them:
    exact spans, only blank lines between them."""
    out = []
    for d, text in enumerate(doc_texts):
        paras = [(s, e) for s, e in blocks(text)]
        for k in range(0, len(paras), per_chunk):
            group = paras[k : k + per_chunk]
            start, end = group[0][0], group[-1][1]
            out.append(Passage(f"doc{d}", start, text[start:end], 1.0 / (1 + len(out)), k))
    return out


sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(
    lambda ws: " ".join(ws).capitalize() + "."
)
paragraph = st.lists(sentence, min_size=1, max_size=6).map(" ".join)
document = st.lists(paragraph, min_size=1, max_size=8).map(
    lambda ps: "# Title\n\n" + "\n\n".join(ps) + "\n"
)


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(document, min_size=1, max_size=3),
    per_chunk=st.integers(1, 3),
    budgets=st.lists(st.integers(1, 3000), min_size=2, max_size=4, unique=True),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
)
def test_spans_fit_resolve_do_not_overlap_and_grow_with_the_budget(
    docs: list[str], per_chunk: int, budgets: list[int], query: str
) -> None:
    passages = _passages(docs, per_chunk)
    weights = _weights(query)
    kept: set[tuple[str, int]] = set()  # whole spans of a smaller budget
    touched: list[set[tuple[str, int]]] = []  # cut spans of a smaller budget
    for budget in sorted(budgets):
        spans = pack(passages, budget, _tokenize, lambda _: weights)
        assert sum(s.end - s.start for s in spans) <= budget
        chars: set[tuple[str, int]] = set()
        for s in spans:
            text = docs[int(s.doc[3:])]
            assert 0 <= s.start < s.end <= len(text)
            assert text[s.start : s.end] == text[s.start : s.end].strip()  # trimmed
            if s.cut and text[s.end - 1] != ".":  # else inside one sentence too long to fit
                used = sum(t.end - t.start for t in spans)
                begin = max(text.rfind(". ", 0, s.end) + 2, text.rfind("\n", 0, s.end) + 1)
                whole = text[begin : text.find(".", s.end) + 1]
                assert len(whole) > budget - (used - (s.end - begin)), "cut mid-sentence"
                # ... and alone: no whole sentence of its paragraph before it in the span.
                assert begin == s.start or text[s.start : begin].endswith("\n\n")
            covered = {(s.doc, k) for k in range(s.start, s.end)}
            assert not covered & chars, "spans overlap"
            chars |= covered
        assert kept <= chars, "a larger budget dropped a whole block a smaller one returned"
        assert all(cut & chars for cut in touched), "a larger budget lost a cut block"
        for s in spans:
            covered = {(s.doc, k) for k in range(s.start, s.end)}
            (touched.append(covered) if s.cut else kept.update(covered))


def test_best_paragraph_first_and_whole_when_it_fits() -> None:
    text = (
        "# Guide\n\nThe river floods in spring.\n\n"
        "Income tax rate is ten percent. Appeals go to the tax court.\n\n"
        "Water is scarce.\n"
    )
    passages = [Passage("d", 0, text, 1.0, 0)]
    spans = pack(passages, 70, _tokenize, lambda _: _weights("income tax rate"))
    first = spans[0]
    assert text[first.start : first.end] == (
        "Income tax rate is ten percent. Appeals go to the tax court."
    )
    assert not first.cut
    # With room for all three, they are one span in document order.
    (whole,) = pack(passages, 200, _tokenize, lambda _: _weights("income tax rate"))
    assert text[whole.start : whole.end].startswith("The river floods")


def test_a_paragraph_larger_than_the_budget_is_cut_around_its_best_sentence() -> None:
    para = "Rivers run. Tax law sets the income tax rate for the year. Courts hear appeals. " * 3
    text = "# T\n\n" + para.strip() + "\n"
    passages = [Passage("d", 0, text, 1.0, 0)]
    spans = pack(passages, 120, _tokenize, lambda _: _weights("income tax rate"))
    assert len(spans) == 1 and spans[0].cut
    got = text[spans[0].start : spans[0].end]
    # The longest run of whole sentences around the best one that fits in 120 characters.
    assert got == (
        "Rivers run. Tax law sets the income tax rate for the year. Courts hear appeals. "
        "Rivers run."
    )


def test_one_line_longer_than_the_budget_is_cut_at_a_word_break() -> None:
    text = "tax " * 6000  # a 24,000-character line with no sentence end
    passages = [Passage("d", 0, text.strip(), 1.0, 0)]
    spans = pack(passages, 1000, _tokenize, lambda _: _weights("tax"))
    got = text[spans[0].start : spans[0].end]
    assert 0 < len(got) <= 1000 and got.endswith("tax")


def test_adjacent_paragraphs_merge_into_one_span_across_chunks() -> None:
    text = "# T\n\nTax rate one.\n\nTax rate two.\n\nRiver.\n"
    paras = blocks(text)
    passages = [
        Passage("d", paras[0][0], text[paras[0][0] : paras[0][1]], 1.0, 0),
        Passage("d", paras[1][0], text[paras[1][0] : paras[1][1]], 0.9, 1),
    ]
    spans = pack(passages, 1000, _tokenize, lambda _: _weights("tax rate"))
    assert len(spans) == 1
    assert text[spans[0].start : spans[0].end] == "Tax rate one.\n\nTax rate two."
    assert spans[0].passages == (0, 1)


def test_paragraphs_of_chunks_that_are_not_neighbours_stay_apart() -> None:
    text = "# T\n\nTax rate one.\n\nRiver.\n\nTax rate two.\n"
    paras = blocks(text)
    passages = [
        Passage("d", paras[0][0], text[paras[0][0] : paras[0][1]], 1.0, 0),
        Passage("d", paras[2][0], text[paras[2][0] : paras[2][1]], 0.9, 2),
    ]
    spans = pack(passages, 1000, _tokenize, lambda _: _weights("tax rate"))
    assert [text[s.start : s.end] for s in spans] == ["Tax rate one.", "Tax rate two."]


def test_blocks_keep_fenced_code_whole_and_leave_headings_out() -> None:
    text = "# T\n\nIntro.\n\n```\ncode one\n\ncode two\n```\n\n## Part\n\n| a | b |\n| 1 | 2 |\n"
    got = [text[s:e] for s, e in blocks(text)]
    assert got == ["Intro.", "```\ncode one\n\ncode two\n```", "| a | b |\n| 1 | 2 |"]


def test_sentences_cut_after_sentence_ends_and_line_breaks_only() -> None:
    text = "Dr. Smith came. He saw e.g. this! Then? Yes.\n- item one\n- item two"
    got = [text[s:e] for s, e in sentences(text, 0, len(text))]
    assert got == ["Dr.", "Smith came.", "He saw e.g. this!", "Then?", "Yes.", "- item one",
                   "- item two"]  # fmt: skip


def test_nothing_to_pack_gives_no_spans() -> None:
    assert pack([], 1000, _tokenize, lambda _: {}) == []
