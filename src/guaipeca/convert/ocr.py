"""OCR for scanned PDF pages and image files, with the system's Tesseract (pytesseract).

The page is rendered by PyMuPDF at ``dpi`` and handed to the ``tesseract`` program
(Debian: ``tesseract-ocr`` with ``tesseract-ocr-eng``, ``tesseract-ocr-por``, ...), which
returns a PDF page with the recognised words as an invisible text layer at their places
and sizes. That page goes through the PDF converter's usual layout pass (headings from
sizes, paragraphs, running heads, page offsets), so a scan and its born-digital original
give nearly the same Markdown. Image files (``.png``, ``.jpg``, ``.tif`` ...) are wrapped
into a PDF with one page per frame and read the same way.

Why the program and not PyMuPDF's built-in OCR: on the shared test PDFs, MuPDF's Tesseract
dropped large title lines ("Titre" in word365_structure.pdf) that the same Tesseract version
run as a program reads, and it needs the same language data anyway.

``ocr.enabled: auto`` turns OCR on when the program and the language data are found, so a
machine without Tesseract keeps the one-line "no text layer" note per file.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from guaipeca.errors import ConversionError, InvalidArgumentError

if TYPE_CHECKING:
    from guaipeca.config import OcrSettings

__all__ = [
    "DEFAULT_PAGE_TIMEOUT_SECONDS",
    "IMAGE_EXTENSIONS",
    "MIN_OCR_DPI",
    "OcrOptions",
    "image_to_pdf",
    "installed_languages",
    "ocr_page",
    "render_dpi",
    "tesseract_language",
    "tesseract_package",
]

log = logging.getLogger(__name__)

#: Default of ``ocr.page_timeout_seconds``: a page Tesseract has not read in this long is
#: left unread (a warning names it). An A4 page of text takes 2-10 s on one busy core.
DEFAULT_PAGE_TIMEOUT_SECONDS = 60.0

#: Image file types read with OCR (lowercase, with the dot).
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff")

# Snowball language names (the corpus ``language``) and ISO codes → Tesseract's codes.
_TESSERACT_CODES = {
    "arabic": "ara",
    "basque": "eus",
    "catalan": "cat",
    "danish": "dan",
    "dutch": "nld",
    "english": "eng",
    "finnish": "fin",
    "french": "fra",
    "german": "deu",
    "greek": "ell",
    "hungarian": "hun",
    "indonesian": "ind",
    "irish": "gle",
    "italian": "ita",
    "lithuanian": "lit",
    "nepali": "nep",
    "norwegian": "nor",
    "portuguese": "por",
    "romanian": "ron",
    "russian": "rus",
    "serbian": "srp",
    "spanish": "spa",
    "swedish": "swe",
    "tamil": "tam",
    "turkish": "tur",
    "yiddish": "yid",
}
_ISO = {
    "ar": "ara",
    "ca": "cat",
    "da": "dan",
    "de": "deu",
    "el": "ell",
    "en": "eng",
    "es": "spa",
    "eu": "eus",
    "fi": "fin",
    "fr": "fra",
    "ga": "gle",
    "hu": "hun",
    "id": "ind",
    "it": "ita",
    "lt": "lit",
    "ne": "nep",
    "nl": "nld",
    "no": "nor",
    "pt": "por",
    "ro": "ron",
    "ru": "rus",
    "sr": "srp",
    "sv": "swe",
    "ta": "tam",
    "tr": "tur",
}


def tesseract_language(language: str | None) -> str:
    """Tesseract's code for a corpus language ("portuguese", "pt-BR", "por" → "por")."""
    if not language:
        return "eng"
    key = language.strip().lower()
    if key in _TESSERACT_CODES:
        return _TESSERACT_CODES[key]
    base = key.replace("_", "-").split("-", 1)[0]
    if base in _ISO:
        return _ISO[base]
    return key if len(key) == 3 and key.isalpha() else "eng"


@functools.cache
def installed_languages() -> frozenset[str]:
    """Tesseract's installed languages ("eng", "por", ...); empty when it is not installed."""
    if shutil.which("tesseract") is None:
        return frozenset()
    try:
        import pytesseract

        return frozenset(pytesseract.get_languages(config="")) - {"osd"}
    except (ImportError, OSError, RuntimeError, subprocess.SubprocessError):
        log.debug("tesseract did not list its languages", exc_info=True)
        return frozenset()


