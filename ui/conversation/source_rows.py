"""The sources under a reply that was given passages of the person's documents: the passages the
reply cites ("Sources"), or when it cites none, every passage it was given, labelled so. One line
each: "[2] report.pdf · page 3" and an Open link; the passage itself is the line's tooltip, and a
click on the line shows it in full.

The reply's MessageItem carries them as `sources` (SourcesShown, frozen); the row layout places
them between the reply's figures and its actions, and the delegate paints and hit-tests them with
the functions here. Opening a file is the owner's (ui/documents/sources.py): it asks first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter

CITED_TITLE = "Sources"
UNCITED_TITLE = "Given to the model; the reply cites none of them"
OPEN_LABEL = "Open"
TIP_CHARS = 900  # the passage in a tooltip is cut to this; a click shows all of it
SOURCE, OPEN_SOURCE = "source", "open_source"


@dataclass(frozen=True)
class SourceLine:
    n: int  # the passage's number in the prompt ([n])
    name: str  # the file's name
    where: str  # "page 3", "Install > From source", or ""
    path: str
    excerpt: str  # the passage as the model was shown it
    collection: str = ""

    @property
    def text(self) -> str:
        return f"[{self.n}] {self.name}" + (f" · {self.where}" if self.where else "")


@dataclass(frozen=True)
class SourcesShown:
    title: str
    lines: tuple[SourceLine, ...]
    cited: bool

    def line(self, n: int) -> SourceLine | None:
        return next((line for line in self.lines if line.n == n), None)


def shown_sources(sources: Sequence[Any]) -> SourcesShown | None:
    """What a reply shows of the passages it was given (app.store.sources.Source records): the
    cited ones, or all of them labelled as uncited; None when it was given none."""
    if not sources:
        return None
    cited = [s for s in sources if s.cited]
    chosen = cited or list(sources)
    lines = tuple(
        SourceLine(n=s.n, name=PurePath(s.path).name or s.path, where=s.where, path=s.path, excerpt=s.excerpt, collection=s.collection)
        for s in chosen
    )
    return SourcesShown(CITED_TITLE if cited else UNCITED_TITLE, lines, bool(cited))


@dataclass
class SourcesLayout:
    """Where the sources go in a row (row coordinates)."""

    title_text: str
    title: QRect
    lines: list[tuple[SourceLine, QRect, QRect]]  # each line: its text's area, its Open link's area


def layout_sources(shown: SourcesShown, fm: QFontMetrics, left: int, width: int, top: int, gap: int) -> SourcesLayout:
    """One line for the title, one per source; the bottom is the last rect's bottom."""
    height = fm.height()
    y = top + gap
    title = QRect(left, y, width, height)
    y += height + 2
    open_width = fm.horizontalAdvance(OPEN_LABEL)
    lines = []
    for line in shown.lines:
        # A few pixels over the advance: elidedText shapes the text and may need a pixel or two more.
        text_width = min(fm.horizontalAdvance(line.text) + 4, max(40, width - open_width - 24))
        text = QRect(left + 8, y, text_width, height)
        lines.append((line, text, QRect(text.right() + 13, y, open_width, height)))
        y += height + 2
    return SourcesLayout(shown.title, title, lines)


def sources_bottom(lay: SourcesLayout) -> int:
    return (lay.lines[-1][1] if lay.lines else lay.title).bottom()


def paint_sources(painter: QPainter, lay: SourcesLayout, fm: QFontMetrics, text: QColor, muted: QColor, link: QColor) -> None:
    align = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    painter.setPen(muted)
    painter.drawText(lay.title, align, fm.elidedText(lay.title_text, Qt.TextElideMode.ElideRight, lay.title.width()))
    for line, area, open_area in lay.lines:
        painter.setPen(text)
        painter.drawText(area, align, fm.elidedText(line.text, Qt.TextElideMode.ElideMiddle, area.width()))
        painter.setPen(link)
        painter.drawText(open_area, align, OPEN_LABEL)


def source_hit(lay: SourcesLayout | None, pos: QPoint, slop: int) -> tuple[str, int] | None:
    """(SOURCE or OPEN_SOURCE, n) for a point of the row, else None."""
    if lay is None:
        return None
    for line, area, open_area in lay.lines:
        if open_area.adjusted(-slop, -slop, slop, slop).contains(pos):
            return OPEN_SOURCE, line.n
        if area.contains(pos):
            return SOURCE, line.n
    return None


def tooltip(line: SourceLine) -> str:
    """The passage, cut to TIP_CHARS, under where it is from."""
    excerpt = line.excerpt if len(line.excerpt) <= TIP_CHARS else line.excerpt[:TIP_CHARS].rstrip() + "…"
    head = line.path + (f" ({line.where})" if line.where else "")
    return f"{head}\n\n{excerpt}\n\nClick to read the whole passage."
