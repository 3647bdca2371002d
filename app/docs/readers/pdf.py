"""PDF: the text layer, one Section per page (page 1-based), read page by page from the open file.
PDFium (pypdfium2; app/docs/readers/pdf_pdfium.py) extracts the text, pypdf (BSD-3, pure Python)
opens the file first and measures each page's content (app/docs/readers/pdf_guard.py) before
PDFium parses it: PDFium is many times faster but parses a page whole, with no way to stop part
way. A page whose forms would unpack past what the file has left, or one PDFium cannot read, is
read by pypdf instead, whose work is looked at as it goes; a file PDFium cannot open is read by
pypdf throughout. (PyMuPDF reads well too but is AGPL, which an MIT app cannot ship.) Pages
without text are skipped; a PDF none of whose pages has text is a scan. An owner-only password
(empty user password) is opened; a user password is not asked for.

Its work is bounded by the file's Budget: each page's content, unpacked, is counted before its
text is extracted, the time is checked before each page, and while pypdf reads a page it is
checked at each of its operators (those of the forms it draws too); at either limit the PDF is
cut there (Cut), the pages before it kept. `on_page(number, count)` is called before each page."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from pypdf import PdfReader
from pypdf.errors import DependencyError

from app.docs.readers._base import Unreadable
from app.docs.readers.limits import Budget, Cut
from app.docs.readers.pdf_guard import PageWork, page_work
from app.docs.readers.pdf_pdfium import Document, PdfiumFailed
from app.docs.types import Section
from app.unreadable_text import storable

# pypdf warns through logging about every oddity of a damaged file; with no handler configured,
# Python would print each to stderr (its last-resort handler). The problem reaches the person as
# one sentence instead; an app that configures logging still gets the records.
logging.getLogger("pypdf").addHandler(logging.NullHandler())

DAMAGED = "is damaged or not a PDF"
ENCRYPTED = "is encrypted with a password"
SCANNED = "is a scanned PDF with no text layer (Cove reads only a PDF's text)"


def read_pdf(file: BinaryIO, path: Path, budget: Budget, on_page: Callable[[int, int], None] | None = None) -> Iterator[Section]:
    """The Sections of a PDF, one per page with text; Cut when `budget` runs out."""
    try:
        reader = PdfReader(file)
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable(ENCRYPTED)
        count = len(reader.pages)
    except Unreadable:
        raise
    except DependencyError:
        raise Unreadable("is encrypted in a way Cove cannot open") from None
    except Exception:  # pypdf raises many kinds on a damaged file (PdfReadError, ValueError, KeyError, ...)
        raise Unreadable(DAMAGED) from None
    _forget_objects(reader)  # what opening parsed (all the page dictionaries' object streams)
    pdfium = _pdfium(file, count)
    try:
        start = 0
        for number in range(1, count + 1):
            where = f"at page {number:,} of {count:,}"
            budget.check_time(where)
            if on_page is not None:
                on_page(number, count)
            text = _page_text(reader, pdfium, number, where, budget)
            _forget_objects(reader)
            text = storable(text.replace("\x00", ""))[0].strip()
            if not text:
                continue
            text += "\n\n"
            yield Section(text=text, start=start, page=number)
            start += len(text)
    finally:
        if pdfium is not None:
            pdfium.close()
    if start == 0:
        raise Unreadable(SCANNED if count else "has no pages")


def _pdfium(file: BinaryIO, count: int) -> Document | None:
    """The PDF open in PDFium too, or None where PDFium cannot open it or counts other pages than
    pypdf (their page numbers would not agree): pypdf then reads every page."""
    try:
        document = Document(file)
    except PdfiumFailed:
        return None
    if document.page_count != count:
        document.close()
        return None
    return document


def _page_text(reader: PdfReader, pdfium: Document | None, number: int, where: str, budget: Budget) -> str:
    """The text of page `number`, what its content unpacks to counted against `budget` first."""
    try:
        page = reader.pages[number - 1]
        work = page_work(page, budget.decoded_left())
    except Exception:
        raise Unreadable(f"is damaged (page {number} cannot be read)") from None
    if not work.may_show_text:
        budget.take_decoded(work.content, where)
        return ""  # pypdf skips a page with no text operator itself too
    if pdfium is not None and work.content + work.forms <= budget.decoded_left():
        budget.take_decoded(work.content + work.forms, where)
        try:
            return pdfium.page_text(number - 1)
        except PdfiumFailed:
            return _pypdf_text(reader, number, where, budget, work, counted=True)
    return _pypdf_text(reader, number, where, budget, work, counted=False)


class _OutOfTime(BaseException):
    """Raised from inside pypdf's text extraction when the file's time is spent. A BaseException
    because pypdf catches Exception around each form XObject it extracts and would go on."""


def _pypdf_text(reader: PdfReader, number: int, where: str, budget: Budget, work: PageWork, *, counted: bool) -> str:
    """The text of page `number` by pypdf, its content counted against `budget` unless `counted`
    already. pypdf's own limits stay in force (a stream unpacks to at most 75 MB); the budget adds
    the one over the whole file that pypdf does not have, and the time, looked at before each
    operator pypdf works through."""

    def guard(*_: object) -> None:  # called before each operator, those of the forms drawn too
        if budget.out_of_time():
            raise _OutOfTime

    if not counted:
        budget.take_decoded(work.content, where)
    try:
        return reader.pages[number - 1].extract_text(visitor_operand_before=guard)
    except _OutOfTime:
        raise budget.time_cut(where) from None
    except Cut:
        raise
    except Exception:
        raise Unreadable(f"is damaged (page {number} cannot be read)") from None


def _forget_objects(reader: PdfReader) -> None:
    """Drop the objects pypdf parsed for the page just read (content streams, fonts): it keeps
    every object it resolves, so memory would grow with the pages read; those needed again are
    parsed again from the file."""
    cache = getattr(reader, "resolved_objects", None)
    if isinstance(cache, dict):
        cache.clear()
