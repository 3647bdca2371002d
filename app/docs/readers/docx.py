"""Word (.docx): paragraphs and tables in document order, read with python-docx (MIT), the
'Heading 1'.. 'Heading 9' (and 'Title') styles making the heading path. python-docx unpacks every
part the package links to and parses the XML ones whole, so the package is sized first, by every
part whatever its name (a small .docx can unpack to gigabytes): all parts together, and those
that could be XML (any part that does not begin like a picture), each part inflated a block at a
time to check it holds no more than the zip says. An encrypted .docx is an OLE file, not a zip."""

from __future__ import annotations

import copy
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import docx
from docx.table import Table

from app.docs.readers._base import SectionBuilder, Unreadable, os_sentence, size_text
from app.docs.readers.limits import Budget
from app.docs.types import Section

DAMAGED = "is damaged or not a Word (.docx) document"
MAX_MARKUP = 64 * 1024 * 1024  # parts that could be XML, unpacked; python-docx's parsed tree takes several times as much
MAX_UNPACKED = 256 * 1024 * 1024  # all parts unpacked (python-docx holds each part it loads in memory)
MAX_PARTS = 10_000
LYING = "is damaged (a part of it unpacks to more than its zip says)"
_BLOCK = 1024 * 1024
# How pictures and other binary parts begin (PNG, JPEG, GIF, BMP, TIFF, EMF, WMF, WebP, OLE, zip,
# PDF). None of these can begin an XML document, so such a part can never be parsed as XML.
_BINARY = (
    b"\x89PNG",
    b"\xff\xd8\xff",
    b"GIF8",
    b"BM",
    b"II*\x00",
    b"MM\x00*",
    b"\x01\x00\x00\x00",
    b"\xd7\xcd\xc6\x9a",
    b"RIFF",
    b"\xd0\xcf\x11\xe0",
    b"PK\x03\x04",
    b"%PDF",
)
_OLE = bytes.fromhex("d0cf11e0a1b11ae1")  # an encrypted .docx, or an old binary .doc
_HEADING = re.compile(r"heading (\d)\Z", re.IGNORECASE)


def read_docx(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
    """The Sections of a Word document."""
    try:
        if file.read(8) == _OLE:
            raise Unreadable("is encrypted with a password, or is an old Word (.doc) file")
        file.seek(0)
        with zipfile.ZipFile(file) as archive:
            _check_package(archive)
        file.seek(0)
        document = docx.Document(file)
        yield from _sections(document)
    except Unreadable:
        raise
    except OSError as exc:
        raise Unreadable(os_sentence(exc)) from None
    except Exception:  # zipfile.BadZipFile, KeyError (a part missing), lxml's XMLSyntaxError, ...
        raise Unreadable(DAMAGED) from None


def _check_package(archive: zipfile.ZipFile) -> None:
    """Unreadable when the package has too many parts, unpacks to too much, or says less than
    it holds. Every part is counted, whatever its name: python-docx finds its parts by the
    relationships and content types, not by the names' endings."""
    parts = archive.infolist()
    if len(parts) > MAX_PARTS:
        raise Unreadable(f"has {len(parts):,} parts; Word documents with over {MAX_PARTS:,} are left out")
    if any(info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) for info in parts):
        raise Unreadable(DAMAGED)  # Word writes only these; bzip2 and LZMA inflate without a bound per call
    declared = sum(info.file_size for info in parts)
    if declared > MAX_UNPACKED:
        raise Unreadable(f"unpacks to {size_text(declared)}; Word documents over {size_text(MAX_UNPACKED)} unpacked are left out")
    markup = sum(info.file_size for info in parts if not _checked_binary(archive, info))
    if markup > MAX_MARKUP:
        raise Unreadable(f"unpacks to {size_text(markup)} of XML; Word documents over {size_text(MAX_MARKUP)} unpacked are left out")


def _checked_binary(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Whether the part begins like a picture or another binary file, after inflating it a block
    at a time to check it holds no more than its declared size (Unreadable when it does).

    zipfile cuts a part at its declared size, but its read() of a whole part (python-docx's)
    first inflates all of the part's compressed data in one call: a part whose header says 4 KB
    can fill gigabytes of memory before it is cut. Here a copy of the entry one byte longer is
    read in blocks, so the inflating stops one byte past the declared size. (The copy has no CRC
    to check: it would fail at that byte before it could be counted; python-docx's read checks it.)"""
    probe = copy.copy(info)
    probe.file_size = info.file_size + 1
    probe.CRC = None  # type: ignore[assignment]  # zipfile checks no CRC when it is None
    held = 0
    head = b""
    with archive.open(probe) as part:
        while block := part.read(_BLOCK):
            if not head:
                head = block[:8]
            held += len(block)
            if held > info.file_size:
                raise Unreadable(LYING)
    return head.startswith(_BINARY)


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
