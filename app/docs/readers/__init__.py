"""The readers: a file's text as Sections, by suffix (text, Markdown, HTML, PDF, DOCX, source
code), streamed so a large file is never held whole; a file that cannot be read raises Unreadable
with one sentence (before the first Section or part way). The file is opened once, checked (a
regular file, the one the walk found), and each reader reads what was opened. The PDF reader also
measures its work against the file's Budget and raises Cut, with the sentence, when it runs out."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from app.docs.readers._base import MAX_BYTES, NotRegular, NotTheSame, Unreadable, open_checked, too_large
from app.docs.readers.code import CODE_SUFFIXES
from app.docs.readers.limits import Budget
from app.docs.types import Section

__all__ = ["MAX_BYTES", "SUFFIXES", "NotRegular", "NotTheSame", "Unreadable", "is_supported", "read_sections", "too_large"]

# suffix -> the reader, as "module:function" under app.docs.readers, imported on first use (pypdf
# and python-docx take a noticeable part of a second to import; `cove docs list` needs neither)
_READERS: dict[str, str] = {
    ".txt": "text:read_text",
    ".text": "text:read_text",
    ".rst": "text:read_text",
    ".csv": "text:read_text",
    ".tsv": "text:read_text",
    ".md": "markdown:read_markdown",
    ".markdown": "markdown:read_markdown",
    ".html": "html:read_html",
    ".htm": "html:read_html",
    ".xhtml": "html:read_html",
    ".pdf": "pdf:read_pdf",
    ".docx": "docx:read_docx",
    **dict.fromkeys(CODE_SUFFIXES, "code:read_code"),
}

SUFFIXES: frozenset[str] = frozenset(_READERS)


def is_supported(path: Path) -> bool:
    """Whether a reader reads files named like `path` (by its suffix, any case)."""
    return path.suffix.lower() in _READERS


def read_sections(path: Path, budget: Budget | None = None, identity: tuple[int, int] | None = None) -> Iterator[Section]:
    """The Sections of the file at `path`, in file order. Unreadable (one sentence) when it
    cannot be read, or its suffix is not one of SUFFIXES; raised while iterating, as a reader's
    own problems are. The file is opened once, here (app/docs/readers/_base.open_checked: a
    regular file, and when `identity` (st_dev, st_ino) is given, that very file), and the reader
    reads what was opened. A PDF measures its pages against `budget` (a fresh one when None) and
    raises Cut when it runs out; other readers leave that to the caller, between Sections."""
    where = _READERS.get(path.suffix.lower())
    if where is None:
        raise Unreadable(f"is a {path.suffix or 'suffix-less'} file, which Cove does not read")
    module, function = where.split(":")
    reader: Callable[[BinaryIO, Path, Budget], Iterator[Section]] = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    with open_checked(path, identity) as file:
        yield from reader(file, path, budget if budget is not None else Budget())
