"""Text files without a byte-order mark in UTF-16 (what Windows calls "Unicode" text): read
in either byte order, while binary files with NUL bytes stay refused."""

from __future__ import annotations

import sqlite3
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from guaipeca.convert import convert_file
from guaipeca.errors import ConversionError

_PORTUGUESE = (
    "# Relatório de gestão\n\n"
    "A educação pública do município prevê ações de inclusão e exceções à regra.\r\n"
    "São Paulo, março de 2024 — coração, informação, análise: tudo está aqui.\n"
)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_bom_is_read_in_its_byte_order(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "relatorio.md"
    path.write_bytes(_PORTUGUESE.encode(codec))  # Python writes these codecs without a BOM
    assert not path.read_bytes().startswith((b"\xff\xfe", b"\xfe\xff"))
    result = convert_file(path)
    assert result.text == _PORTUGUESE.replace("\r\n", "\n")
    assert result.metadata == {"encoding": codec}


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_a_short_ascii_line_in_utf16_is_read_too(tmp_path: Path, codec: str) -> None:
    # Read in the other byte order these letters are CJK ideographs: the detector chooses.
    path = tmp_path / "nota.txt"
    path.write_bytes("hello world".encode(codec))
    assert convert_file(path).text == "hello world"


def _sqlite(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("create table t (a integer, b text)")
        db.executemany("insert into t values (?, ?)", [(i, f"row {i}") for i in range(200)])
    db.close()
    return path.read_bytes()


def _zip(path: Path) -> bytes:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", _PORTUGUESE * 20)
    return path.read_bytes()


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: struct.pack("<1000i", *range(1000)),  # small integers: NUL-heavy
        lambda tmp: struct.pack("<500d", *(i / 7 for i in range(500))),
        lambda tmp: _PORTUGUESE.encode("utf-32-le"),  # text, but not UTF-16
        lambda tmp: bytes(range(256)) * 8,
        lambda tmp: _sqlite(tmp / "db.sqlite"),
        lambda tmp: _zip(tmp / "a.zip"),
        lambda tmp: Path("/bin/sh").resolve().read_bytes(),  # an executable
    ],
    ids=["int32", "float64", "utf-32", "all-bytes", "sqlite", "zip", "executable"],
)
def test_binary_with_nul_bytes_is_still_refused(
    tmp_path: Path, make: Callable[[Path], bytes]
) -> None:
    path = tmp_path / "binary.txt"
    path.write_bytes(make(tmp_path))
    with pytest.raises(ConversionError, match=r"^looks binary \(NUL bytes\), not text$"):
        convert_file(path)
