"""PDF → Markdown with PyMuPDF: headings, stitched paragraphs, tables and page offsets.

PyMuPDF gives each text span with its font size and flags, which is what heading detection
needs; ``find_tables()`` finds ruled tables. The result is Markdown for the chunker
(``#``/``##`` headings, ``| … |`` tables kept atomic) plus the offset where each page begins,
so every chunk can cite its page(s).

How the text is rebuilt (tuned on the files in ``shared/data/docs``):

* **Running heads, stamps and page numbers are dropped**: a line in the top or bottom 12 %
  of the page, or a rotated line anywhere, whose text (digits ignored) recurs on at least
  half of the pages (3 or more); and bare page numbers ("12", "Page 3 of 9", "7-45", "B-12")
  in the margins.
* **Body size** is the font size carrying the most characters (running heads excluded). A
  line at least 1.15x that size is a heading; distinct heading sizes are levels, biggest
  first. The biggest becomes the ``#`` title only if it occurs once (one run of lines) on
  the first page with text; otherwise the sizes map to ``##``, ``###``, ...
* **Emphasis headings**: a run of 1-3 lines, all bold or all italic, about body size
  (>= 0.85x), at most 120 characters, starting a paragraph, not ending in ``.``, ``,`` or
  ``;`` (italic ones must start with a capital), whose emphasis does not run on into the
  next line, is a heading one level below the size-based ones (``##`` when there are none).
  Bold capitals ending in a colon are headings at any size, and as a run-in label ("SUMMARY:
  The FAA …") they become a heading followed by the paragraph. When most body text is bold
  (italic), bold (italic) marks nothing.
* **Paragraphs**: wrapped lines are joined with a space. A word split by a hyphen at a line
  end is joined without it when both sides are lowercase, unless the document writes that
  compound with a hyphen elsewhere (``non-normal``, ``work-hours``), the first part is a
  prefix usually hyphenated (``self-``, ``non-``) or it is part of an address. A dash ending
  a line after a non-space (``737–`` / ``9``), ``/`` and ``@`` (URLs) join without a space.
  A paragraph continues into the next block (the next column) when it has no final
  punctuation and the block starts in lowercase, or when it stopped on a comma, a dash or
  an open parenthesis. Blocks keep PyMuPDF's order, the content-stream order, which reads
  multi-column pages column by column (sorting by position would interleave the columns);
  footnotes (small text starting with a marker in the lower half) move to the page end.
* **Tables** (``find_tables``, run only when the page's vector graphics could form a grid):
  rows whose cells hold several aligned lines (records without rules between them) are split
  back into one row per line using the word positions; a line filling a single cell
  continues the row above. Empty columns are dropped, leading title rows are left to the
  running text, dot leaders are removed. The table's area is removed from the running text
  and the Markdown table is placed where its first line was (text drawn just above a table
  but streamed after it, such as its title, is moved before it).

Pages are joined with a blank line; ``page_starts[i]`` is where page ``i + 1`` begins (an
empty page begins where the next page with text does). Pages without text, or with only
running heads, that show images or drawings are scanned pages: with OCR on (``ocr``, see
``convert/ocr.py``) they are read with Tesseract, up to a page budget per file, and rebuilt by
the same layout pass; otherwise, or past the budget, they are reported in ``warnings`` (blank
pages are not). A document with no text at all, even after OCR, is refused.

One step per module: ``_document`` opens the file and runs the pass (``convert_pdf``);
``_pages`` reads each page's lines and tables and marks running heads and page numbers;
``_tables`` writes the tables; ``_repair`` cleans odd characters and joins wrapped lines;
``_scanned`` reads scanned pages with OCR and words the page warnings; ``_images`` reads the
declared sizes of the images a page shows, so that no image over ``limits.max_image_pixels``
is decoded; ``_markdown`` finds
the body size, headings, paragraphs and lists and writes the text with its page offsets.
"""

from guaipeca.convert.pdf._document import PdfResult, convert_pdf

__all__ = ["PdfResult", "convert_pdf"]
