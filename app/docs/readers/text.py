"""Plain text: the encoding found (a BOM; else UTF-8 if the first block decodes as UTF-8; else
charset-normalizer, MIT, the detector requests uses, on the first 64 KB, near-ties going to cp1252), then the file
decoded block by block with an incremental decoder (errors replaced), so a large file is never
held whole. A file with NUL bytes (other than UTF-16/32) or mostly control characters is binary.
Sections: paragraph groups, no heading."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import charset_normalizer

from app.docs.readers._base import SectionBuilder, Unreadable, read_block
from app.docs.readers.limits import Budget
from app.docs.types import Section

BLOCK = 256 * 1024  # bytes read at a time
DETECT = 64 * 1024  # bytes charset-normalizer looks at
BINARY = "looks like a binary file, not text"
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_WIDE = ("utf-16", "utf-32")
_WESTERN = "cp1252"
_MARGIN = 0.1  # cp1252 wins when its decoding is at most this much more "chaotic" than the best
_CONTROLS = frozenset(chr(c) for c in range(32)) - frozenset("\t\n\r\f\v\x1b")


def read_text(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
    """The Sections of a plain-text file."""
    builder = SectionBuilder()
    for piece in decoded_text(file):
        yield from builder.add(piece)
    yield from builder.flush()


def decoded_text(file: BinaryIO, declared: Callable[[bytes], str | None] | None = None) -> Iterator[str]:
    """The text of the open `file`, in pieces of about a block each, without a BOM.
    `declared` finds the encoding the file names for itself (HTML's meta charset) in its first
    block, used when there is no BOM and the file is not UTF-8. Unreadable when it is binary or
    cannot be read."""
    first = read_block(file, BLOCK)
    encoding, skip = _encoding(first, declared)
    encoding = codecs.lookup(encoding).name  # "utf_16" -> "utf-16"
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    wide = encoding.startswith(_WIDE)
    block = first[skip:]
    checked = False
    while block:
        if not wide and b"\x00" in block:
            raise Unreadable(BINARY)
        text = decoder.decode(block)
        if not checked:
            _check_text(text)
            checked = True
        if text:
            yield text
        block = read_block(file, BLOCK)
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def _encoding(first: bytes, declared: Callable[[bytes], str | None] | None) -> tuple[str, int]:
    """The encoding of a file that begins with `first`, and the length of its BOM."""
    for bom, name in _BOMS:
        if first.startswith(bom):
            return name, len(bom)
    if b"\x00" in first:
        return _utf16_without_bom(first), 0
    try:
        codecs.getincrementaldecoder("utf-8")().decode(first)  # strict; a cut sequence at the end is fine
        return "utf-8", 0
    except UnicodeDecodeError:
        pass
    named = declared(first) if declared else None
    if named and not named.lower().replace("_", "-").startswith(("utf-16", "utf-32", "utf-8")):
        try:
            return codecs.lookup(named).name, 0
        except LookupError:
            pass
    results = charset_normalizer.from_bytes(first[:DETECT])
    best = results.best()
    if best is None:
        raise Unreadable(BINARY)
    close = [m.encoding for m in results if m.chaos <= best.chaos + _MARGIN]
    if _WESTERN in best.could_be_from_charset or _WESTERN in close:
        return _WESTERN, 0  # on short text the detector often picks cp1250/cp1257 for Western text
    return best.encoding, 0


def _utf16_without_bom(first: bytes) -> str:
    """UTF-16 without a BOM when NULs fill one byte of each pair (ASCII-heavy text); else binary."""
    sample = first[:DETECT]
    even = sample[0::2].count(0)
    odd = sample[1::2].count(0)
    pairs = max(1, len(sample) // 2)
    if odd > 0.4 * pairs and even < 0.02 * pairs:
        return "utf-16-le"
    if even > 0.4 * pairs and odd < 0.02 * pairs:
        return "utf-16-be"
    raise Unreadable(BINARY)


def _check_text(text: str) -> None:
    """Unreadable when the first decoded block is mostly control characters or replacements."""
    sample = text[:DETECT]
    if not sample:
        return
    bad = sum(1 for ch in sample if ch in _CONTROLS or ch == "\ufffd")
    if bad > 0.1 * len(sample):
        raise Unreadable(BINARY)
