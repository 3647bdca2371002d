"""Word (.docx): paragraphs and tables in document order, read with python-docx (MIT), the
'Heading 1'.. 'Heading 9' (and 'Title') styles making the heading path. python-docx parses the
whole document part, so the size of its XML unpacked is checked first (a small .docx can unpack
to gigabytes; its pictures are not counted). An encrypted .docx is an OLE file, not a zip."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
from docx.table import Table

from app.docs.readers._base import SectionBuilder, Unreadable, open_checked, os_sentence, size_text
from app.docs.types import Section

DAMAGED = "is damaged or not a Word (.docx) document"
MAX_MARKUP = 128 * 1024 * 1024  # XML unpacked; python-docx's parsed tree takes several times as much memory
_OLE = bytes.fromhex("d0cf11e0a1b11ae1")  # an encrypted .docx, or an old binary .doc
_HEADING = re.compile(r"heading (\d)\Z", re.IGNORECASE)


def read_docx(path: Path) -> Iterator[Section]:
    """The Sections of a Word document."""
    with open_checked(path) as file:
        try:
            if file.read(8) == _OLE:
                raise Unreadable("is encrypted with a password, or is an old Word (.doc) file")
            file.seek(0)
            with zipfile.ZipFile(file) as archive:
                markup = sum(info.file_size for info in archive.infolist() if info.filename.endswith((".xml", ".rels")))
            if markup > MAX_MARKUP:
                raise Unreadable(
                    f"unpacks to {size_text(markup)} of XML; Word documents over {size_text(MAX_MARKUP)} unpacked are left out"
                )
            file.seek(0)
            document = docx.Document(file)
            yield from _sections(document)
        except Unreadable:
            raise
        except OSError as exc:
            raise Unreadable(os_sentence(exc)) from None
        except Exception:  # zipfile.BadZipFile, KeyError (a part missing), lxml's XMLSyntaxError, ...
            raise Unreadable(DAMAGED) from None


def _sections(document: docx.document.Document) -> Iterator[Section]:
    builder = SectionBuilder()
    path: list[tuple[int, str]] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            yield from builder.add(_table_text(block))
            continue
        text = block.text.strip()
        if not text:
            continue
        level = _heading_level(block.style.name if block.style is not None else None)
        if level is not None:
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
            yield from builder.heading(" > ".join(t for _, t in path))
        yield from builder.add(text + "\n\n")
    yield from builder.flush()


def _heading_level(style: str | None) -> int | None:
    """The heading level a paragraph style gives ('Title' 0, 'Heading 2' 2), or None."""
    if not style:
        return None
    if style.lower() == "title":
        return 0
    found = _HEADING.match(style)
    return int(found.group(1)) if found else None


def _table_text(table: Table) -> str:
    """A table's text, a line per row, cells apart (a merged cell once)."""
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if text and (not cells or cells[-1] != text):
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows) + "\n\n" if rows else ""
