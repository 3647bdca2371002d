"""A PDF's page text from PDFium (pypdfium2: PDFium is BSD-3/Apache-2.0, the bindings Apache-2.0
or BSD-3), read from the file Cove opened, made to read like pypdf's: line ends "\n", a word
hyphenated at a line end joined, ligatures spelled out, control characters dropped.

PDFium is not thread-safe: every call into it, from any thread, is made holding _PDFIUM. Only the
indexer's thread reads PDFs, but one lock per process is what pypdfium2 asks for."""

from __future__ import annotations

import re
import threading
from typing import BinaryIO

import pypdfium2 as pdfium

_PDFIUM = threading.Lock()  # held around every PDFium call in this process (it is not thread-safe)

# U+FB00..FB06: ff fi fl ffi ffl long-st st, as the letters a reader sees
_LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"}
)
# PDFium ends a line with "\r\n" and marks a hyphen it found at a line end with U+0002, the two
# halves of the word already joined ("pack\x02ages"); characters it could not map come out as
# other C0 controls, and NUL may come from a font's own map.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class PdfiumFailed(Exception):
    """PDFium could not open the document or one of its pages."""


class _Positioned:
    """A view of `file` that keeps its own position, so PDFium (which seeks before each read) and
    pypdf can read one open file by turns; what `file`'s position was is restored after each read."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._at = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self._at = offset
        elif whence == 1:
            self._at += offset
        else:
            before = self._file.tell()
            self._at = self._file.seek(offset, whence)
            self._file.seek(before)
        return self._at

    def tell(self) -> int:
        return self._at

    def readinto(self, buffer: memoryview) -> int:
        before = self._file.tell()
        try:
            self._file.seek(self._at)
            n = self._file.readinto(buffer)  # type: ignore[attr-defined]
        finally:
            self._file.seek(before)
        self._at += n
        return int(n)

    def read(self, size: int = -1) -> bytes:
        before = self._file.tell()
        try:
            self._file.seek(self._at)
            data = self._file.read(size)
        finally:
            self._file.seek(before)
        self._at += len(data)
        return data


class Document:
    """One PDF open in PDFium (the owner-only password, an empty user password, opened), read
    from the open `file`; close() when done."""

    def __init__(self, file: BinaryIO) -> None:
        self._source = _Positioned(file)
        with _PDFIUM:
            try:
                self._pdf = pdfium.PdfDocument(self._source, password="")
                self.page_count = len(self._pdf)
            except pdfium.PdfiumError as exc:
                raise PdfiumFailed(str(exc)) from None

    def page_text(self, index: int) -> str:
        """The text of page `index` (0-based), normalised (text())."""
        with _PDFIUM:
            try:
                page = self._pdf[index]
                try:
                    textpage = page.get_textpage()
                    try:
                        raw = textpage.get_text_bounded()
                    finally:
                        textpage.close()
                finally:
                    page.close()
            except pdfium.PdfiumError as exc:
                raise PdfiumFailed(str(exc)) from None
        return text(raw)

    def close(self) -> None:
        with _PDFIUM:
            self._pdf.close()


def text(raw: str) -> str:
    """PDFium's page text as pypdf would give it: "\n" line ends, a word hyphenated at a line end
    whole, ligatures as letters, no control characters (tab and line ends kept)."""
    joined = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x02", "")
    return _CONTROLS.sub("", joined.translate(_LIGATURES))
