"""OCR quality on scanned copies of the shared PDFs: one command, results in bench/results/ocr.json.

    .venv/bin/python bench/ocr.py [--dpi 200] [--docs ../shared/data/docs]

Each shared PDF is rasterised (every page rendered at ``--dpi`` to an RGB image) into an
image-only PDF, the way a scanner would deliver it, and page 1 is also saved as a PNG. Then:

1. **Word recall**: the words of the original text layer (PyMuPDF's plain ``get_text``,
   lowercased, letters and digits only, as a multiset) found in Guaipeca's converted text of
   the scanned copy (``convert_bytes`` with OCR on, the corpus language English). Recall =
   |original ∩ OCR| / |original|. The converter drops running heads and page numbers, which
   the raw layer holds, so the recall of the original's *converted* text is given too (the
   same pipeline on both sides: what OCR itself loses). Also for the PNG against page 1.
2. **Findable**: all scanned copies go into one in-memory index with the bundled model; for
   each, a query made of the 8 rarest words of a line taken from the middle of the
   original's text (converted from its text layer) must put the scanned copy first (hybrid).

Seconds per page of OCR are recorded too (one process, this machine).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymupdf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from guaipeca import Index  # noqa: E402
from guaipeca.convert import OcrOptions, convert_bytes  # noqa: E402

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> collections.Counter[str]:
    return collections.Counter(w.lower() for w in _WORD.findall(text))


def recall(original: str, ocr: str) -> float:
    want = words(original)
    got = words(ocr)
    total = sum(want.values())
    return sum((want & got).values()) / total if total else 1.0


def rasterise(pdf: bytes, dpi: int) -> tuple[bytes, bytes]:
    """(image-only PDF, PNG of page 1) of a PDF, each page rendered at ``dpi``."""
    src = pymupdf.open(stream=pdf, filetype="pdf")
    out = pymupdf.open()
    png = b""
    for page in src:
        pix = page.get_pixmap(dpi=dpi, alpha=False)
        if not png:
            png = pix.tobytes("png")
        target = out.new_page(width=page.rect.width, height=page.rect.height)
        target.insert_image(target.rect, pixmap=pix)
    return out.tobytes(garbage=3, deflate=True), png


def _distinct(line: str) -> int:
    return len({w.lower() for w in _WORD.findall(line) if len(w) > 2})


def query_from(text: str) -> str:
    """The 8 rarest words (in this text) of the line with the most distinct words in the
    middle third of it (lines of 6 words or more; on a page with fewer than 3, every line)."""
    lines = [ln for ln in text.splitlines() if len(_WORD.findall(ln)) >= 6]
    if len(lines) < 3:  # a short page
        lines = [ln for ln in text.splitlines() if _WORD.search(ln)]
    third = lines[len(lines) // 3 : 2 * len(lines) // 3] or lines
    line = max(third, key=_distinct)
    counts = words(text)
    ranked = sorted(
        dict.fromkeys(w for w in _WORD.findall(line) if len(w) > 2), key=lambda w: counts[w.lower()]
    )
    return " ".join(ranked[:8])


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _tesseract() -> str:
    done = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dpi", type=int, default=200, help="scan resolution (default 200)")
    parser.add_argument("--docs", default=str(ROOT.parent / "shared" / "data" / "docs"))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ocr.json"))
    args = parser.parse_args()
    options = OcrOptions(enabled=True, language="english")
    if options.engine() is None:
        sys.exit("Tesseract's language data is not installed (apt install tesseract-ocr-eng)")
    rows: list[dict[str, Any]] = []
    index = Index()
    queries: dict[str, str] = {}
    for path in sorted(Path(args.docs).glob("*.pdf")):
        data = path.read_bytes()
        original = pymupdf.open(stream=data, filetype="pdf")
        layer = "\n".join(page.get_text() for page in original)
        first_page = original[0].get_text()
        digital = convert_bytes(data, ".pdf", name=path.name, ocr=options).text
        scan, png = rasterise(data, args.dpi)
        started = time.perf_counter()
        converted = convert_bytes(scan, ".pdf", name=path.name, ocr=options)
        seconds = time.perf_counter() - started
        png_text = convert_bytes(png, ".png", name=path.stem + ".png", ocr=options).text
        row = {
            "file": path.name,
            "pages": len(original),
            "ocr_pages": len(converted.metadata.get("ocr_pages", [])),
            "word_recall": round(recall(layer, converted.text), 4),
            "word_recall_vs_converted_original": round(recall(digital, converted.text), 4),
            "png_page1_word_recall": round(recall(first_page, png_text), 4),
            "ocr_seconds_per_page": round(seconds / len(original), 2),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        doc_id = f"scanned/{path.name}"
        index.add_documents({doc_id: converted.text})
        queries[doc_id] = query_from(digital)
    for row in rows:
        doc_id = f"scanned/{row['file']}"
        hits = index.search(queries[doc_id], top_k=3)
        row["query"] = queries[doc_id]
        row["query_top_hit"] = hits[0].doc_id if hits else None
        row["found_first"] = bool(hits) and hits[0].doc_id == doc_id
    result = {
        "command": f"python bench/ocr.py --dpi {args.dpi}",
        "machine": f"{platform.machine()}, {_cpu()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, PyMuPDF {pymupdf.VersionBind}, {_tesseract()}",
        "ocr": {"language": options.engine(), "dpi": options.dpi},
        "scan_dpi": args.dpi,
        "rows": rows,
        "min_word_recall": min(r["word_recall"] for r in rows),
        "min_word_recall_vs_converted_original": min(
            r["word_recall_vs_converted_original"] for r in rows
        ),
        "all_found_first": all(r["found_first"] for r in rows),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()
