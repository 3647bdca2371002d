"""The widget a streaming reply's text is drawn on while it streams, over its row's text area.

A frame's repaint then goes to this small widget alone, not through the list view's paint and
the row's delegate. Opaque (the list view never paints under it), filled by Qt itself, and
transparent for the mouse (the view keeps hover, links and clicks). Its coordinates are the
reply's (its top-left is the text's); it draws only what StreamingReply.paint() draws.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QWidget

from ui.conversation.streaming.reply import Rect, StreamingReply


class ReplySurface(QWidget):
    """Over `viewport`; hidden until place() puts it over a streaming row."""

    def __init__(self, viewport: QWidget) -> None:
        super().__init__(viewport)
        self._viewport = viewport
        # A painter on it starts with the text's colour and font (WindowText, setFont): a frame's
        # paint makes no call it can avoid, each costing microseconds on the caches the engine empties.
        self.setAutoFillBackground(True)
        # Grown (the row grows a few lines at a time): only the new part is painted.
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAccessibleName("Reply being written")
        self.hide()
        self._reply: StreamingReply | None = None
        self._message_id = ""
        self.row = -1  # the row it is over, or -1
        self._color = QColor()
        self._font: QFont | None = None  # the last words font the reply drew with

    def place(self, row: int, message_id: str, reply: StreamingReply, geometry: QRect, color: QColor, background: QColor) -> None:
        """Lie over `row` (its text area is `geometry`, viewport coordinates) and draw `reply`."""
        if self.isHidden() or self._color != color or self.palette().color(QPalette.ColorRole.Window) != background:
            self._color = color
            palette = self.palette()
            palette.setColor(QPalette.ColorRole.Window, background)
            palette.setColor(QPalette.ColorRole.WindowText, color)
            self.setPalette(palette)
        if reply is not self._reply:
            self.update()
        self.row, self._message_id, self._reply = row, message_id, reply
        if self.geometry() != geometry:
            self.setGeometry(geometry)  # paints what it adds (WA_StaticContents), or all when it moved
        if self.isHidden():
            self.show()  # paints all of it

    def stop(self) -> None:
        """Leave the row to the list view (it paints what was under this)."""
        self.row, self._reply, self._message_id = -1, None, ""
        if not self.isHidden():
            self.hide()

    def repaint_damage(self, rects: tuple[Rect, ...]) -> None:
        for x, y, width, height in rects:
            self.update(x, y, width, height)  # Qt clips it to the widget

    def covers(self, message_id: str, area: QRect) -> bool:
        """Whether it draws `message_id`'s text in `area` (viewport coordinates), as far as
        the viewport shows it: the row's own paint leaves that text out."""
        if self._reply is None or message_id != self._message_id or self.isHidden():
            return False
        return self.geometry().contains(area.intersected(self._viewport.rect()))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        reply = self._reply
        if reply is None:
            return
        painter = QPainter(self)  # on the background Qt filled in, with the text's pen and font
        font = reply.words_font()
        if font is not None and font is not self._font:
            self._font = font
            if self.font() != font:
                self.setFont(font)  # once a reply: the painter of the next paint starts with it
                painter.setFont(font)
        reply.paint(painter, event.rect().getRect(), self._color, ready=font is not None)  # type: ignore[arg-type]  # stub: getRect -> object; Qt gives (x, y, w, h)
        painter.end()
