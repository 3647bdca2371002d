"""The images of a message in its row: where each thumbnail goes (from the sizes the history keeps,
so a row is laid out without reading a file), how it is painted (the cached thumbnail, a quiet box
while it loads, a placeholder with a sentence when its file is gone), what a click or a hover on one
means, and the tooltip it shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter

from app.store.message_images import KeptImage
from ui.conversation.thumbnails import ThumbnailCache

IMAGE = "image"  # a delegate Hit's kind: the image `value` (its place, from 0) of the message was clicked
THUMB_HEIGHT = 140  # a thumbnail is at most this tall
THUMB_WIDTH = 220  # and at most this wide; small images keep their own size
SPACING = 8


@dataclass(frozen=True)
class ImagesLayout:
    """Each image's box in row coordinates, in the message's order, and the area they cover."""

    rects: tuple[QRect, ...]
    area: QRect

    @property
    def bottom(self) -> int:
        return self.area.bottom()


def thumb_size(image: KeptImage, max_width: int) -> QSize:
    """The size of `image`'s thumbnail: its own shape, within THUMB_HEIGHT and the width allowed,
    never enlarged."""
    width, height = max(1, image.width), max(1, image.height)
    scale = min(1.0, THUMB_HEIGHT / height, min(THUMB_WIDTH, max_width) / width)
    return QSize(max(1, round(width * scale)), max(1, round(height * scale)))


def layout_images(images: Sequence[KeptImage], left: int, width: int, top: int) -> ImagesLayout:
    """Thumbnails in lines from `left`, `width` wide, starting at `top`: a thumbnail that does not
    fit the line starts the next one."""
    rects: list[QRect] = []
    x, y, line_height = left, top, 0
    for image in images:
        size = thumb_size(image, width)
        if x > left and x + size.width() > left + width:
            x, y, line_height = left, y + line_height + SPACING, 0
        rects.append(QRect(QPoint(x, y), size))
        x += size.width() + SPACING
        line_height = max(line_height, size.height())
    area = QRect(left, top, width, y + line_height - top)
    return ImagesLayout(tuple(rects), area)


def image_hit(layout: ImagesLayout | None, pos: QPoint, slop: int) -> int | None:
    """The place of the image under `pos` (row coordinates), or None."""
    if layout is None or not layout.area.adjusted(-slop, -slop, slop, slop).contains(pos):
        return None
    for n, rect in enumerate(layout.rects):
        if rect.adjusted(-slop, -slop, slop, slop).contains(pos):
            return n
    return None


def tooltip(image: KeptImage, problem: str | None) -> str:
    """ "PNG, 640×480, 12.3 kB · click to open", or why it cannot be shown."""
    return problem if problem else f"{image.describe()} · click to open it larger"


def paint_images(
    painter: QPainter,
    layout: ImagesLayout,
    images: Sequence[KeptImage],
    thumbnails: ThumbnailCache,
    dpr: float,
    fm: QFontMetrics,
    frame: QColor,
    muted: QColor,
    shown: QRect,
) -> None:
    """Each image's thumbnail in its box (asked of `thumbnails`, which loads those it lacks), a
    framed box while one loads, and a placeholder saying why when its file cannot be shown."""
    for image, rect in zip(images, layout.rects):
        if not rect.intersects(shown):
            continue
        pixmap = thumbnails.pixmap(image, rect.size(), dpr)
        if pixmap is not None:
            painter.drawPixmap(rect, pixmap)
            continue
        painter.save()
        painter.setPen(frame)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        problem = thumbnails.problem(image.sha256)
        if problem:
            painter.setPen(muted)
            box = rect.adjusted(4, 4, -4, -4)
            words = "Image missing" if box.height() < 3 * fm.height() else problem
            painter.drawText(box, int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap), words)
        painter.restore()
