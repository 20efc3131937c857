"""OCR of scanned PDFs and image files with the real Tesseract (Debian's tesseract-ocr data).

Scans are made here from the shared PDFs: every page rendered to an image and put into an
image-only PDF (what a scanner delivers), or saved as PNG / TIFF. Word recall is measured
against the converted text of the born-digital original; bench/ocr.py measures every shared
PDF (docs/benchmarks.md).
"""

from __future__ import annotations

import collections
import logging
import os
import re
import threading
import time
from functools import cache
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.convert import NO_OCR_FOR_IMAGES, FileLimits, OcrOptions, convert_bytes
from guaipeca.convert.ocr import MIN_OCR_DPI, installed_languages, render_dpi, tesseract_language
from guaipeca.errors import (
    AbandonedError,
    ConversionError,
    ConversionTimeoutError,
    InvalidArgumentError,
)
from guaipeca.ingest import NO_OCR, sync_folder
from support import SHARED_DATA, CountingEmbedder
from support.images import speckle_pdf

pymupdf = pytest.importorskip("pymupdf")

DOCS = SHARED_DATA / "docs"
SAMPLE = "amt_handbook_sample.pdf"  # English, one page
ON = OcrOptions(enabled=True, language="english")
OFF = OcrOptions(enabled=False)


@pytest.fixture(autouse=True)
def _needs_tesseract() -> None:
    if "eng" not in installed_languages():
        message = "Tesseract's language data is not installed (apt install tesseract-ocr-eng)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it: .ci/run
        pytest.skip(message)


def _doc(name: str) -> bytes:
    path = DOCS / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"shared test document {name} is missing")
        pytest.skip(f"shared test document {name} is missing")
    return path.read_bytes()


def rasterise(pdf: bytes, dpi: int = 200, pages: list[int] | None = None) -> bytes:
    """An image-only PDF of ``pdf``: each page (or the listed 0-based ones) rendered."""
    src = pymupdf.open(stream=pdf, filetype="pdf")
    out = pymupdf.open()
    for n in pages if pages is not None else range(len(src)):
        page = src[n]
        target = out.new_page(width=page.rect.width, height=page.rect.height)
        target.insert_image(target.rect, pixmap=page.get_pixmap(dpi=dpi, alpha=False))
    return bytes(out.tobytes())


def page_image(pdf: bytes, fmt: str, dpi: int = 200) -> bytes:
    return bytes(pymupdf.open(stream=pdf, filetype="pdf")[0].get_pixmap(dpi=dpi).tobytes(fmt))


def _words(text: str) -> collections.Counter[str]:
    return collections.Counter(w.lower() for w in re.findall(r"[^\W_]+", text))


def recall(original: str, ocr: str) -> float:
    want, got = _words(original), _words(ocr)
    return sum((want & got).values()) / sum(want.values())


@cache
def _original() -> str:
    return convert_bytes(_doc(SAMPLE), ".pdf", ocr=OFF).text


@cache
def _scanned() -> tuple[bytes, object]:
    scan = rasterise(_doc(SAMPLE))
    return scan, convert_bytes(scan, ".pdf", name="scan.pdf", ocr=ON)


def test_a_scanned_pdf_is_read_with_ocr_and_keeps_its_words() -> None:
    scan, result = _scanned()
    assert not pymupdf.open(stream=scan, filetype="pdf")[0].get_text().strip()  # image only
    assert result.format == "pdf"  # type: ignore[attr-defined]
    assert result.metadata == {"ocr_pages": [1]}  # type: ignore[attr-defined]
    assert result.warnings == ()  # type: ignore[attr-defined]
    assert recall(_original(), result.text) >= 0.9  # type: ignore[attr-defined]


def test_without_ocr_the_scan_is_refused_with_one_line() -> None:
    scan, _ = _scanned()
    with pytest.raises(ConversionError) as err:
        convert_bytes(scan, ".pdf", ocr=OFF)
    assert str(err.value) == (
        "no text layer on its only page (a scanned document?) and OCR is off or Tesseract "
        "is not installed"
    )


@pytest.mark.parametrize(
    ("fmt", "ext"), [("png", ".png"), pytest.param("jpg", ".jpeg", marks=pytest.mark.slow)]
)
def test_an_image_file_is_one_ocr_page(fmt: str, ext: str) -> None:
    result = convert_bytes(page_image(_doc(SAMPLE), fmt), ext, name="page" + ext, ocr=ON)
    assert result.format == "image"
    assert result.page_starts == (0,)
    assert result.metadata == {"ocr_pages": [1]}
    assert recall(_original(), result.text) >= 0.9


@pytest.mark.slow
def test_a_multi_page_tiff_gives_one_page_per_frame(tmp_path: Path) -> None:
    from PIL import Image

    frames = [
        Image.open(__import__("io").BytesIO(page_image(_doc(SAMPLE), "png"))),
        Image.new("RGB", (400, 200), "white"),  # a blank frame: no text, no warning
    ]
    path = tmp_path / "scan.tiff"
    frames[0].save(path, save_all=True, append_images=frames[1:], dpi=(200, 200))
    result = convert_bytes(path.read_bytes(), ".tiff", ocr=ON)
    assert result.page_starts is not None and len(result.page_starts) == 2
    assert result.metadata == {"ocr_pages": [1]}


