"""Markdown: the text as written (decoded as plain text is), cut into Sections at headings, ATX
("## Install") and Setext (a line underlined with === or ---), with the heading path as each
Section's heading ("Install > From source"). Headings inside fenced code blocks are code, not
headings. No Markdown library: headings are all a Section needs, and a line scanner streams."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from app.docs.readers._base import SECTION_LIMIT, SectionBuilder
from app.docs.readers.limits import Budget
from app.docs.readers.text import decoded_text
from app.docs.types import Section

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?\n?\Z")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*\r?\n?\Z")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LINE_ENDS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")  # str.splitlines's
_LIST_OR_QUOTE = re.compile(r" {0,3}(?:[-*+>]|\d+[.)])(?:[ \t]|$)")


def read_markdown(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
    """The Sections of a Markdown file."""
    return markdown_sections(lines(decoded_text(file)))


def markdown_sections(source: Iterable[str]) -> Iterator[Section]:
    """Sections of Markdown given line by line (each line with its line end)."""
    builder = SectionBuilder()
    path: list[tuple[int, str]] = []  # (level, title) of the headings above
    held: str | None = None  # the previous line, when it may be a Setext heading's text
    fence: str | None = None
    for line in source:
        if fence is not None:
            if line.lstrip(" ").startswith(fence):
                fence = None
            yield from builder.add(line)
            continue
        if held is not None:
            setext = _SETEXT.match(line)
            if setext:
                level = 1 if setext.group(1).startswith("=") else 2
                yield from builder.heading(_path_text(path, level, held.strip()))
                yield from builder.add(held)
                yield from builder.add(line)
                held = None
                continue
            yield from builder.add(held)
            held = None
        fenced = _FENCE.match(line)
        if fenced:
            fence = fenced.group(1)[:3]
            yield from builder.add(line)
            continue
        atx = _ATX.match(line)
        if atx:
            yield from builder.heading(_path_text(path, len(atx.group(1)), (atx.group(2) or "").strip()))
            yield from builder.add(line)
            continue
        if _may_be_title(line):
            held = line  # it may be underlined by the next line
            continue
        yield from builder.add(line)
    if held is not None:
        yield from builder.add(held)
    yield from builder.flush()


def _may_be_title(line: str) -> bool:
    """Whether `line` may be the text of a Setext heading (if the next line underlines it)."""
    if not line.strip() or len(line) > 200 or line.startswith(("    ", "\t")):
        return False
    return not _LIST_OR_QUOTE.match(line) and not _SETEXT.match(line)


def _path_text(path: list[tuple[int, str]], level: int, title: str) -> str | None:
    """Update the heading path for a heading of `level` titled `title`; the path as text."""
    while path and path[-1][0] >= level:
        path.pop()
    if title:
        path.append((level, title))
    return " > ".join(t for _, t in path) or None


def lines(pieces: Iterable[str], longest: int = SECTION_LIMIT) -> Iterator[str]:
    """The lines of text given in pieces, each with its line end ("\\n", "\\r\\n" or "\\r"); a
    line longer than `longest` comes in parts of at most that length."""
    rest = ""
    for piece in pieces:
        text = rest + piece
        found = text.splitlines(keepends=True)
        rest = found.pop() if found else ""
        if rest.endswith(_LINE_ENDS) and not rest.endswith("\r"):  # a "\r" may be half of a "\r\n" cut by the piece
            found.append(rest)
            rest = ""
        for line in found:
            yield from _parts(line, longest)
        while len(rest) > longest:
            yield rest[:longest]
            rest = rest[longest:]
    if rest:
        yield from _parts(rest, longest)


def _parts(line: str, longest: int) -> Iterator[str]:
    """`line` in parts of at most `longest` characters."""
    for at in range(0, len(line), longest):
        yield line[at : at + longest]
