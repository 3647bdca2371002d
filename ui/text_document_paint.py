"""Drawing a QTextDocument inside a delegate, and finding where its anchors are."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF
from PySide6.QtGui import QAbstractTextDocumentLayout, QColor, QPainter, QPalette, QTextDocument


def paint_document(painter: QPainter, doc: QTextDocument, origin: QPoint, text_color: QColor,
                   visible: QRectF) -> None:
    """Draw `doc` with its top-left at `origin`, only the part inside `visible` (row coordinates)."""
    painter.save()
    painter.translate(origin)
    ctx = QAbstractTextDocumentLayout.PaintContext()
    palette = QPalette(ctx.palette)
    palette.setColor(QPalette.ColorRole.Text, text_color)
    ctx.palette = palette
    size = doc.size()
    clip = visible.translated(-QPointF(origin)).intersected(QRectF(0, 0, size.width(), size.height()))
    if clip.isEmpty():
        # An empty PaintContext.clip means "no clip" to Qt: it would draw the whole document.
        painter.restore()
        return
    ctx.clip = clip
    painter.setClipRect(clip)
    doc.documentLayout().draw(painter, ctx)
    painter.restore()


def anchor_areas(doc: QTextDocument) -> list[tuple[str, QRect]]:
    """(href, rectangle in document coordinates) of each anchor fragment (first line of it)."""
    out: list[tuple[str, QRect]] = []
    layout = doc.documentLayout()
    block = doc.begin()
    while block.isValid():
        text_layout = block.layout()
        origin = layout.blockBoundingRect(block).topLeft()
        for it in block:
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isAnchor() and fmt.anchorHref():
                start = fragment.position() - block.position()
                line = text_layout.lineForTextPosition(start)
                if line.isValid():
                    end = min(start + fragment.length(), line.textStart() + line.textLength())
                    x1, _ = line.cursorToX(start)
                    x2, _ = line.cursorToX(end)
                    rect = QRectF(origin.x() + x1, origin.y() + line.y(), max(1.0, x2 - x1), line.height())
                    out.append((fmt.anchorHref(), rect.toAlignedRect()))
        block = block.next()
    return out