def test_an_image_without_ocr_is_refused() -> None:
    with pytest.raises(ConversionError) as err:
        convert_bytes(page_image(_doc(SAMPLE), "png"), ".png", ocr=OFF)
    assert "OCR, which is off or not installed" in str(err.value)
    assert "tesseract-ocr" in str(err.value)


def test_without_ocr_a_folders_images_are_skipped_and_one_read_before_is_kept(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.md").write_text("a note beside a scanned page")
    (folder / "page.png").write_bytes(page_image(_doc(SAMPLE), "png"))
    index = Index(embedder=CountingEmbedder())
    assert sync_folder(index, folder, ocr=ON).added == 2
    read_before = index.get_document("page.png").text
    assert read_before.strip()
    (folder / "page.png").write_bytes(page_image(_doc(SAMPLE), "png", dpi=150))  # changed
    (folder / "new.png").write_bytes(page_image(_doc(SAMPLE), "png"))
    report = sync_folder(index, folder, ocr=OFF)
    assert report.failed == [] and report.removed == 0
    assert sorted(report.skipped) == [
        (str(folder / "new.png"), NO_OCR_FOR_IMAGES, NO_OCR),
        (str(folder / "page.png"), NO_OCR_FOR_IMAGES, NO_OCR),
    ]
    assert index.get_document("page.png").text == read_before
    assert {d.doc_id for d in index.list_documents()} == {"note.md", "page.png"}


def test_a_broken_image_is_refused() -> None:
    with pytest.raises(ConversionError, match="not a readable PNG image"):
        convert_bytes(b"\x89PNG\r\n\x1a\nbroken", ".png", ocr=ON)


def test_the_page_budget_leaves_later_pages_with_a_note() -> None:
    data = _doc(SAMPLE)
    two = rasterise(data, pages=[0, 0])
    result = convert_bytes(two, ".pdf", ocr=OcrOptions(enabled=True, max_pages=1))
    assert result.metadata == {"ocr_pages": [1]}
    assert result.warnings == (
        "page 2 was not read with OCR: over the budget of 1 page per file (ocr.max_pages)",
    )


def _rendered_pixels(page: object, dpi: int) -> int:
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)  # type: ignore[attr-defined]
    return int(pix.width * pix.height)


@pytest.mark.parametrize(("width", "height"), [(595, 842), (2380, 3368), (14_400, 200)])
def test_a_page_is_rendered_for_ocr_at_the_highest_dpi_within_the_pixel_limit(
    width: int, height: int
) -> None:
    page = pymupdf.open().new_page(width=width, height=height)
    limit = 25_000_000
    dpi, problem = render_dpi(page, 300, limit)
    assert problem is None
    assert _rendered_pixels(page, dpi) <= limit
    if dpi < 300:  # lowered as little as the limit needs
        assert _rendered_pixels(page, dpi + 2) > limit


def test_a_page_too_large_even_at_the_lowest_dpi_is_not_read() -> None:
    page = pymupdf.open().new_page(width=14_400, height=14_400)
    assert render_dpi(page, 300, 1_000_000) == (
        0,
        f"rendered at {MIN_OCR_DPI} dpi the page is 16,008,001 pixels; the limit is "
        "limits.max_image_pixels (1,000,000)",
    )


def test_a_scan_over_the_pixel_limit_at_300_dpi_is_read_at_a_lower_dpi() -> None:
    """4 MP instead of the 8.4 MP of a letter page at 300 dpi: about 206 dpi."""
    scan, _ = _scanned()
    limits = FileLimits(max_image_pixels=4_000_000)
    result = convert_bytes(scan, ".pdf", ocr=ON, limits=limits)
    assert result.metadata == {"ocr_pages": [1]}
    assert result.warnings == ()
    assert recall(_original(), result.text) >= 0.85


def test_portuguese_is_read_with_the_portuguese_model() -> None:
    if "por" not in installed_languages():  # the English fallback is tested below
        pytest.skip("Tesseract's Portuguese data is not installed (apt install tesseract-ocr-por)")
    doc = pymupdf.open()
    page = doc.new_page()
    text = "A educação e a habitação são ações do município.\nCoração, canção, exceção."
    page.insert_text((72, 100), text, fontsize=14, fontname="helv")
    scan = rasterise(doc.tobytes(), dpi=300)
    result = convert_bytes(scan, ".pdf", ocr=OcrOptions(enabled=True, language="portuguese"))
    for word in ("educação", "habitação", "ações", "município", "Coração", "exceção"):
        assert word in result.text


