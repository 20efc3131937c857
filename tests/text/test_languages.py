"""Languages by ISO code or Snowball name (SPEC §4.1d): one mapping, used everywhere."""

from __future__ import annotations

import pytest

from guaipeca.text.languages import iso_code, language_name, snowball_languages


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("pt", "portuguese"),
        ("pt-BR", "portuguese"),
        ("pt_br", "portuguese"),
        ("PT-PT", "portuguese"),
        ("en", "english"),
        ("en-US", "english"),
        ("es", "spanish"),
        ("nb", "norwegian"),
        ("sr-Latn-RS", "serbian"),
        (" Portuguese ", "portuguese"),
        ("english", "english"),
        ("porter", "porter"),
    ],
)
def test_codes_and_names_give_the_snowball_name(value: str, name: str) -> None:
    assert language_name(value) == name


@pytest.mark.parametrize("value", ["klingon", "xx", "p", "", "pt-", "zh"])
def test_anything_else_is_refused_naming_what_is_accepted(value: str) -> None:
    with pytest.raises(ValueError, match="unknown language") as info:
        language_name(value)
    message = str(info.value)
    assert "pt-BR" in message and "portuguese" in message and "\n" not in message


def test_every_snowball_language_has_a_code_that_maps_back() -> None:
    for name in snowball_languages():
        code = iso_code(name)
        assert code is not None, name
        if name not in ("porter", "dutch_porter"):
            assert language_name(code) == name
    assert iso_code("portuguese") == "pt" and iso_code("norwegian") == "no"
    assert iso_code("klingon") is None
