"""The readers: a file's text as Sections, by suffix (text, Markdown, HTML, PDF, DOCX, source
code), streamed so a large file is never held whole; a file that cannot be read raises Unreadable
with one sentence (before the first Section or part way)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from app.docs.readers._base import MAX_BYTES, Unreadable, too_large
from app.docs.readers.code import CODE_SUFFIXES, read_code
from app.docs.readers.docx import read_docx
from app.docs.readers.html import read_html
from app.docs.readers.markdown import read_markdown
from app.docs.readers.pdf import read_pdf
from app.docs.readers.text import read_text
from app.docs.types import Section

__all__ = ["MAX_BYTES", "SUFFIXES", "Unreadable", "is_supported", "read_sections", "too_large"]

_READERS: dict[str, Callable[[Path], Iterator[Section]]] = {
    ".txt": read_text,
    ".text": read_text,
    ".rst": read_text,
    ".csv": read_text,
    ".tsv": read_text,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".xhtml": read_html,
    ".pdf": read_pdf,
    ".docx": read_docx,
    **dict.fromkeys(CODE_SUFFIXES, read_code),
}

SUFFIXES: frozenset[str] = frozenset(_READERS)


def is_supported(path: Path) -> bool:
    """Whether a reader reads files named like `path` (by its suffix, any case)."""
    return path.suffix.lower() in _READERS


def read_sections(path: Path) -> Iterator[Section]:
    """The Sections of the file at `path`, in file order. Unreadable (one sentence) when it
    cannot be read, or its suffix is not one of SUFFIXES; raised while iterating, as a reader's
    own problems are."""
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise Unreadable(f"is a {path.suffix or 'suffix-less'} file, which Cove does not read")
    yield from reader(path)
