"""PDF: the text layer, one Section per page (page 1-based), read page by page from the open file
(the objects parsed for a page dropped after it) with pypdf (BSD-3, pure Python; PyMuPDF reads
better but is AGPL, which an MIT app cannot ship). Pages without text are skipped; a PDF none of
whose pages has text is a scan. An owner-only password (empty user password) is opened; a user
password is not asked for."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import DependencyError

from app.docs.readers._base import Unreadable, open_checked
from app.docs.types import Section
from app.unreadable_text import storable

# pypdf warns through logging about every oddity of a damaged file; with no handler configured,
# Python would print each to stderr (its last-resort handler). The problem reaches the person as
# one sentence instead; an app that configures logging still gets the records.
logging.getLogger("pypdf").addHandler(logging.NullHandler())

DAMAGED = "is damaged or not a PDF"
ENCRYPTED = "is encrypted with a password"
SCANNED = "is a scanned PDF with no text layer (Cove reads only a PDF's text)"


def read_pdf(path: Path) -> Iterator[Section]:
    """The Sections of a PDF, one per page with text."""
    with open_checked(path) as file:
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
            try:
                text = reader.pages[number - 1].extract_text()
            except Exception:
                raise Unreadable(f"is damaged (page {number} cannot be read)") from None
            _forget_objects(reader)
            text = storable(text.replace("\x00", ""))[0].strip()
            if not text:
                continue
            text += "\n\n"
            yield Section(text=text, start=start, page=number)
            start += len(text)
        if start == 0:
            raise Unreadable(SCANNED if count else "has no pages")


def _forget_objects(reader: PdfReader) -> None:
    """Drop the objects pypdf parsed for the page just read (content streams, fonts): it keeps
    every object it resolves, so memory would grow with the pages read; those needed again are
    parsed again from the file."""
    cache = getattr(reader, "resolved_objects", None)
    if isinstance(cache, dict):
        cache.clear()