@dataclass(frozen=True, slots=True)
class OcrOptions:
    """How to OCR: ``enabled`` ("auto" = when Tesseract's data is installed), the corpus
    ``language`` (Snowball name or ISO code), ``max_pages`` per file, ``dpi`` and
    ``page_timeout_seconds`` (a page Tesseract has not read by then is left unread, with a
    warning)."""

    enabled: bool | Literal["auto"] = "auto"
    language: str | None = None
    max_pages: int = 100
    dpi: int = 300
    page_timeout_seconds: float = DEFAULT_PAGE_TIMEOUT_SECONDS

    @classmethod
    def from_settings(cls, settings: OcrSettings, language: str | None) -> OcrOptions:
        """The config file's ``ocr`` section, for a corpus in ``language``."""
        return cls(
            settings.enabled,
            language,
            settings.max_pages,
            settings.dpi,
            settings.page_timeout_seconds,
        )

    def __post_init__(self) -> None:
        if self.max_pages < 0:
            raise InvalidArgumentError(f"ocr max_pages must be 0 or more, got {self.max_pages}")
        if not 72 <= self.dpi <= 1200:
            raise InvalidArgumentError(f"ocr dpi must be between 72 and 1200, got {self.dpi}")
        if not self.page_timeout_seconds > 0:
            raise InvalidArgumentError(
                f"ocr page_timeout_seconds must be above 0, got {self.page_timeout_seconds}"
            )

    def engine(self) -> str | None:
        """The Tesseract language code to read with when OCR is on and can run, else None.

        A language without installed data falls back to English, with one warning per
        process naming the package that has the data."""
        if self.enabled is False or self.max_pages == 0:
            return None
        languages = installed_languages()
        code = tesseract_language(self.language)
        if code in languages:
            return code
        fallback = "eng" if "eng" in languages else None
        if languages:
            _warn_missing(code, fallback)
        return fallback


def tesseract_package(code: str) -> str:
    """The Debian/Ubuntu package with Tesseract's data for ``code`` ("por" →
    "tesseract-ocr-por")."""
    return f"tesseract-ocr-{code.replace('_', '-').lower()}"


@functools.cache  # once per process and language: every file of a run asks
def _warn_missing(code: str, fallback: str | None) -> None:
    instead = "OCR reads English instead" if fallback else "OCR is off"
    log.warning(
        "no Tesseract data for %r is installed, so %s (Debian: apt install %s)",
        code,
        instead,
        tesseract_package(code),
    )


#: Lowest resolution a page is rendered at for OCR; a page that would need less to stay
#: within ``limits.max_image_pixels`` is not read (nothing on it would be legible).
MIN_OCR_DPI = 20


def render_dpi(page: Any, dpi: int, max_pixels: int) -> tuple[int, str | None]:
    """The resolution to render ``page`` at for OCR: ``dpi``, or less so that the render
    has at most ``max_pixels`` pixels; and why the page cannot be read (else None): even
    :data:`MIN_OCR_DPI` would be too much for its size. (The images it shows are checked
    before, in ``convert.pdf``: rendering decodes them whole whatever the dpi.)"""
    width_in, height_in = float(page.rect.width) / 72, float(page.rect.height) / 72

    def pixels(at: int) -> int:  # as get_pixmap rounds, with a pixel to spare each way
        return (math.ceil(width_in * at) + 1) * (math.ceil(height_in * at) + 1)

    if pixels(dpi) > max_pixels:
        dpi = int(math.sqrt(max_pixels / max(width_in * height_in, 1e-9)))
        while dpi >= MIN_OCR_DPI and pixels(dpi) > max_pixels:
            dpi -= 1
        if dpi < MIN_OCR_DPI:
            at = pixels(MIN_OCR_DPI)
            return 0, (
                f"rendered at {MIN_OCR_DPI} dpi the page is {at:,} pixels; the limit is "
                f"limits.max_image_pixels ({max_pixels:,})"
            )
    return dpi, None


def ocr_page(page: Any, language: str, dpi: int, timeout: float) -> Any:
    """A one-page PyMuPDF document whose text layer is Tesseract's reading of ``page``,
    rendered at ``dpi`` (see :func:`render_dpi` for a resolution within the pixel limit);
    Tesseract is killed after ``timeout`` seconds.

    Rendered in grey, which is what Tesseract reads anyway: a third of the memory of RGB
    here, and less than half of Tesseract's own peak. Raises:
        RuntimeError, OSError: Tesseract failed or timed out on the page.
    """
    import pytesseract
    from PIL import Image

    fitz = importlib.import_module("pymupdf")
    pix = page.get_pixmap(dpi=dpi, colorspace=fitz.csGRAY, alpha=False)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples_mv, "raw", "L", pix.stride)
    del pix  # one copy of the pixels while Tesseract runs
    pdf = pytesseract.image_to_pdf_or_hocr(
        image,
        lang=language,
        extension="pdf",
        config=f"--dpi {dpi} -c textonly_pdf=1",  # the text layer alone: no image copy
        timeout=timeout,
    )
    return fitz.open(stream=pdf, filetype="pdf")


def image_to_pdf(data: bytes, extension: str) -> bytes:
    """An image file as PDF bytes, one page per frame (multi-page TIFF), page size from the
    image's resolution.

    Raises:
        ConversionError: not a readable image of that type.
    """
    fitz = importlib.import_module("pymupdf")
    try:
        img = fitz.open(stream=data, filetype=extension.lstrip(".").lower())
    except Exception:
        raise ConversionError(f"not a readable {extension.lstrip('.').upper()} image") from None
    try:
        if img.page_count < 1:
            raise ConversionError("the image has no frames")
        return bytes(img.convert_to_pdf())
    except ConversionError:
        raise
    except Exception:
        raise ConversionError(f"not a readable {extension.lstrip('.').upper()} image") from None
    finally:
        img.close()
