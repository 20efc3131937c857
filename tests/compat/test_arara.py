"""arara-rag's code on Guaipeca (issue 38): the examples of arara's README, verbatim, run
against ``guaipeca.compat.arara`` through the ``arara_rag`` import name, with the real
bundled model; then each call's contract on its own with the hashing embedder."""

from __future__ import annotations

import ast
import locale
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import arara_rag
from guaipeca import InvalidArgumentError, NotFoundError
from guaipeca.compat.arara import Arara
from guaipeca.embed import HashingEmbedder

# arara's README, its two code examples unchanged (only `docs` and `q`, which the second
# leaves to the reader, are given by the test).
QUICKSTART = """\
from arara_rag import Arara

arara = Arara(path="./indice")            # out-of-core and persistent
arara.add_documents(
    {"lei_1234": open("lei.txt").read()},
    metadata={"ano": 2024, "tipo": "lei", "uf": "BR"},
)
hits = arara.search("qual a alíquota?", top_k=5, where={"ano": {"$gte": 2020}})
print(hits[0].doc_id, arara.resolve(hits[0]))     # exact source span
"""
CRUD = """\
arara = Arara(path="./indice", max_chunk_chars=2000)

arara.add_documents(docs, metadata={"ano": 2024})        # insert / replace
arara.update_metadata("lei_1234", {"revisado": True})    # no re-embedding
arara.delete_document("lei_1234")                        # tombstone + slot reuse
arara.get_document("lei_1234")                           # (text, metadata)
arara.compact()                                          # reclaim file space

arara.search(q, where={"tipo": {"$in": ["lei", "decreto"]}, "ano": {"$gte": 2020}})
arara.search(q, where={"$or": [{"uf": "SP"}, {"uf": "RJ"}]})
"""

LEI = (
    "# Lei 1.234\n\n## Art. 1º\n\nA alíquota do imposto é de 12% sobre o valor da operação.\n\n"
    "## Art. 2º\n\nEsta lei entra em vigor na data de sua publicação.\n"
)
DECRETO = "# Decreto 99\n\nRegulamenta a cobrança do imposto nos estados de SP e RJ.\n"


# The README reads lei.txt with open(...).read(), leaving the file to be closed by the
# garbage collector: a ResourceWarning, which is the example's, not the library's.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_the_readme_examples_run_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # open("lei.txt") reads with the locale's encoding, as arara's users' code does.
    (tmp_path / "lei.txt").write_text(LEI, encoding=locale.getpreferredencoding(False))
    first: dict[str, Any] = {}
    exec(compile(QUICKSTART, "arara-readme-quickstart", "exec"), first)
    printed = capsys.readouterr().out
    assert printed.startswith("lei_1234 ")
    hit = first["hits"][0]
    assert first["arara"].resolve(hit) == hit.text and hit.text in LEI
    first["arara"].close()

    second: dict[str, Any] = {
        "Arara": arara_rag.Arara,
        "docs": {"lei_1234": LEI, "decreto_99": DECRETO},
        "q": "alíquota do imposto",
    }
    exec(compile(CRUD, "arara-readme-crud", "exec"), second)
    arara = second["arara"]
    assert arara.get_document("lei_1234") is None  # deleted
    assert arara.get_document("decreto_99") == (DECRETO, {"ano": 2024})
    assert (tmp_path / "indice").is_dir()
    arara.close()


@pytest.fixture
def arara() -> Iterator[Arara]:
    with Arara(embedder=HashingEmbedder(64)) as a:  # in memory, as Arara() is
        a.add_documents({"lei_1234": LEI}, metadata={"ano": 2024, "tipo": "lei", "uf": "BR"})
        a.add_documents({"decreto_99": DECRETO}, metadata={"ano": 2019, "tipo": "decreto"})
        yield a


def test_search_filters_and_resolves_exact_spans(arara: Arara) -> None:
    hits = arara.search("alíquota imposto", top_k=5, where={"ano": {"$gte": 2020}})
    assert hits and {h.doc_id for h in hits} == {"lei_1234"}
    assert all(arara.resolve(h) == h.text for h in hits)
    either = arara.search("imposto", where={"$or": [{"uf": "BR"}, {"tipo": "decreto"}]})
    assert {h.doc_id for h in either} == {"lei_1234", "decreto_99"}


def test_crud_returns_what_arara_documents(arara: Arara) -> None:
    assert arara.get_document("lei_1234") == (LEI, {"ano": 2024, "tipo": "lei", "uf": "BR"})
    arara.update_metadata("lei_1234", {"revisado": True})
    assert arara.get_document("lei_1234") == (
        LEI,
        {"ano": 2024, "tipo": "lei", "uf": "BR", "revisado": True},
    )
    assert arara.delete_document("lei_1234") is True
    assert arara.delete_document("lei_1234") is False
    assert arara.get_document("lei_1234") is None
    arara.compact()
    assert {h.doc_id for h in arara.search("imposto")} == {"decreto_99"}
    with pytest.raises(NotFoundError):
        arara.update_metadata("lei_1234", {"x": 1})


def test_max_chunk_chars_bounds_every_chunk() -> None:
    text = "Parágrafo sobre tributos e alíquotas. " * 200
    with Arara(max_chunk_chars=300, embedder=HashingEmbedder(64)) as a:
        a.add_documents({"longo": text})
        hits = a.search("tributos", top_k=50, mode="keyword")
        assert len(hits) > 10 and all(len(h.text) <= 300 for h in hits)
    with pytest.raises(InvalidArgumentError, match="max_chunk_chars"):
        Arara(max_chunk_chars=10)


def test_the_arara_rag_package_only_re_exports_the_compat_layer() -> None:
    assert arara_rag.Arara is Arara
    source = Path(arara_rag.__file__).read_text(encoding="utf-8")
    imported = {
        node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
    } | {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported == {"guaipeca.compat.arara"}, textwrap.shorten(str(imported), 200)
