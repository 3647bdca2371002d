"""Cutting a file's sections into the passages the index holds (Chunk): on paragraph breaks where
it can, with a small overlap, never mixing two headings or two pages in one chunk.

Streaming: sections are taken one at a time and only the text not yet cut is kept, so a large file
costs about two chunks' worth of text here, whatever its length.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator

from app.docs.types import Chunk, Section

# Where a cut may fall, best first: a blank line, a line end, a sentence end, any white space.
_BREAKS = (re.compile(r"\n[ \t]*\n\s*"), re.compile(r"\n\s*"), re.compile(r"[.!?;:][\"')\]]*\s+"), re.compile(r"\s+"))
_SPACE = re.compile(r"\s")


def chunk_hash(text: str) -> str:
    """The SHA-256 (hex) a chunk is known by."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_sections(sections: Iterable[Section], *, size: int = 1000, overlap: int = 150) -> Iterator[Chunk]:
    """The chunks of `sections` in file order: at most `size` characters each (a cut falls on the
    best break in the chunk's second half), the next one starting up to `overlap` characters
    before the previous one ended (on a word boundary). Sections are joined only when they follow
    each other without a gap and share their page and heading."""
    if size < 2 or not 0 <= overlap < size // 2 + 1:
        raise ValueError("chunk size must be at least 2 and the overlap less than half of it")
    buf = ""
    base = 0  # the file offset of buf[0]
    key: tuple[int | None, str | None] | None = None
    for section in sections:
        if not section.text:
            continue
        new_key = (section.page, section.heading)
        if key is not None and (new_key != key or section.start != base + len(buf)):
            yield from (chunk for chunk, _ in _cuts(buf, base, key, size, overlap, final=True))
            buf = ""
        if not buf:
            base = section.start
        key = new_key
        buf += section.text
        if len(buf) >= 3 * size:
            done = 0
            for chunk, consumed in _cuts(buf, base, key, size, overlap, final=False):
                yield chunk
                done = consumed
            buf, base = buf[done:], base + done
    if key is not None and buf:
        yield from (chunk for chunk, _ in _cuts(buf, base, key, size, overlap, final=True))


def _cuts(text: str, base: int, key: tuple[int | None, str | None], size: int, overlap: int, *, final: bool) -> Iterator[tuple[Chunk, int]]:
    """The chunks of `text` (whose first character is at file offset `base`), each with the
    position in `text` the next one starts from. Not `final`: stop while fewer than 2 * size
    characters are left, as more text of the same run may follow."""
    page, heading = key
    pos = 0
    n = len(text)
    while pos < n:
        if not final and n - pos < 2 * size:
            return
        end = n if n - pos <= size else _best_break(text, pos, size)
        a, b = _strip(text, pos, end)
        next_pos = end if end >= n else _overlap_start(text, pos, end, overlap)
        if a < b:
            body = text[a:b]
            yield Chunk(text=body, start=base + a, end=base + b, hash=chunk_hash(body), page=page, heading=heading), next_pos
        pos = next_pos


def _best_break(text: str, pos: int, size: int) -> int:
    """Where to end a chunk starting at `pos`: after the last best break in its second half."""
    lo, hi = pos + size // 2, pos + size
    for pattern in _BREAKS:
        last = None
        for m in pattern.finditer(text, lo, hi):
            last = m
        if last is not None:
            return last.end()
    return hi  # no break at all (a long word, a base64 line): cut hard


def _overlap_start(text: str, pos: int, end: int, overlap: int) -> int:
    """The start of the next chunk: a word boundary at most `overlap` characters before `end`
    (and after the last chunk's start), else `end` itself."""
    if overlap <= 0:
        return end
    lo = max(pos + 1, end - overlap)
    m = _SPACE.search(text, lo, end)
    if m is None:
        return end
    start = m.end()
    while start < end and text[start].isspace():
        start += 1
    return start if start < end else end


def _strip(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
