"""What every reader shares: the Unreadable sentence, the size limit checked before a byte is read,
opening a file without blocking and only when what was opened is a regular file (its OS errors
turned into one sentence), and the builder that turns a stream of text into Sections (offsets
laid end to end, a heading path, cut at paragraph breaks)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from app.docs.types import Section

MAX_BYTES = 512 * 1024 * 1024  # a file larger than this is left out before it is read
SECTION_TARGET = 8_000  # a Section ends at the first paragraph break after this many characters
SECTION_LIMIT = 32_000  # ... and at a line break (or anywhere) when no paragraph break comes


class Unreadable(Exception):
    """A file the readers cannot read; str(exc) is one sentence about the file, without its name
    ("is encrypted with a password"), for the file list."""


def size_text(size: int) -> str:
    """A size for a person: "2.0 GB", "700 MB", "12 KB"."""
    if size >= 1024**3:
        return f"{size / 1024**3:.1f} GB"
    if size >= 1024**2:
        return f"{size / 1024**2:.0f} MB"
    return f"{max(1, round(size / 1024))} KB"


def too_large(size: int) -> str | None:
    """The sentence for a file of `size` bytes that is over the limit, or None."""
    if size > MAX_BYTES:
        return f"is {size_text(size)}; files over {size_text(MAX_BYTES)} are left out"
    return None


def os_sentence(exc: OSError) -> str:
    """One sentence for an OS error met opening or reading a file."""
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)"
    if exc.errno == errno.ELOOP:
        return "is a symbolic link that loops back on itself"
    if isinstance(exc, FileNotFoundError):
        return "is gone (moved or deleted, or a link to nothing)"
    if isinstance(exc, IsADirectoryError):
        return "is a folder, not a file"
    return f"cannot be read ({exc.strerror or exc.__class__.__name__})".lower()


class NotRegular(Unreadable):
    """The path is (now) a folder, pipe, device or socket, not a regular file."""


class NotTheSame(Unreadable):
    """The path opens another file than the one expected (it was replaced, or made a link)."""


# Opened without waiting: a FIFO put where a file was would otherwise block open() until a writer
# came, forever; without O_NOCTTY a terminal device would become the controlling terminal. No
# O_NOFOLLOW: a file the person named may be a link (app/docs/walk.py decides which links count);
# a file swapped for a link after the walk is caught by its identity instead.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_OPEN_FLAGS = os.O_RDONLY | _NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def open_checked(path: Path | str, identity: tuple[int, int] | None = None) -> BinaryIO:
    """`path` opened for reading in binary, after checking it is a regular file within the size
    limit and, given `identity` (st_dev, st_ino, as a walk found it), that very file; Unreadable
    with a sentence otherwise (NotRegular: not a regular file; NotTheSame: another file).

    The path is looked at before it is opened (a device is never opened) and what was opened is
    checked again (fstat), as the path may have been swapped for a pipe, device or link since.
    """
    try:
        _check_regular(os.stat(path))
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise Unreadable(os_sentence(exc)) from None
    try:
        info = os.fstat(fd)
        _check_regular(info)
        if identity is not None and (info.st_dev, info.st_ino) != identity:
            raise NotTheSame("is not the file that was found there (it was replaced)")
        sentence = too_large(info.st_size)
        if sentence:
            raise Unreadable(sentence)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise Unreadable(os_sentence(exc)) from None
        raise


def _check_regular(info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular("is a folder, not a file" if stat.S_ISDIR(info.st_mode) else "is not a regular file")


def read_block(file: BinaryIO, size: int) -> bytes:
    """The next `size` bytes of `file` (fewer at its end), an OS error made a sentence."""
    try:
        return file.read(size)
    except OSError as exc:
        raise Unreadable(os_sentence(exc)) from None


class SectionBuilder:
    """Text added piece by piece (lines, or paragraphs), given out as Sections: a new Section at
    each heading change (`heading()`), and within one heading at a paragraph break once
    SECTION_TARGET characters are held, or at SECTION_LIMIT in any case. `start` counts the
    characters of every Section given out before."""

    def __init__(self, target: int = SECTION_TARGET, limit: int = SECTION_LIMIT) -> None:
        self._target = target
        self._limit = limit
        self._parts: list[str] = []
        self._held = 0
        self._start = 0
        self._heading: str | None = None
        self._page: int | None = None

    def add(self, text: str) -> Iterator[Section]:
        """Hold `text`; Sections that became complete. A paragraph break is a blank line inside
        or at the end of what is held."""
        if not text:
            return
        self._parts.append(text)
        self._held += len(text)
        if self._held >= self._limit:
            yield from self._cut()
        elif self._held >= self._target and (text.endswith("\n\n") or text.endswith("\n\r\n") or not text.strip()):
            yield from self.flush()

    def heading(self, heading: str | None, page: int | None = None) -> Iterator[Section]:
        """Start a new Section under `heading` (and `page`): what is held is given out first."""
        yield from self.flush()
        self._heading = heading
        self._page = page

    def flush(self) -> Iterator[Section]:
        """Give out all that is held, as one Section."""
        if self._parts:
            text = "".join(self._parts)
            self._parts.clear()
            self._held = 0
            yield self._section(text)

    def _cut(self) -> Iterator[Section]:
        text = "".join(self._parts)
        self._parts.clear()
        pos = 0
        while len(text) - pos >= self._limit:
            cut = _break_before(text, pos + self._target // 2, pos + self._limit)
            yield self._section(text[pos:cut])
            pos = cut
        rest = text[pos:]
        if rest:
            self._parts.append(rest)
        self._held = len(rest)

    def _section(self, text: str) -> Section:
        section = Section(text=text, start=self._start, page=self._page, heading=self._heading)
        self._start += len(text)
        return section


def _break_before(text: str, low: int, high: int) -> int:
    """Where to end a Section of `text` that may not pass `high`: after the
    last paragraph break past `low`, else after the last line break past `low`, else at `high`."""
    para = max(text.rfind("\n\n", low, high), text.rfind("\n\r\n", low, high))
    if para >= 0:
        return para + (2 if text.startswith("\n\n", para) else 3)
    line = text.rfind("\n", low, high)
    if line >= 0:
        return line + 1
    return high
