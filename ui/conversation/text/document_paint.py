"""Drawing a QTextDocument (and a streaming PlainTail after it) inside a delegate, and finding
where its anchors are."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QAbstractTextDocumentLayout, QColor, QPainter, QPalette, QTextBlock, QTextDocument, QTextLayout

from ui.conversation.streaming.plain_tail import PlainTail


def paint_document(painter: QPainter, doc: QTextDocument, origin: QPoint, text_color: QColor,
                   visible: QRectF) -> None:
    """Draw `doc` with its top-left at `origin`, only the part inside `visible` (row coordinates)."""
    size = doc.size()
    clip = visible.translated(-QPointF(origin)).intersected(QRectF(0, 0, size.width(), size.height()))
    if clip.isEmpty():
        return  # an empty PaintContext.clip means "no clip" to Qt: it would draw the whole document
    painter.save()
    painter.translate(origin)
    painter.setClipRect(clip)
    painter.setPen(text_color)  # what text without a colour of its own is drawn with below
    if not _draw_last_paragraph_lines(painter, doc, clip):
        _draw_with_layout(painter, doc, text_color, clip)
    painter.restore()


def paint_stream_text(painter: QPainter, doc: QTextDocument, doc_size: tuple[float, float], tail: PlainTail | None,
                      x: float, y: float, text_color: QColor, clip: tuple[float, float, float, float], *,
                      words: bool = True) -> None:
    """paint_document, then paint_plain_tail, with a painter of its own that ends right after
    (a frame of a streaming reply). `doc` goes at (x, y); `clip` (left, top, width, height) is in
    its coordinates. No save() and restore(), and plain numbers rather than Qt geometry objects:
    each Qt call costs microseconds on the caches the engine keeps emptying, and a frame draws
    only a word or two. Not `words`: the tail's word runs are left out (ui/conversation/streaming/live_words.py draws them)."""
    painter.translate(x, y)
    painter.setPen(text_color)
    left, top, width, height = clip
    right, bottom = left + width, top + height
    doc_width, doc_height = doc_size
    doc_right, doc_bottom = min(right, doc_width), min(bottom, doc_height)
    past_document = tail is not None and tail.after_document(left, top)
    if not past_document and left < doc_right and top < doc_bottom:
        doc_clip = QRectF(max(left, 0.0), max(top, 0.0), doc_right - max(left, 0.0), doc_bottom - max(top, 0.0))
        painter.setClipRect(doc_clip)
        if not _draw_last_paragraph_lines(painter, doc, doc_clip):
            _draw_with_layout(painter, doc, text_color, doc_clip)
        painter.setClipping(False)  # the tail is drawn below the document too
    if tail is not None and width > 0 and height > 0 and tail.first_top <= bottom and top <= tail.bottom:
        tail.draw_area(painter, left, top, bottom, words=words)


def _draw_with_layout(painter: QPainter, doc: QTextDocument, text_color: QColor, clip: QRectF) -> None:
    """Qt's own drawing of the document, inside `clip` (document coordinates)."""
    ctx = QAbstractTextDocumentLayout.PaintContext()
    palette = QPalette(ctx.palette)
    palette.setColor(QPalette.ColorRole.Text, text_color)
    ctx.palette = palette
    ctx.clip = clip
    doc.documentLayout().draw(painter, ctx)


def _draw_last_paragraph_lines(painter: QPainter, doc: QTextDocument, clip: QRectF) -> bool:
    """Draw only the lines inside `clip` when it lies within the last block and that block is
    a plain paragraph (no list, table, frame or background of its own). False: not the case.

    A streaming token repaints the last line or two of a reply. QTextLayout.draw (which the
    document layout calls per block) lays out glyph runs for every line of the block before
    clipping; this lays out and draws only the lines the clip holds.
    """
    shape = _last_paragraph(doc)
    if shape is None:
        return False
    layout, origin, above = shape
    if clip.top() < origin.y() and clip.top() < above:
        return False  # the clip reaches the lines of an earlier block
    # From the last line up, stopping above the clip: a token's clip holds the last line or two,
    # and asking Qt for each of a long paragraph's 20-30 lines costs more than drawing those.
    x, y = origin.x(), origin.y()
    clip_top, clip_bottom, clip_left = clip.top(), clip.bottom(), clip.left()
    for i in range(layout.lineCount() - 1, -1, -1):
        line = layout.lineAt(i)
        top = y + line.y()
        if top + line.height() <= clip_top:
            break
        if top < clip_bottom and x + line.x() + line.naturalTextWidth() + 2 > clip_left:
            line.draw(painter, origin)
    return True


def _last_paragraph(doc: QTextDocument) -> tuple[QTextLayout, QPointF, float] | None:
    """(layout, top-left, ink bottom of the block above) of the document's last block when it
    is a plain paragraph, else None. Kept on the document until its text or width changes:
    working it out asks Qt a dozen questions."""
    key = (doc.revision(), doc.textWidth())
    cached = getattr(doc, "_cove_last_paragraph", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    block = doc.lastBlock()
    layout = block.layout()
    shape = None
    if layout is not None and layout.lineCount() and block.textList() is None \
            and block.blockFormat().background().style() == Qt.BrushStyle.NoBrush and not doc.rootFrame().childFrames():
        shape = (layout, doc.documentLayout().blockBoundingRect(block).topLeft(), _ink_bottom(doc, block.previous()))
    doc._cove_last_paragraph = (key, shape)
    return shape


def paint_plain_tail(painter: QPainter, tail: PlainTail, origin: QPoint, text_color: QColor, visible: QRectF) -> None:
    """Draw a document's PlainTail; `origin` and `visible` as for paint_document."""
    clip = visible.translated(-QPointF(origin))
    if clip.isEmpty() or clip.bottom() < tail.first_top or clip.top() > tail.bottom:
        return
    painter.save()
    painter.translate(origin)
    painter.setPen(text_color)
    tail.draw(painter, clip)
    painter.restore()


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
