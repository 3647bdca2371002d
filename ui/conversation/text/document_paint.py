"""Drawing a QTextDocument inside a row (only the part a repaint exposes, the lines of its last
paragraph from the last one up), and finding where its anchors are."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QAbstractTextDocumentLayout, QColor, QPainter, QPalette, QTextBlock, QTextDocument, QTextLayout, QTextLine

T = TypeVar("T")


def paint_document(painter: QPainter, doc: QTextDocument, origin: QPoint, text_color: QColor, visible: QRectF) -> None:
    """Draw `doc` with its top-left at `origin`, only the part inside `visible` (row coordinates)."""
    size = doc.size()
    clip = visible.translated(-QPointF(origin)).intersected(QRectF(0, 0, size.width(), size.height()))
    if clip.isEmpty():
        return  # an empty PaintContext.clip means "no clip" to Qt: it would draw the whole document
    painter.save()
    painter.translate(origin)
    painter.setClipRect(clip)
    painter.setPen(text_color)  # what text without a colour of its own is drawn with below
    if not draw_last_paragraph_lines(painter, doc, clip, last_paragraph(doc)):
        draw_with_layout(painter, doc, text_color, clip)
    painter.restore()


def draw_lines_from_last(
    painter: QPainter, layouts: Iterable[tuple[QTextLayout, int]], origin: QPointF, left: float, top: float, bottom: float
) -> None:
    """Draw the lines of `layouts` ((layout, how many of its lines), top to bottom, placed at
    `origin`) that reach into the area from `left` rightwards, `top` to `bottom`, from the last
    line up, stopping at the first line above the area: a frame's area holds the last line or
    two, and asking Qt for each of a long paragraph's lines costs more than drawing those."""
    x, y = origin.x(), origin.y()
    for line in visible_from_last(_lines_from_last(layouts), lambda line: _line_box(line, x, y), left, top, bottom):
        line.draw(painter, origin)


def visible_from_last(
    entries: Iterator[T], box: Callable[[T], tuple[float, float, float]], left: float, top: float, bottom: float
) -> Iterator[T]:
    """The entries (lines or words, newest first) whose box (right, top, bottom) reaches into
    the area from `left` rightwards, `top` to `bottom`; stops at the first one above the area
    (text is laid out top to bottom). Ink reaches a pixel or two right of a box."""
    for entry in entries:
        entry_right, entry_top, entry_bottom = box(entry)
        if entry_bottom <= top:
            return
        if entry_top < bottom and entry_right + 2 > left:
            yield entry


def _lines_from_last(layouts: Iterable[tuple[QTextLayout, int]]) -> Iterator[QTextLine]:
    for layout, count in reversed(tuple(layouts)):
        for i in range(count - 1, -1, -1):
            yield layout.lineAt(i)


def _line_box(line: QTextLine, x: float, y: float) -> tuple[float, float, float]:
    top = y + line.y()
    return (x + line.x() + line.naturalTextWidth(), top, top + line.height())


def draw_with_layout(painter: QPainter, doc: QTextDocument, text_color: QColor, clip: QRectF) -> None:
    """Qt's own drawing of the document, inside `clip` (document coordinates)."""
    ctx = QAbstractTextDocumentLayout.PaintContext()
    palette = QPalette(ctx.palette)
    palette.setColor(QPalette.ColorRole.Text, text_color)
    ctx.palette = palette
    ctx.clip = clip
    doc.documentLayout().draw(painter, ctx)


Paragraph = tuple[QTextLayout, QPointF, float]


def draw_last_paragraph_lines(painter: QPainter, doc: QTextDocument, clip: QRectF, shape: Paragraph | None) -> bool:
    """Draw only the lines inside `clip` when it lies within the last block and that block is
    a plain paragraph (`shape`, from last_paragraph()). False: not the case.

    QTextLayout.draw (which the document layout calls per block) lays out glyph runs for every
    line of the block before clipping; this lays out and draws only the lines the clip holds.
    """
    if shape is None:
        return False
    layout, origin, above = shape
    if clip.top() < origin.y() and clip.top() < above:
        return False  # the clip reaches the lines of an earlier block
    draw_lines_from_last(painter, ((layout, layout.lineCount()),), origin, clip.left(), clip.top(), clip.bottom())
    return True


def last_paragraph(doc: QTextDocument) -> Paragraph | None:
    """(layout, top-left, ink bottom of the block above) of the document's last block when it
    is a plain paragraph (no list, table, frame or background of its own), else None."""
    block = doc.lastBlock()
    layout = block.layout()
    if (
        layout is not None
        and layout.lineCount()
        and block.textList() is None
        and block.blockFormat().background().style() == Qt.BrushStyle.NoBrush
        and not doc.rootFrame().childFrames()
    ):
        return (layout, doc.documentLayout().blockBoundingRect(block).topLeft(), _ink_bottom(doc, block.previous()))
    return None


class LastParagraph:
    """last_paragraph() of one document, kept until its text or width changes: working it out
    asks Qt a dozen questions, and a streaming reply is drawn every frame."""

    def __init__(self) -> None:
        self._key: tuple[int, float] | None = None
        self._shape: Paragraph | None = None

    def of(self, doc: QTextDocument) -> Paragraph | None:
        key = (doc.revision(), doc.textWidth())
        if key != self._key:
            self._key, self._shape = key, last_paragraph(doc)
        return self._shape


def _ink_bottom(doc: QTextDocument, block: QTextBlock) -> float:
    """Bottom of the last line of `block` (not of its margin); -inf when there is none."""
    layout = block.layout() if block.isValid() else None
    if layout is None or not layout.lineCount():
        return float("-inf")
    last = layout.lineAt(layout.lineCount() - 1)
    return doc.documentLayout().blockBoundingRect(block).top() + last.y() + last.height()


def anchor_areas(doc: QTextDocument) -> list[tuple[str, QRect]]:
    """(href, rectangle in document coordinates) of each anchor fragment (first line of it)."""
    out: list[tuple[str, QRect]] = []
    layout = doc.documentLayout()
    block = doc.begin()
    while block.isValid():
        text_layout = block.layout()
        origin = layout.blockBoundingRect(block).topLeft()
        for it in block:  # type: ignore[attr-defined]  # stub: __iter__ -> object; it yields QTextBlock.iterator
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isAnchor() and fmt.anchorHref():
                start = fragment.position() - block.position()
                line = text_layout.lineForTextPosition(start)
                if line.isValid():
                    end = min(start + fragment.length(), line.textStart() + line.textLength())
                    x1: float = line.cursorToX(start)[0]  # type: ignore[index]  # stub: object; Qt gives (x, pos)
                    x2: float = line.cursorToX(end)[0]  # type: ignore[index]  # stub: object; Qt gives (x, pos)
                    rect = QRectF(origin.x() + x1, origin.y() + line.y(), max(1.0, x2 - x1), line.height())
                    out.append((fmt.anchorHref(), rect.toAlignedRect()))
        block = block.next()
    return out
