"""The conversion cache: converted Markdown kept by source-file SHA-256, so an unchanged
file (or an upload already converted outside the write turn) is not converted again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from guaipeca.convert import Converted
from guaipeca.convert.ocr import OcrOptions

__all__ = ["CONVERTER_VERSION", "ConversionCache", "cache_key"]

log = logging.getLogger("guaipeca")

# Bump when converter output changes, so cached conversions are redone.
# 2: encodings detected, images and link targets dropped, OCR, conversion metadata.
# 3: reStructuredText (.rst, and RST saved as .txt) and AsciiDoc converted to Markdown.
CONVERTER_VERSION = 3
# Formats whose conversion depends on the OCR settings.
_OCR_FORMATS = ("pdf", "image")


class ConversionCache:
    """Converted Markdown by source-file SHA-256, under ``<data>/converted/`` (JSON files).

    ``ocr_key`` names the OCR settings in use: a PDF or image converted under other settings
    (OCR off then on, another language) is a cache miss."""

    def __init__(self, folder: Path | None, ocr_key: str = "") -> None:
        self.folder = folder
        self.ocr_key = ocr_key

    def _path(self, sha: str) -> Path | None:
        return self.folder / sha[:2] / f"{sha}.json" if self.folder else None

    def get(self, sha: str) -> Converted | None:
        path = self._path(sha)
        if path is None or not path.exists():
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("version") != CONVERTER_VERSION or "text_sha256" not in raw:
                return None
            if raw["format"] in _OCR_FORMATS and raw.get("ocr") != self.ocr_key:
                return None
            if hashlib.sha256(raw["text"].encode("utf-8")).hexdigest() != raw["text_sha256"]:
                raise ValueError("checksum mismatch")  # damaged, yet still valid JSON
            pages = raw["page_starts"]
            return Converted(
                text=raw["text"],
                page_starts=tuple(pages) if pages is not None else None,
                format=raw["format"],
                warnings=tuple(raw["warnings"]),
                metadata=dict(raw.get("metadata") or {}),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            # A damaged cache entry is only a cache miss: convert again.
            log.warning("conversion cache entry %s is unreadable; converting again", path.name)
            return None

    def put(self, sha: str, converted: Converted) -> None:
        path = self._path(sha)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self._write(tmp, converted)
        except OSError:  # a full disk: leave no partial entry behind
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)

    def _write(self, tmp: Path, converted: Converted) -> None:
        tmp.write_text(
            json.dumps(
                {
                    "version": CONVERTER_VERSION,
                    "text": converted.text,
                    "text_sha256": hashlib.sha256(converted.text.encode("utf-8")).hexdigest(),
                    "page_starts": converted.page_starts,
                    "format": converted.format,
                    "warnings": list(converted.warnings),
                    "metadata": converted.metadata,
                    "ocr": self.ocr_key,
                },
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )


def cache_key(ocr: OcrOptions) -> str:
    """What the conversion cache records of the OCR settings (see ``ConversionCache``)."""
    engine = ocr.engine()
    return f"{engine}:{ocr.max_pages}:{ocr.dpi}" if engine else "off"
