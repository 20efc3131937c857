"""Folder ingestion for real: every shared document format, hostile files, incremental runs,
parallel conversion identical to serial, the conversion cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.config import EngineSettings
from guaipeca.convert import NO_OCR_FOR_IMAGES, OcrOptions
from guaipeca.errors import TooLargeError
from guaipeca.ingest import (
    NO_OCR,
    NO_TEXT,
    TOO_BIG,
    UNSUPPORTED,
    ConversionCache,
    sync_folder,
)
from support import CountingEmbedder, shared_data


def _docs() -> Path:
    return shared_data("docs")


def _check_contract(index: Index, corpus: str) -> None:
    for info in index.list_documents(corpus=corpus, limit=1000):
        doc = index.get_document(info.doc_id, corpus=corpus)
        if not doc.chunk_count:
            continue
        hits = index.store(corpus).catalog.document_chunks(info.doc_id)
        assert len(hits) == doc.chunk_count
        previous_end = 0
        for row in hits:
            assert doc.text[row.start : row.end] == row.text
            assert doc.text[previous_end : row.start].strip() == ""
            previous_end = row.end
        assert doc.text[previous_end:].strip() == ""


@pytest.fixture(scope="module")
def shared_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("shared")
    index = Index(root / "idx", embedder=CountingEmbedder())
    report = sync_folder(index, _docs(), corpus="docs", cache_dir=root / "converted")
    assert report.failed == [], report.failed
    assert report.added == len(list(_docs().iterdir()))
    return index


@pytest.mark.slow
def test_every_shared_document_converts_and_chunks_exactly(shared_index: Index) -> None:
    names = {d.doc_id for d in shared_index.list_documents(corpus="docs", limit=100)}
    assert names == {p.name for p in _docs().iterdir()}
    _check_contract(shared_index, "docs")


# A query a person could write from each document's content.
QUERIES = {
    "amt_handbook_sample.pdf": "how does a stainless steel self-locking nut hold",
    "federal-register-2020-17221.pdf": "MCAS activation after a single AOA sensor failure",
    "nics-background-checks-2015-11.pdf": "NICS firearm background checks November 2015 Maine",
    "pira_T_total.xlsx": "allogenic and autogenic processes",
    "powerpoint_sample.pptx": "test table slide",
    "pptx_chart.pptx": "wild duck observations by year",
    "senate-expenditures.pdf": "senator transportation airfare Hawley",
    "unit_test_headers.docx": "test document section 1.2.3 paragraph",
    "wikipedia_duck.html": "duck etymology and taxonomy",
    "wikipedia_mozilla.html": "Mozilla Foundation free and open source software history",
    "word365_structure.pdf": "Titre liste numérotée Alouette Farfadet",
    "word_sample.docx": "swimming in the lake wear sunglasses",
    "word_tables.docx": "test with tables merged cell",
    "xlsx_01.xlsx": "Sheet2 col-1 col-2 col-3",
}


def test_every_shared_document_has_a_query() -> None:
    assert set(QUERIES) == {p.name for p in _docs().iterdir()}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_a_query_written_from_a_document_finds_it(shared_index: Index, name: str) -> None:
    hits = shared_index.search(QUERIES[name], top_k=3)
    assert name in [h.doc_id for h in hits], [h.doc_id for h in hits]
    hit = next(h for h in hits if h.doc_id == name)
    assert hit.source_path and hit.source_path.endswith(name)
    assert shared_index.resolve(hit) == hit.text


def test_pdf_headings_become_heading_paths_and_tables_stay_in_one_chunk(
    shared_index: Index,
) -> None:
    rows = shared_index.store("docs").catalog.document_chunks("federal-register-2020-17221.pdf")
    paths = {r.heading_path for r in rows}
    assert any("SUMMARY" in p for p in paths) and any("Background" in p for p in paths)
    assert all(r.page_start is not None and 1 <= r.page_start <= r.page_end <= 15 for r in rows)
    nics = shared_index.store("docs").catalog.document_chunks("nics-background-checks-2015-11.pdf")
    table_chunks = [r for r in nics if "| Alabama" in r.text]
    assert len(table_chunks) == 1
    lines = [ln for ln in table_chunks[0].text.splitlines() if ln.strip()]
    assert sum(ln.startswith("|") for ln in lines) >= len(lines) - 2
    hit = shared_index.search("Wyoming firearm checks", top_k=3, where={"extension": ".pdf"})[0]
    assert hit.page_start == 1 and hit.doc_id.endswith(".pdf")


def _hostile_folder(folder: Path) -> dict[str, str]:
    """Write one good file and every kind of bad one; returns name -> expected reason part."""
    import pymupdf

    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThis file is perfectly fine and searchable.")
    pdf = (_docs() / "federal-register-2020-17221.pdf").read_bytes()
    (folder / "truncated.pdf").write_bytes(pdf[: len(pdf) // 3])
    scanned = pymupdf.open()
    page = scanned.new_page()
    page.draw_rect(pymupdf.Rect(50, 50, 300, 300), fill=(0, 0, 0))
    scanned.save(folder / "scanned.pdf")
    with (
        zipfile.ZipFile(folder / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as zf,
        zf.open("word/document.xml", "w", force_zip64=True) as fh,
    ):
        for _ in range(300):
            fh.write(b"\0" * (1 << 20))
    (folder / "junk.md").write_bytes(os.urandom(2048) + b"\0")
    (folder / "empty.txt").write_bytes(b"")
    with (folder / "huge.txt").open("wb") as fh:
        fh.truncate(51 * 1024 * 1024)
    (folder / "loop").mkdir()
    (folder / "loop" / "again").symlink_to(folder, target_is_directory=True)
    return {
        "truncated.pdf": "",
        "scanned.pdf": "no text layer",
        "bomb.docx": "zip bomb",
        "junk.md": "",
        "empty.txt": "empty",
        "huge.txt": "limit is 50.0 MB",
    }


def test_hostile_files_are_reported_one_by_one_and_the_rest_completes(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    expected = _hostile_folder(folder)
    index = Index(tmp_path / "idx", embedder=CountingEmbedder())
    index.add_documents({"kept": "an earlier document that must survive"}, corpus="c")
    report = sync_folder(index, folder, corpus="c", cache_dir=tmp_path / "converted")
    failed = {Path(p).name: reason for p, reason in report.failed}
    skipped = {Path(f.path).name: f.reason for f in report.skipped}
    # Nothing is wrong with an empty file, a scan without text or one over the size limit:
    # skipped, not failed. (The truncated PDF may be repaired into a page without text.)
    assert {"scanned.pdf", "empty.txt", "huge.txt"} <= set(skipped)
    assert set(skipped) <= {"scanned.pdf", "empty.txt", "huge.txt", "truncated.pdf"}
    reasons = failed | skipped
    # The truncated PDF may be repaired into a partial document; everything else must fail.
    for name, part in expected.items():
        if name == "truncated.pdf" and name not in reasons:
            continue
        assert name in reasons, name
        assert part in reasons[name] and "\n" not in reasons[name]
        assert "Traceback" not in reasons[name]
    docs = {d.doc_id for d in index.list_documents(corpus="c")}
    assert {"good.md", "kept"} <= docs
    assert index.search("perfectly fine", mode="keyword")[0].doc_id == "good.md"
    assert index.get_document("kept").text.startswith("an earlier")


def _sections(n: int) -> str:
    """A small file that makes one chunk per line: the shape of a chunk-count attack."""
    return "".join(f"# h{i}\n\nx\n\n" for i in range(n))


def test_a_file_over_the_chunk_budget_is_skipped_naming_the_setting(tmp_path: Path) -> None:
    # 2,000 one-line sections (28 KB) would make 2,000 chunks: each a vector to embed and
    # store. Over chunking.max_chunks the file is skipped as too big; the rest is indexed.
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "spam.md").write_text(_sections(2000), encoding="utf-8")
    (folder / "fine.md").write_text(_sections(50), encoding="utf-8")
    settings = EngineSettings.model_validate({"chunking": {"max_chunks": 100}})
    index = Index(embedder=CountingEmbedder(), settings=settings)
    report = sync_folder(index, folder, corpus="c")
    skipped = {Path(f.path).name: f.reason for f in report.skipped}
    assert set(skipped) == {"spam.md"}
    assert skipped["spam.md"] == "it makes 2,000 chunks; the limit is chunking.max_chunks (100)"
    assert {d.doc_id for d in index.list_documents(corpus="c")} == {"fine.md"}
    # The library refuses such a document the same way, writing nothing.
    with pytest.raises(TooLargeError, match=r"chunking\.max_chunks \(100\)"):
        index.add_documents({"spam": _sections(101)}, corpus="c")
    assert index.add_documents({"ok": _sections(100)}, corpus="c").added == 1
    assert {d.doc_id for d in index.list_documents(corpus="c")} == {"fine.md", "ok"}


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to the 'nobody' user, which needs root")
def test_an_unreadable_file_is_reported_with_permission_denied() -> None:
    """Root reads any file whatever its mode, so the sync runs as 'nobody' in a subprocess
    (in a folder straight under /tmp: pytest's own tmp folders are private to root)."""
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="guaipeca-nobody-"))
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "open.md").write_text("readable words")
    secret = folder / "secret.md"
    secret.write_text("hidden words")
    secret.chmod(0o000)
    for p in (tmp_path, folder):
        p.chmod(0o777)
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "w.md").write_text("warm up")
    code = (
        "import os, sys\n"
        "from guaipeca import Index\n"
        "from guaipeca.embed import HashingEmbedder\n"
        "from guaipeca.ingest import sync_folder\n"
        "top, warm = sys.argv[1], sys.argv[2]\n"
        "sync_folder(Index(warm + '/idx', embedder=HashingEmbedder()), warm)  # warm imports\n"
        "os.setgid(65534); os.setuid(65534)  # only now: root's Python install is private\n"
        "r = sync_folder(Index(top + '/idx', embedder=HashingEmbedder()), top + '/corpus')\n"
        "print(r.added, r.failed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), str(warm)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
        timeout=120,
    )
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 ") and "secret.md" in done.stdout
    assert "permission denied" in done.stdout


