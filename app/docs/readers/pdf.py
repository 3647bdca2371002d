"""PDF: the text layer, one Section per page (page 1-based), read page by page from the open file
(the objects parsed for a page dropped after it) with pypdf (BSD-3, pure Python; PyMuPDF reads
better but is AGPL, which an MIT app cannot ship). Pages without text are skipped; a PDF none of
whose pages has text is a scan. An owner-only password (empty user password) is opened; a user
password is not asked for.

Its work is bounded by the file's Budget: each page's content, unpacked, is counted before its
text is extracted, and the time is checked before each page and while pypdf works through a
page's operators (those of the forms it draws too); at either limit the PDF is cut there (Cut),
the pages before it kept."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pypdf import PdfReader
from pypdf.errors import DependencyError

from app.docs.readers._base import Unreadable
from app.docs.readers.limits import Budget, Cut
from app.docs.types import Section
from app.unreadable_text import storable

# pypdf warns through logging about every oddity of a damaged file; with no handler configured,
# Python would print each to stderr (its last-resort handler). The problem reaches the person as
# one sentence instead; an app that configures logging still gets the records.
logging.getLogger("pypdf").addHandler(logging.NullHandler())

DAMAGED = "is damaged or not a PDF"
ENCRYPTED = "is encrypted with a password"
SCANNED = "is a scanned PDF with no text layer (Cove reads only a PDF's text)"
_TEXT_OPERATORS = (b"Tj", b"TJ", b"'", b'"', b"Do")  # the operators that can show text (Do: a form that may)


def read_pdf(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
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
    start = 0
    for number in range(1, count + 1):
        where = f"at page {number:,} of {count:,}"
        budget.check_time(where)
        text = _page_text(reader, number, where, budget)
        _forget_objects(reader)
        text = storable(text.replace("\x00", ""))[0].strip()
        if not text:
            continue
        text += "\n\n"
        yield Section(text=text, start=start, page=number)
        start += len(text)
    if start == 0:
        raise Unreadable(SCANNED if count else "has no pages")


class _OutOfTime(BaseException):
    """Raised from inside pypdf's text extraction when the file's time is spent. A BaseException
    because pypdf catches Exception around each form XObject it extracts and would go on."""


def _page_text(reader: PdfReader, number: int, where: str, budget: Budget) -> str:
    """The text of page `number`, what its content unpacks to counted against `budget` first.
    pypdf's own limits stay in force (a stream unpacks to at most 75 MB); the budget adds the
    one over the whole file that pypdf does not have."""

    def guard(*_: object) -> None:  # called before each operator, those of the forms drawn too
        if budget.out_of_time():
            raise _OutOfTime

    try:
        page = reader.pages[number - 1]
        contents = page.get_contents()
        data = contents.get_data() if contents is not None else b""
        budget.take_decoded(len(data), where)
        # pypdf skips a page with no text operator itself, but only when no visitor is given;
        # the guard is one, so the same test is made here first.
        if not any(op in data for op in _TEXT_OPERATORS):
            return ""
        return page.extract_text(visitor_operand_before=guard)
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
