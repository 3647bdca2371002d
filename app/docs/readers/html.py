"""HTML: the text a browser shows (script, style, template, noscript and the title left out),
block elements as paragraph breaks, table cells apart, h1-h6 as the heading path. Decoded as plain
text is, then fed block by block to the standard library's html.parser (no dependency; it never
fails on bad markup, it reads what it can), so a large page is never held whole."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO

from app.docs.readers._base import SectionBuilder
from app.docs.readers.limits import Budget
from app.docs.readers.text import decoded_text
from app.docs.types import Section

_HIDDEN = frozenset({"script", "style", "template", "noscript", "title", "svg", "math", "iframe", "object"})
_BLOCKS = frozenset(
    "address article aside blockquote body caption dd details div dl dt fieldset figcaption figure footer form header "
    "hr li main nav ol p pre section summary table ul".split()
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# Chrome around the page's own text, left out with everything inside it: navigation (<nav>, or an
# element with role="navigation", as Sphinx's sidebars and related-links bars are) and the "¶"
# anchors documentation generators put beside headings.
_CHROME_CLASSES = frozenset({"headerlink"})
_CELLS = frozenset({"td", "th"})
_GAPS = ("", " | ", "\n", "\n\n")  # weakest first: a stronger break owed replaces a weaker one
_SPACE = re.compile(r"\s+")
_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def read_html(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
    """The Sections of an HTML page."""
    parser = _Text()
    builder = SectionBuilder()
    for piece in decoded_text(file, meta_charset):
        parser.feed(piece)
        yield from parser.drain(builder)
    parser.close()
    yield from parser.drain(builder)
    yield from builder.flush()


def _is_chrome(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    if tag == "nav":
        return True
    found = dict(attrs)
    if (found.get("role") or "").lower() == "navigation":
        return True
    return bool(_CHROME_CLASSES & set((found.get("class") or "").split()))


def meta_charset(first: bytes) -> str | None:
    """The charset a page names in a <meta> near its start, or None."""
    found = _META.search(first[:8192])
    return found.group(1).decode("ascii") if found else None


class _Text(HTMLParser):
    """Collects the page's visible text and its headings as events, given out by drain()."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._events: list[tuple[str | None, str]] = []  # (None, text) or (heading path, heading text)
        self._hidden: list[str] = []  # open hidden elements
        self._pre = 0  # depth of open <pre> elements, whose white space is kept
        self._gap = ""  # the break owed before the next text: "", " | ", "\n" or "\n\n"
        self._wrote = False
        self._heading: tuple[int, list[str]] | None = None  # (level, text so far) inside h1-h6
        self._path: list[tuple[int, str]] = []
        self._chrome: tuple[str, int] | None = None  # (tag, depth) of the navigation being left out

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._chrome is not None:
            if tag == self._chrome[0]:
                self._chrome = (tag, self._chrome[1] + 1)
            return
        if _is_chrome(tag, attrs):
            self._chrome = (tag, 1)
        elif tag in _HIDDEN:
            self._hidden.append(tag)
        elif tag in _HEADINGS:
            self._end_heading()
            self._heading = (_HEADINGS[tag], [])
        elif tag in _BLOCKS:
            if tag == "pre":
                self._pre += 1
            self._owe("\n\n")
        elif tag in ("br", "tr"):
            self._owe("\n")
        elif tag in _CELLS:
            self._owe(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HIDDEN:  # <br/>, <hr/>; a self-closed hidden element holds nothing
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._chrome is not None:
            if tag == self._chrome[0]:
                depth = self._chrome[1] - 1
                self._chrome = (tag, depth) if depth else None
            return
        if tag in _HIDDEN:
            if tag in self._hidden:
                while self._hidden.pop() != tag:
                    pass
        elif tag in _HEADINGS:
            self._end_heading()
        elif tag in _BLOCKS:
            if tag == "pre" and self._pre:
                self._pre -= 1
            self._owe("\n\n")

    def handle_data(self, data: str) -> None:
        if self._hidden or self._chrome is not None:
            return
        if self._heading is not None:
            self._heading[1].append(data)
            return
        text = data if self._pre else _SPACE.sub(" ", data)
        if not self._pre and (not self._wrote or self._gap):
            text = text.lstrip()
        if not text:
            return
        if self._wrote and self._gap:
            self._events.append((None, self._gap))
        self._gap = ""
        self._wrote = True
        self._events.append((None, text))

    def drain(self, builder: SectionBuilder) -> Iterator[Section]:
        """Hand what was collected since the last drain to `builder`; the Sections it gave out."""
        events, self._events = self._events, []
        for heading, text in events:
            if heading is not None:
                yield from builder.heading(heading or None)
            yield from builder.add(text)

    def _owe(self, gap: str) -> None:
        if _GAPS.index(gap) > _GAPS.index(self._gap):
            self._gap = gap

    def _end_heading(self) -> None:
        if self._heading is None:
            return
        level, parts = self._heading
        self._heading = None
        title = _SPACE.sub(" ", "".join(parts)).strip()
        if not title:
            return
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, title))
        if self._wrote:
            self._events.append((None, "\n\n"))  # ends the Section before the heading
        self._events.append((" > ".join(t for _, t in self._path), title))
        self._gap = "\n\n"
        self._wrote = True
