"""The readers: a file's text as Sections, by suffix (text, Markdown, HTML, PDF, DOCX, source
code, and any of the text kinds gzip-compressed), streamed so a large file is never held whole; a
file that cannot be read raises Unreadable with one sentence (before the first Section or part
way). The file is opened once, checked (a regular file, the one the walk found), and each reader
reads what was opened. The PDF reader also measures its work against the file's Budget and raises
Cut, with the sentence, when it runs out, and says which page it is at (`on_page`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

from app.docs.readers._base import MAX_BYTES, NotRegular, NotTheSame, Unreadable, open_checked, too_large
from app.docs.readers.code import CODE_SUFFIXES
from app.docs.readers.gzipped import GZIP_SUFFIX, gunzipped
from app.docs.readers.limits import Budget
from app.docs.types import Section

__all__ = [
    "MAX_BYTES",
    "SUFFIXES",
    "NotRegular",
    "NotTheSame",
    "OnPage",
    "Unreadable",
    "is_supported",
    "read_sections",
    "too_large",
]

OnPage = Callable[[int, int], None]  # (page number, 1-based; page count), called before the page is read

# suffix -> the reader, as "module:function" under app.docs.readers, imported on first use (pypdf,
# pypdfium2 and python-docx take a noticeable part of a second to import; `cove docs list` needs none)
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
# Read from the start to the end only, so they can read a gzip stream; a PDF (read by offset, from
# its end first) and a DOCX (a zip, also read from its end) cannot.
_GZIPPABLE = frozenset(s for s, where in _READERS.items() if not where.startswith(("pdf:", "docx:")))

# Every name ending a reader reads: ".md", and ".md.gz" for those read gzip-compressed. Path.suffix
# is only the last of them (".gz"): is_supported is the test, this the list to show.
SUFFIXES: frozenset[str] = frozenset(_READERS) | frozenset(s + GZIP_SUFFIX for s in _GZIPPABLE)


def _suffixes(path: Path) -> tuple[str, bool]:
    """The suffix that picks the reader (any case; the one before ".gz" for a gzip file) and
    whether the file is gzip-compressed."""
    suffix = path.suffix.lower()
    if suffix == GZIP_SUFFIX:
        inner = Path(path.stem).suffix.lower()
        return inner, True
    return suffix, False


def is_supported(path: Path) -> bool:
    """Whether a reader reads files named like `path` (by its suffix, any case; "notes.md.gz":
    Markdown, gzip-compressed)."""
    suffix, gzipped = _suffixes(path)
    return suffix in (_GZIPPABLE if gzipped else _READERS)


def read_sections(
    path: Path, budget: Budget | None = None, identity: tuple[int, int] | None = None, on_page: OnPage | None = None
) -> Iterator[Section]:
    """The Sections of the file at `path`, in file order. Unreadable (one sentence) when it
    cannot be read, or is not named as a file a reader reads (is_supported); raised while
    iterating, as a reader's own problems are. The file is opened once, here
    (app/docs/readers/_base.open_checked: a regular file, and when `identity` (st_dev, st_ino) is
    given, that very file), and the reader reads what was opened; a gzip file is unpacked as it
    is read (app/docs/readers/gzipped.py). A PDF measures its pages against `budget` (a fresh one
    when None), raises Cut when it runs out, and calls `on_page(number, count)` before it reads
    page `number` of `count`; other readers leave the budget to the caller, between Sections,
    and never call `on_page`."""
    suffix, gzipped = _suffixes(path)
    where = _READERS.get(suffix) if not gzipped or suffix in _GZIPPABLE else None
    if where is None:
        shown = suffix + GZIP_SUFFIX if gzipped and suffix else path.suffix
        raise Unreadable(f"is a {shown or 'suffix-less'} file, which Cove does not read")
    module, function = where.split(":")
    reader = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    budget = budget if budget is not None else Budget()
    with open_checked(path, identity) as file:
        if gzipped:
            with gunzipped(file) as unpacked:
                yield from reader(unpacked, path.with_suffix(""), budget)  # named as what it holds: "x.py"
        elif module == "pdf":
            yield from reader(file, path, budget, on_page)
        else:
            yield from reader(file, path, budget)
