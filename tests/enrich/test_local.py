"""Local enrichment (§8.1): keywords, entities, dates and content types, English and
Portuguese, on hand-written cases, real documents and random text."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca.enrich import Enrichment, enrich_text
from guaipeca.enrich.local import (
    detect_language,
    extract_content_types,
    extract_dates,
    extract_entities,
    extract_keywords,
)
from guaipeca.text.normalize import normalize_term
from support import beir_corpus, shared_data

EN = (
    "The University of São Paulo and the National Institutes of Health (NIH) ran a trial. "
    "However, results published on 3 March 2024 showed that IL-6 levels rose in patients "
    "from New York. The FDA approved the drug; see also COVID-19 data and BRCA1 carriers."
)
PT = (
    "O Banco do Brasil anunciou em 3 de março de 2024 que a Universidade Federal do Rio de "
    "Janeiro receberá recursos. Em março de 2023, o governo de São Paulo reuniu a Petrobras."
)


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Signed on 2024-03-05.", "english", ["2024-03-05"]),
        ("Signed on 3 March 2024 and 4th of July 1999.", "english", ["2024-03-03", "1999-07-04"]),
        ("Signed March 3, 2024.", "english", ["2024-03-03"]),
        ("Assinado em 3 de março de 2024.", "portuguese", ["2024-03-03"]),
        ("Assinado em março de 2024.", "portuguese", ["2024-03"]),
        ("Released in June 2021.", "english", ["2021-06"]),
        ("Data: 05/04/2022.", "portuguese", ["2022-04-05"]),
        ("Date: 05/04/2022.", "english", ["2022-05-04"]),
        ("Date: 25/04/2022.", "english", ["2022-04-25"]),
        ("Founded in 1998, it grew.", "english", ["1998"]),
        ("Fundada em 1998.", "portuguese", ["1998"]),
        ("We enrolled 2000 patients and 31 February 2020 is no date.", "english", []),
        ("Version 2024-13-40 is not a date.", "english", []),
    ],
)
def test_dates_are_found_and_normalised(text: str, language: str, expected: list[str]) -> None:
    assert extract_dates(text, language) == expected


def test_entities_in_english_and_portuguese() -> None:
    en = extract_entities(EN)
    for name in ("University of São Paulo", "National Institutes of Health", "NIH", "IL-6",
                 "New York", "FDA", "COVID-19", "BRCA1"):  # fmt: skip
        assert name in en, name
    assert not {"The", "However", "March"} & set(en)
    pt = extract_entities(PT, "portuguese")
    for name in ("Banco do Brasil", "Universidade Federal do Rio de Janeiro", "São Paulo",
                 "Petrobras"):  # fmt: skip
        assert name in pt, name
    assert "Em" not in pt and "O" not in pt


def test_section_labels_and_title_lines_are_not_names() -> None:
    text = "# Effects Of Aspirin On Heart Disease\n\nRESULTS We saw that NASA data agree."
    assert extract_entities(text) == ["NASA"]


def test_keywords_are_content_phrases_best_first() -> None:
    text = (
        "Breast cancer screening reduces breast cancer mortality. Screening programmes "
        "for breast cancer are cost effective in the region."
    )
    kws = extract_keywords(text)
    assert kws[0] == "breast cancer screening" or "breast cancer" in kws[:2]
    assert all(k == k.casefold() for k in kws)
    assert not {"the", "for", "in"} & set(kws)
    assert extract_keywords("a de o que", "portuguese") == []


def test_language_detection_and_content_types() -> None:
    assert detect_language(PT) == "portuguese"
    assert detect_language(EN, "portuguese") == "english"
    assert detect_language("NASA 2024", "portuguese") == "portuguese"
    md = "## Title\n\n| a | b |\n|---|---|\n\n- item\n\n```\ncode\n```\n\nPlain text."
    assert extract_content_types(md) == ["table", "code", "list", "heading", "text"]


def test_enrichment_round_trips_and_keys_ignore_case_and_accents() -> None:
    e = enrich_text(PT, "portuguese")
    assert e.language == "portuguese"
    assert Enrichment.from_json(e.to_json()) == e
    assert "sao paulo" in e.entity_keys
    assert normalize_term("  São   PAULO ") == "sao paulo"
    assert ("e", "banco do brasil") in e.terms()


def test_real_documents_give_sane_enrichment() -> None:
    docs = beir_corpus("scifact", 200)
    found_entities = 0
    for title, text in docs.values():
        e = enrich_text(f"# {title}\n\n{text}")
        assert len(e.keywords) <= 10 and len(e.entities) <= 20
        found_entities += bool(e.entities)
        for name in e.entities:
            # every entity (maybe singularised: "PBMCs" -> "PBMC") is in the text
            assert name in text or name in title, name
    assert found_entities > 150


def test_portuguese_real_data_is_recognised_and_its_names_found() -> None:
    """Pirá (CC BY 4.0): 2,069 questions about the Brazilian coast, in Portuguese and English."""
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.load_workbook(shared_data("docs", "pira_T_total.xlsx"), read_only=True)
    rows = book.worksheets[0].iter_rows(values_only=True)
    head = next(rows)
    pt_col, en_col = head.index("question_pt_origin"), head.index("question_en_origin")
    pt, en = [], []
    for row in rows:
        pt += [str(row[pt_col])] if row[pt_col] else []
        en += [str(row[en_col])] if row[en_col] else []
    book.close()
    assert len(pt) > 2000 and len(en) > 2000
    assert sum(detect_language(q, "english") == "portuguese" for q in pt) > 0.9 * len(pt)
    assert sum(detect_language(q, "portuguese") == "english" for q in en) > 0.9 * len(en)
    keys: Counter[str] = Counter()
    for q in pt:
        keys.update(enrich_text(q, "portuguese").entity_keys)
    top = [k for k, _ in keys.most_common(10)]
    for name in ("brasil", "petrobras", "bacia de campos"):
        assert name in top, (name, top)  # "Petrobrás" and "PETROBRAS" count as "petrobras"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600))
def test_any_text_enriches_without_error(text: str) -> None:
    e = enrich_text(text, "portuguese")
    assert all(re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", d) for d in e.dates)
    assert all(k and k == k.casefold() for k in e.keywords)
    assert all(n.strip() == n and n for n in e.entities)