def test_a_language_without_tesseract_data_falls_back_to_english_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # "qaa" is reserved for local use in ISO 639-2: no Tesseract data exists for it.
    assert "qaa" not in installed_languages()
    options = OcrOptions(enabled=True, language="qaa")
    with caplog.at_level(logging.WARNING, logger="guaipeca.convert.ocr"):
        assert options.engine() == "eng"
        result = convert_bytes(_scanned()[0], ".pdf", name="scan.pdf", ocr=options)
        assert options.engine() == "eng"
    assert recall(_original(), result.text) >= 0.9  # read, in English
    warned = [r.getMessage() for r in caplog.records if "'qaa'" in r.getMessage()]
    assert warned == [
        "no Tesseract data for 'qaa' is installed, so OCR reads English instead "
        "(Debian: apt install tesseract-ocr-qaa)"
    ]


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("portuguese", "por"),
        ("english", "eng"),
        ("pt-BR", "por"),
        ("es", "spa"),
        ("deu", "deu"),
        (None, "eng"),
        ("klingon", "eng"),
    ],
)
def test_corpus_languages_map_to_tesseract_codes(language: str | None, code: str) -> None:
    assert tesseract_language(language) == code


def test_bad_ocr_options_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="max_pages"):
        OcrOptions(max_pages=-1)
    with pytest.raises(InvalidArgumentError, match="dpi"):
        OcrOptions(dpi=10)


def test_scanned_copies_are_indexed_found_and_marked_as_ocr(tmp_path: Path) -> None:
    from guaipeca import Index
    from guaipeca.embed import HashingEmbedder
    from guaipeca.ingest import sync_folder

    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "handbook-scan.pdf").write_bytes(_scanned()[0])
    (folder / "handbook-page.png").write_bytes(page_image(_doc(SAMPLE), "png"))
    (folder / "notes.md").write_text("# Notes\n\nNothing about aircraft here.\n")
    index = Index(tmp_path / "idx", embedder=HashingEmbedder(64))
    report = sync_folder(index, folder, corpus="scans", cache_dir=tmp_path / "converted")
    assert report.failed == [] and report.added == 3
    assert index.get_document("handbook-scan.pdf", corpus="scans").metadata == {"ocr_pages": [1]}
    # A query written from the original's text layer finds both scanned copies first.
    line = max(_original().split("\n"), key=len)
    query = " ".join(line.split()[:12])
    hits = index.search(query, mode="keyword", corpora=["scans"], top_k=3)
    assert {h.doc_id for h in hits[:2]} == {"handbook-scan.pdf", "handbook-page.png"}
    for hit in hits[:2]:
        assert hit.ocr is True and hit.page_start == 1 and hit.to_dict()["ocr"] is True
    notes = index.search("aircraft notes", mode="keyword", corpora=["scans"])
    assert [h.ocr for h in notes if h.doc_id == "notes.md"] == [False]


def test_without_tesseract_on_the_path_ocr_is_off_with_a_one_line_note(tmp_path: Path) -> None:
    """A fresh process whose PATH has no tesseract program: "auto" means off."""
    import subprocess
    import sys

    scan = tmp_path / "scan.pdf"
    scan.write_bytes(_scanned()[0])
    png = tmp_path / "page.png"
    png.write_bytes(page_image(_doc(SAMPLE), "png"))
    script = (
        "import sys\n"
        "from guaipeca.convert import convert_file\n"
        "from guaipeca.errors import ConversionError\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        convert_file(path)\n"
        "    except ConversionError as exc:\n"
        "        print(exc)\n"
    )
    env = {**os.environ, "PATH": str(tmp_path)}  # python is run by its full path
    done = subprocess.run(
        [sys.executable, "-c", script, str(scan), str(png)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "no text layer on its only page (a scanned document?) and OCR is off or Tesseract "
        "is not installed",
        "an image is read with OCR, which is off or not installed (Debian: apt install "
        "tesseract-ocr tesseract-ocr-eng)",
    ]


# -- issue 29, 2: a time budget per file and per page -------------------------------------
def test_a_scan_over_the_file_budget_is_refused_naming_the_setting() -> None:
    """OCR stops at the budget (Tesseract gets only the time left), not after every page."""
    scan = speckle_pdf(6)  # about 30 s of OCR at 300 dpi on an idle core
    started = time.perf_counter()
    with pytest.raises(ConversionTimeoutError) as caught:
        convert_bytes(scan, ".pdf", ocr=ON, limits=FileLimits(convert_timeout_seconds=1))
    assert time.perf_counter() - started < 10
    assert str(caught.value) == (
        "conversion took longer than limits.convert_timeout_seconds (1 s); the file was not read"
    )


def test_pages_over_the_page_budget_are_left_unread_naming_the_setting() -> None:
    scan = speckle_pdf(2)
    with pytest.raises(ConversionTimeoutError) as caught:
        convert_bytes(scan, ".pdf", ocr=OcrOptions(enabled=True, page_timeout_seconds=0.2))
    assert str(caught.value) == (
        "no text layer, and pages 1-2 were not read with OCR: Tesseract took longer than "
        "ocr.page_timeout_seconds (0.2 s)"
    )


def test_a_cancelled_conversion_stops_at_its_next_page() -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(AbandonedError):
        convert_bytes(speckle_pdf(3), ".pdf", ocr=ON, cancel=cancel)
