"""The conversion dispatcher and hostile inputs: every refusal is one clear line."""

from __future__ import annotations

import io
import os
import re
import resource
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from guaipeca.convert import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_IMAGE_PIXELS,
    SUPPORTED_EXTENSIONS,
    Converted,
    FileLimits,
    OcrOptions,
    convert_bytes,
    convert_file,
)
from guaipeca.errors import ConversionError, GuaipecaError
from support import shared_data
from support.images import BOMB_SIDE, bomb_png
from support.reliability import PeakRssGrowth

OFFICE = (".docx", ".pptx", ".xlsx")


def _refusal(fn: Callable[[], object]) -> str:
    """Run ``fn``, expect a ConversionError, and check its message is one user-facing line."""
    with pytest.raises(ConversionError) as info:
        fn()
    message = str(info.value)
    assert message and "\n" not in message and "Traceback" not in message
    assert len(message) < 300
    return message


def _zip(entries: dict[str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def zip_bomb() -> bytes:
    """A 1.4 MB zip whose ``word/document.xml`` inflates to 300 MB of zeros, written in
    1 MB pieces so building it never holds the 300 MB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as entry:
            block = bytes(1 << 20)
            for _ in range(300):
                entry.write(block)
    return buf.getvalue()


# -- the dispatcher ------------------------------------------------------------------------


def test_supported_extensions_and_default_limit() -> None:
    assert SUPPORTED_EXTENSIONS == (
        ".md",
        ".markdown",
        ".txt",
        ".rst",
        ".adoc",
        ".asciidoc",
        ".pdf",
        ".docx",
        ".pptx",
        ".xlsx",
        ".html",
        ".htm",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
    )
    assert DEFAULT_MAX_BYTES == 50 * 1024 * 1024
    assert issubclass(ConversionError, GuaipecaError)


def test_markdown_file_keeps_its_text_with_lf_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(b"# Title\r\n\r\nSome *text*.\r\nOld Mac line\rend\n")
    result = convert_file(path)
    assert result == Converted(
        "# Title\n\nSome *text*.\nOld Mac line\nend\n",
        None,
        "markdown",
        metadata={"encoding": "utf-8"},
    )


def test_txt_is_text_and_markdown_extension_is_markdown(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("plain\n", encoding="utf-8")
    (tmp_path / "b.markdown").write_text("# B\n", encoding="utf-8")
    assert convert_file(tmp_path / "a.txt").format == "text"
    assert convert_file(str(tmp_path / "b.markdown")).format == "markdown"


def test_extension_is_case_insensitive(tmp_path: Path) -> None:
    (tmp_path / "README.TXT").write_text("hello\n", encoding="utf-8")
    assert convert_file(tmp_path / "README.TXT").text == "hello\n"
    assert convert_bytes(b"hi", "MD").format == "markdown"
    assert convert_bytes(b"hi", ".Txt").format == "text"
    assert convert_bytes(b"<p>x</p>", "HTM").format == "html"


def test_utf8_bom_is_accepted_and_dropped() -> None:
    result = convert_bytes("\ufeffcafé\r\n".encode(), ".txt")
    assert result.text == "café\n"
    assert result.metadata == {"encoding": "utf-8-sig"}


_PORTUGUESE = "Ação, coração e educação: a política do município prevê exceções.\n"


@pytest.mark.parametrize(
    ("data", "encoding", "text"),
    [
        (_PORTUGUESE.encode("utf-8"), "utf-8", _PORTUGUESE),
        (_PORTUGUESE.encode("utf-16"), "utf-16", _PORTUGUESE),  # with its BOM (LE here)
        (_PORTUGUESE.encode("utf-16-be").join([b"\xfe\xff", b""]), "utf-16", _PORTUGUESE),
        (_PORTUGUESE.encode("latin-1"), "cp1252", _PORTUGUESE),  # cp1252 reads Latin-1 text
        ("Preço “especial” – só hoje… 5 €\r\n".encode("cp1252"), "cp1252",
         "Preço “especial” – só hoje… 5 €\n"),
        ("café au lait".encode("latin-1"), "cp1252", "café au lait"),
        # 0x81 is unassigned in cp1252: only Latin-1 reads it (as a C1 control); with
        # enough text around it the detector still takes it for text.
        (("Olá, canção. " * 20 + "\x81\n").encode("latin-1"), "latin-1",
         "Olá, canção. " * 20 + "\x81\n"),
    ],
)  # fmt: skip
def test_text_encodings_are_detected_and_recorded(data: bytes, encoding: str, text: str) -> None:
    result = convert_bytes(data, ".txt")
    assert result.text == text
    assert result.metadata == {"encoding": encoding}


def test_unicode_text_is_kept_exactly() -> None:
    text = "Olá, mundo — 日本語 ✓\n\tindented\n"
    assert convert_bytes(text.encode(), ".md").text == text


def test_unsupported_extension_is_refused_with_the_list() -> None:
    message = _refusal(lambda: convert_bytes(b"MZ", ".exe"))
    assert message.startswith("unsupported file type '.exe'")
    assert ".docx" in message and ".md" in message


def test_file_without_extension_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("all:\n", encoding="utf-8")
    assert "no extension" in _refusal(lambda: convert_file(tmp_path / "Makefile"))


# -- hostile text --------------------------------------------------------------------------


def test_binary_junk_named_md_looks_binary(tmp_path: Path) -> None:
    path = tmp_path / "junk.md"
    path.write_bytes(bytes(range(256)) * 8)
    assert _refusal(lambda: convert_file(path)) == "looks binary (NUL bytes), not text"


def test_control_character_noise_is_refused_as_binary() -> None:
    noise = bytes(b for b in range(1, 256) if b not in b"\t\n\r ") * 8
    message = _refusal(lambda: convert_bytes(noise, ".txt"))
    assert message == (
        "not text in a known encoding (UTF-8, UTF-16 with a BOM, Windows-1252, Latin-1)"
    )


def test_bad_bytes_after_a_utf8_bom_are_refused_with_the_offset() -> None:
    message = _refusal(lambda: convert_bytes(b"\xef\xbb\xbfab\xff", ".txt"))
    assert message == "not valid utf-8 text after its byte-order mark (offset 2)"


@pytest.mark.parametrize("ext", [".md", ".txt", ".docx", ".pptx", ".xlsx", ".html", ".pdf"])
def test_empty_file_is_refused(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"empty{ext}"
    path.write_bytes(b"")
    assert _refusal(lambda: convert_file(path)) == "empty file"


def test_whitespace_only_text_is_empty() -> None:
    assert _refusal(lambda: convert_bytes(b" \r\n\t\n", ".md")) == "empty file"
    assert _refusal(lambda: convert_bytes(b"\xef\xbb\xbf\n", ".txt")) == "empty file"


# -- size ----------------------------------------------------------------------------------


def test_oversized_file_is_refused_from_stat_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as fh:
        fh.truncate(51 * 1024 * 1024)  # sparse: costs no disk and no time

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened although stat already said it is too big")

    monkeypatch.setattr(Path, "open", no_reading)
    monkeypatch.setattr(Path, "read_bytes", no_reading)
    started = time.perf_counter()
    message = _refusal(lambda: convert_file(path))
    assert time.perf_counter() - started < 1.0
    assert message == "file is 51.0 MB; the limit is 50.0 MB"


def test_max_bytes_is_honoured_with_readable_units(tmp_path: Path) -> None:
    path = tmp_path / "small.md"
    path.write_text("eleven char", encoding="utf-8")
    assert _refusal(lambda: convert_file(path, max_bytes=10)) == (
        "file is 11 bytes; the limit is 10 bytes"
    )
    assert convert_file(path, max_bytes=11).text == "eleven char"
    message = _refusal(lambda: convert_bytes(b"x" * 3000, ".txt", max_bytes=2048))
    assert message == "file is 2.9 KB; the limit is 2.0 KB"


# -- the file system -----------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    assert _refusal(lambda: convert_file(tmp_path / "nope.md")) == "file not found"


def test_directory_named_like_a_file(tmp_path: Path) -> None:
    (tmp_path / "x.txt").mkdir()
    assert _refusal(lambda: convert_file(tmp_path / "x.txt")) == "is a directory, not a file"


def test_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    # Reading a FIFO would block forever; it must be refused from stat alone.
    assert _refusal(lambda: convert_file(path)) == "not a regular file"


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads files whatever their mode; the simulated case below covers the message",
)
def test_unreadable_file_chmod_000(tmp_path: Path) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("top secret\n", encoding="utf-8")
    path.chmod(0)
    try:
        assert _refusal(lambda: convert_file(path)) == "permission denied"
    finally:
        path.chmod(0o600)


def test_unreadable_file_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("top secret\n", encoding="utf-8")

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "open", denied)
    message = _refusal(lambda: convert_file(path))
    assert message == "permission denied"
    assert str(tmp_path) not in message


# -- hostile Office files ------------------------------------------------------------------


@pytest.mark.parametrize("ext", OFFICE)
def test_zip_bomb_is_refused_by_the_precheck_quickly_and_in_bounded_memory(
    zip_bomb: bytes, ext: str
) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.perf_counter()
    message = _refusal(lambda: convert_bytes(zip_bomb, ext))
    elapsed = time.perf_counter() - started
    peak_growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    kind = ext[1:].upper()
    assert re.fullmatch(rf"{kind} expands to more than \d+ MB \(zip bomb\?\)", message)
    assert elapsed < 1.0
    assert peak_growth_mib < 100


def test_zip_bomb_cap_never_exceeds_200_mb(tmp_path: Path) -> None:
    # 5 MB of incompressible bytes lift the ratio cap past the 200 MB ceiling.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/media/noise.bin", os.urandom(5 * 1024 * 1024))
        with zf.open("word/document.xml", "w", force_zip64=True) as entry:
            block = bytes(1 << 20)
            for _ in range(201):
                entry.write(block)
    message = _refusal(lambda: convert_bytes(buf.getvalue(), ".docx"))
    assert message == "DOCX expands to more than 200 MB (zip bomb?)"


def test_zip_with_absurdly_many_entries_is_refused() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for i in range(50_001):
            zf.writestr(f"word/{i}", b"")
    message = _refusal(lambda: convert_bytes(buf.getvalue(), ".docx"))
    assert message == (
        "DOCX has 50,001 zip entries; the limit is limits.max_zip_entries (50,000) (zip bomb?)"
    )


@pytest.mark.parametrize("ext", OFFICE)
def test_random_bytes_are_not_a_valid_office_file(ext: str) -> None:
    junk = bytes((i * 7919 + 13) % 251 for i in range(4096))
    kind = ext[1:].upper()
    assert _refusal(lambda: convert_bytes(junk, ext)) == f"not a valid {kind} (bad zip)"


def test_truncated_docx_is_a_bad_zip() -> None:
    data = _zip({"[Content_Types].xml": "<Types/>", "word/document.xml": "<w:document/>"})
    assert _refusal(lambda: convert_bytes(data[:-30], ".docx")) == "not a valid DOCX (bad zip)"


def test_old_or_encrypted_office_file_is_named() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    message = _refusal(lambda: convert_bytes(ole, ".docx"))
    assert message == (
        "not a valid DOCX: it is password-protected or in the old binary Office format; "
        "save it unprotected as .docx"
    )


def test_pdf_bytes_named_docx_say_so() -> None:
    message = _refusal(lambda: convert_bytes(b"%PDF-1.7\n%binary", ".docx"))
    assert message == "not a valid DOCX: the file is a PDF; rename it to .pdf"


def test_plain_zip_named_docx_is_not_an_office_document() -> None:
    data = _zip({"photo.jpg": b"\xff\xd8\xff", "notes.txt": "hi"})
    message = _refusal(lambda: convert_bytes(data, ".docx"))
    assert message == "not a valid DOCX: a zip file, but not an Office document"


def test_other_office_kind_is_named() -> None:
    xlsx_like = _zip({"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<workbook/>"})
    message = _refusal(lambda: convert_bytes(xlsx_like, ".docx"))
    assert message == "not a valid DOCX: it is an XLSX file; rename it to .xlsx"


@pytest.mark.parametrize(
    ("ext", "part"),
    [(".docx", "word/document.xml"), (".pptx", "ppt/presentation.xml"), (".xlsx", "xl/x.xml")],
)
def test_library_failures_are_wrapped_in_one_line(ext: str, part: str) -> None:
    data = _zip({"[Content_Types].xml": "<Types/>", part: "<<< not xml\nsecond line"})
    message = _refusal(lambda: convert_bytes(data, ext, name="broken" + ext))
    assert message.startswith("could not convert: ")
    exc_type, _, detail = message.removeprefix("could not convert: ").partition(": ")
    assert exc_type.isidentifier()
    assert len(detail) <= 120


def test_library_failure_keeps_its_cause_for_debugging() -> None:
    data = _zip({"[Content_Types].xml": "<Types/>", "word/document.xml": "not xml"})
    with pytest.raises(ConversionError) as info:
        convert_bytes(data, ".docx")
    assert info.value.__cause__ is not None


# -- HTML decoding -------------------------------------------------------------------------


def test_html_uses_its_declared_charset() -> None:
    page = b"<html><head><meta charset='iso-8859-1'><title>T</title></head>"
    page += b"<body><h1>Caf\xe9</h1><p>cr\xe8me br\xfbl\xe9e</p></body></html>"
    result = convert_bytes(page, ".html")
    assert result.text == "# Café\n\ncrème brûlée\n"
    assert result.warnings == ()


def test_undeclared_non_utf8_html_is_read_as_windows_1252_with_a_warning() -> None:
    result = convert_bytes(b"<p>caf\xe9 \x93quoted\x94</p>", ".htm")
    assert result.text == "café “quoted”\n"
    assert result.warnings == ("no charset declared and not UTF-8; read as Windows-1252",)


def test_html_with_nul_bytes_is_binary() -> None:
    message = _refusal(lambda: convert_bytes(b"<p>\x00\x01\x02</p>", ".html"))
    assert message == "looks binary (NUL bytes), not HTML"


def test_html_without_text_is_refused() -> None:
    page = b"<html><body><script>var a = 1;</script><nav>Menu</nav></body></html>"
    assert _refusal(lambda: convert_bytes(page, ".html")) == "no text found in the HTML page"


def test_html_title_becomes_the_heading_when_there_is_no_h1() -> None:
    page = b"<html><head><title>My page</title></head><body><p>Body.</p></body></html>"
    assert convert_bytes(page, ".html").text == "# My page\n\nBody.\n"


def test_html_links_keep_their_text_and_images_are_dropped() -> None:
    page = (
        b'<p>See <a href="/wiki/Duck" title="Duck">ducks</a> and '
        b'<a href="https://example.org/x" title="t">the site</a>.'
        b'<img src="http://example.org/i.png" alt="A duck"></p>'
    )
    assert convert_bytes(page, ".html").text == "See ducks and the site.\n"


def test_html_media_and_linked_images_leave_no_trace() -> None:
    page = (
        b"<h1>Duck</h1><figure><a href='//upload.wikimedia.org/a.webm'>"
        b"<video poster='//upload.wikimedia.org/thumb/a.webm.jpg' controls>"
        b"<source src='//upload.wikimedia.org/a.webm' type='video/webm'></video></a>"
        b"<figcaption>A duckling preening</figcaption></figure>"
        b"<picture><source srcset='b.avif'><img src='b.jpg' alt='x'></picture>"
        b"<audio src='quack.ogg'></audio>"
        b"<h2>Feeding<span class='mw-editsection'>[<a href='?action=edit'>edit</a>]</span></h2>"
        b"<p>Ducks eat <a href='/wiki/Grass'>grasses</a>.</p>"
        b"<table><tr><th>Name</th><th>Picture</th></tr>"
        b"<tr><td><img src='c.png'></td><td><img src='d.png'></td></tr>"
        b"<tr><td>Mallard</td><td><a href='e.jpg'><img src='e.jpg'></a></td></tr></table>"
        b"<div class='navbox'>Waterfowl navigation</div>"
    )
    assert convert_bytes(page, ".html").text == (
        "# Duck\n\nA duckling preening\n\n## Feeding\n\nDucks eat grasses.\n\n"
        "| Name | Picture |\n| --- | --- |\n| Mallard |  |\n"
    )


def test_markdown_image_syntax_is_dropped_outside_code() -> None:
    from guaipeca.convert.office import tidy_markdown

    text = (
        "Intro ![a duck](data:image/png;base64...) text\n\n"
        "[![](//x.org/t.webm.jpg)](//x.org/t.webm) and [](//x.org/empty)\n\n"
        "```\n![kept](in-code.png)\n```\n"
    )
    assert tidy_markdown(text, images=False) == (
        "Intro  text\n\nand\n\n```\n![kept](in-code.png)\n```\n"
    )
    assert tidy_markdown(text) == text  # only converters that ask drop images


def test_html_table_caption_does_not_cost_the_header_row() -> None:
    page = b"<table><caption>Prices</caption><tr><td>a|b</td><td>c</td></tr>"
    page += b"<tr><td>1</td><td>2</td></tr></table>"
    assert convert_bytes(page, ".html").text == (
        "Prices\n\n| a\\|b | c |\n| --- | --- |\n| 1 | 2 |\n"
    )


def test_html_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("conversion tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    page = (
        b'<html><head><link rel="stylesheet" href="http://example.invalid/s.css">'
        b'<script src="http://example.invalid/a.js"></script></head><body>'
        b'<iframe src="http://example.invalid/f"></iframe><h1>Hi</h1>'
        b'<img src="http://example.invalid/i.png" alt="pic"><p>Text.</p></body></html>'
    )
    assert convert_bytes(page, ".html").text == "# Hi\n\nText.\n"


# -- PDF (deselected by -k "not pdf" while the PDF converter is being written) -------------


def test_pdf_dispatch_returns_pages(tmp_path: Path) -> None:
    pytest.importorskip("guaipeca.convert.pdf")
    source = shared_data("docs", "word365_structure.pdf")
    result = convert_file(source)
    assert result.format == "pdf"
    assert result.page_starts is not None and result.page_starts[0] == 0
    assert "\r" not in result.text


def test_pdf_junk_is_a_conversion_error() -> None:
    pytest.importorskip("guaipeca.convert.pdf")
    _refusal(lambda: convert_bytes(b"%PDF-1.4\nnot really", ".pdf"))


# -- image decompression bombs -------------------------------------------------------------

BOMB_REFUSAL = (
    f"image is {BOMB_SIDE:,} x {BOMB_SIDE:,} pixels ({BOMB_SIDE**2:,}); the limit is "
    f"limits.max_image_pixels ({DEFAULT_MAX_IMAGE_PIXELS:,})"
)


@pytest.mark.parametrize("ocr", [True, False], ids=["ocr-on", "ocr-off"])
def test_an_image_bomb_is_refused_from_its_header_quickly_and_in_bounded_memory(
    ocr: bool,
) -> None:
    """The issue's 2 MB PNG of 46,300 x 46,300 grey pixels (2.1 GB decoded): refused before
    anything decodes it, whether OCR could read it or not."""
    data = bomb_png()
    assert len(data) < 2_200_000
    started = time.perf_counter()
    with PeakRssGrowth() as peak:
        message = _refusal(
            lambda: convert_bytes(data, ".png", name="bomb.png", ocr=OcrOptions(enabled=ocr))
        )
    assert message == BOMB_REFUSAL
    assert time.perf_counter() - started < 2
    assert peak.growth < 100 * 2**20


def _jpeg(width: int, height: int, declared: tuple[int, int] | None = None) -> bytes:
    """A real JPEG, its frame header (SOF0) rewritten to ``declared`` (height, width)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (width, height), 255).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    if declared is not None:
        sof = data.index(b"\xff\xc0")
        data[sof + 5 : sof + 9] = declared[0].to_bytes(2, "big") + declared[1].to_bytes(2, "big")
    return bytes(data)


def test_a_jpeg_header_declaring_a_huge_frame_is_refused() -> None:
    message = _refusal(lambda: convert_bytes(_jpeg(16, 16, (60_000, 50_000)), ".jpg"))
    assert message.startswith("image is 50,000 x 60,000 pixels (3,000,000,000); the limit is")


def test_the_pixel_limit_is_a_setting_named_in_the_refusal() -> None:
    limits = FileLimits(max_image_pixels=1_000_000)
    message = _refusal(lambda: convert_bytes(_jpeg(1200, 1000), ".jpeg", limits=limits))
    assert message == (
        "image is 1,200 x 1,000 pixels (1,200,000); the limit is limits.max_image_pixels "
        "(1,000,000)"
    )


def test_bytes_that_are_no_image_are_refused_before_any_decoder_sees_them() -> None:
    message = _refusal(lambda: convert_bytes(b"\x89PNG but not really" * 10, ".png"))
    assert message == "not a readable PNG image"


def test_a_multi_frame_tiff_is_checked_frame_by_frame() -> None:
    from PIL import Image

    buf = io.BytesIO()
    small, large = Image.new("L", (100, 100), 255), Image.new("L", (1100, 1000), 255)
    small.save(buf, "TIFF", save_all=True, append_images=[large])
    limits = FileLimits(max_image_pixels=1_000_000)
    message = _refusal(lambda: convert_bytes(buf.getvalue(), ".tiff", limits=limits))
    assert message.startswith("frame 2 of the image is 1,100 x 1,000 pixels (1,100,000)")