def _notes(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(4):
        sections = "\n\n".join(
            f"## Part {j}\n\n" + f"Note {i} part {j} talks about subject {i * 10 + j}. " * 25
            for j in range(3)
        )
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\n{sections}")
    (folder / "drafts").mkdir(exist_ok=True)
    (folder / "drafts" / "wip.md").write_text("# Draft\n\nnot ready")


def test_incremental_runs_embed_only_what_changed(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    _notes(folder)
    embedder = CountingEmbedder()
    index = Index(tmp_path / "idx", embedder=embedder)
    kwargs = {"corpus": "n", "cache_dir": tmp_path / "converted", "exclude": ["drafts/*"]}
    first = sync_folder(index, folder, **kwargs)  # type: ignore[arg-type]
    assert first.added == 4 and first.chunks_embedded == len(embedder.passages) > 0
    assert "drafts/wip.md" not in {d.doc_id for d in index.list_documents(corpus="n")}

    embedder.passages.clear()
    second = sync_folder(index, folder, **kwargs)  # type: ignore[arg-type]
    assert (second.unchanged, second.chunks_embedded, embedder.passages) == (4, 0, [])

    os.utime(folder / "note0.md")  # touched, same bytes: hashed, nothing embedded
    touched = sync_folder(index, folder, **kwargs)  # type: ignore[arg-type]
    assert touched.unchanged == 4 and touched.chunks_embedded == 0

    text = (folder / "note1.md").read_text()
    (folder / "note1.md").write_text(text.replace("Note 1 part 2", "Note 1 part 2 (edited)", 1))
    changed = sync_folder(index, folder, **kwargs)  # type: ignore[arg-type]
    assert changed.changed == 1 and changed.chunks_embedded == 1 == len(embedder.passages)
    assert "edited" in embedder.passages[0]

    (folder / "note2.md").unlink()
    removed = sync_folder(index, folder, **kwargs)  # type: ignore[arg-type]
    assert removed.removed == 1
    assert all(h.doc_id != "note2.md" for h in index.search("Note 2 part 1", top_k=20))

    embedder.passages.clear()
    forced = sync_folder(index, folder, force=True, **kwargs)  # type: ignore[arg-type]
    assert forced.added == 3 and forced.chunks_embedded == len(embedder.passages) > 0


@pytest.mark.slow
def test_parallel_conversion_gives_the_same_index_as_serial(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in (
        "word_sample.docx",
        "powerpoint_sample.pptx",
        "senate-expenditures.pdf",
        "xlsx_01.xlsx",
        "wikipedia_duck.html",
    ):
        shutil.copy(_docs() / name, folder / name)
    _notes(folder / "notes")
    results = []
    for workers in (1, 2):
        index = Index(embedder=CountingEmbedder())
        report = sync_folder(index, folder, corpus="m", workers=workers)
        assert report.failed == []
        docs = [(d.doc_id, d.chunk_count) for d in index.list_documents(corpus="m", limit=100)]
        texts = [index.get_document(d).text for d, _ in docs]
        hits = [
            [(h.chunk_id, h.start, h.end, h.score) for h in index.search(q, top_k=10)]
            for q in ("expenditures", "swimming lake", "duck species", "subject 12")
        ]
        results.append((docs, texts, hits))
    assert results[0] == results[1]


def test_the_conversion_cache_is_used_and_survives_damage(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    shutil.copy(_docs() / "word_tables.docx", folder / "t.docx")
    cache_dir = tmp_path / "converted"
    sync_folder(Index(embedder=CountingEmbedder()), folder, cache_dir=cache_dir)
    entries = list(cache_dir.rglob("*.json"))
    assert len(entries) == 1
    cache = ConversionCache(cache_dir)
    assert cache.get(entries[0].stem) is not None
    entries[0].write_text("{garbage")
    assert cache.get(entries[0].stem) is None  # a damaged entry is a miss, not a crash
    again = sync_folder(Index(embedder=CountingEmbedder()), folder, cache_dir=cache_dir)
    assert again.added == 1 and cache.get(entries[0].stem) is not None


def test_our_own_data_folder_is_never_indexed(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("user text")
    data = tmp_path / ".guaipeca-like" / "data"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "cached.md").write_text("cache text")
    index = Index(embedder=CountingEmbedder())
    report = sync_folder(index, tmp_path, skip=[tmp_path / "data", data])
    assert report.added == 1


def test_without_ocr_images_are_skipped_not_failed(tmp_path: Path) -> None:
    """A folder of documents with pictures in it is not broken: the quick start over
    docs/ on a machine without Tesseract reports "0 failed"."""
    (tmp_path / "a.md").write_text("user text")
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n not read at all")
    index = Index(embedder=CountingEmbedder())
    report = sync_folder(index, tmp_path, ocr=OcrOptions(enabled=False))
    assert (report.added, report.failed) == (1, [])
    assert report.skipped == [(str(tmp_path / "plot.png"), NO_OCR_FOR_IMAGES, NO_OCR)]


def test_every_file_not_indexed_is_named_with_its_reason_skipped_or_failed(
    tmp_path: Path,
) -> None:
    """Files with nothing wrong but nothing to index are skipped, each with its reason and
    kind; only errors fail. Hidden, excluded and configured-out files are the user's choice."""
    (tmp_path / "good.md").write_text("# Good\n\nSearchable text.")
    (tmp_path / "notes.xyz").write_text("a type no converter reads")
    (tmp_path / "Makefile").write_text("all:")
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("  \n\n ")
    (tmp_path / "big.txt").write_text("x" * 2000)
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / ".hidden.xyz").write_text("hidden")
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "draft.xyz").write_text("excluded")
    (tmp_path / "page.html").write_text("<p>left out by the extensions setting</p>")
    index = Index(embedder=CountingEmbedder())
    report = sync_folder(
        index,
        tmp_path,
        extensions=[".md", ".txt", ".docx"],
        exclude=["drafts/*"],
        max_bytes=1000,
    )
    assert report.added == 1 and report.indexed
    skipped = {Path(f.path).name: (f.kind, f.reason) for f in report.skipped}
    assert skipped == {
        "notes.xyz": (UNSUPPORTED, "unsupported file type '.xyz'"),
        "Makefile": (UNSUPPORTED, "unsupported file type (no extension)"),
        "empty.md": (NO_TEXT, "empty file"),
        "blank.txt": (NO_TEXT, "empty file"),
        "big.txt": (TOO_BIG, "file is 0.0 MB; the limit is 0.0 MB"),
    }
    assert [Path(p).name for p, _ in report.failed] == ["broken.docx"]


def test_a_folder_with_nothing_to_index_reports_that_nothing_is_indexed(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.xyz").write_text("unsupported")
    index = Index(embedder=CountingEmbedder())
    report = sync_folder(index, tmp_path)
    assert not report.indexed and report.failed == [] and len(report.skipped) == 1
    (tmp_path / "b.md").write_text("now there is a document")
    assert sync_folder(index, tmp_path).indexed
    again = sync_folder(index, tmp_path)  # unchanged: still indexed, nothing added
    assert (again.added, again.unchanged) == (0, 1) and again.indexed


def test_a_file_that_fails_to_reconvert_says_its_old_version_is_still_served(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    good = shutil.copy(shared_data("docs", "word_tables.docx"), folder / "report.docx")
    index = Index(embedder=CountingEmbedder())
    assert sync_folder(index, folder).added == 1
    before = index.get_document("report.docx").text
    Path(good).write_bytes(b"PK\x03\x04 not a zip any more")
    report = sync_folder(index, folder)
    ((path, reason),) = report.failed
    assert path.endswith("report.docx")
    assert reason.endswith("; the version indexed earlier is still served"), reason
    assert index.get_document("report.docx").text == before
    # A file that never indexed has no earlier version to mention.
    (folder / "new.docx").write_bytes(b"PK\x03\x04 broken")
    failed = dict(sync_folder(index, folder).failed)
    assert "still served" not in failed[str(folder / "new.docx")]


def test_a_latin1_portuguese_file_is_indexed_and_found_with_and_without_accents(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "arquivo"
    folder.mkdir()
    text = (
        "Relatório da comissão de educação\n\n"
        "A prefeitura aprovou ações de alfabetização e a construção de três creches no "
        "município de São João, com participação das associações de moradores.\n"
    )
    (folder / "relatorio.txt").write_bytes(text.encode("latin-1"))
    (folder / "nota.txt").write_text("Outro documento, sobre orçamento e transporte.\n")
    index = Index(tmp_path / "idx", embedder=CountingEmbedder())
    report = sync_folder(index, folder, corpus="pt", language="portuguese")
    assert report.failed == [] and report.added == 2
    doc = index.get_document("relatorio.txt", corpus="pt")
    assert doc.text == text  # decoded, stored as UTF-8 text
    assert doc.metadata["encoding"] == "cp1252"
    for query in ("alfabetização construção", "alfabetizacao construcao"):
        hits = index.search(query, mode="keyword", corpora=["pt"])
        assert hits and hits[0].doc_id == "relatorio.txt", query
        assert "**alfabetização**" in hits[0].snippet
