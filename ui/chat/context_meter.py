"""The context meter's bar under the composer's box: the share of the context window in use,
painted from the palette (the warning colour near the end)."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from ui.theme import warning_color


class MeterBar(QWidget):
    """A thin bar painted from the palette: the share of the context window in use."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fraction = 0.0
        self._warning = False
        self.setFixedHeight(4)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_fraction(self, fraction: float, warning: bool) -> None:
        fraction = min(1.0, max(0.0, fraction))
        if fraction != self._fraction or warning != self._warning:
            self._fraction, self._warning = fraction, warning
            self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(120, 4)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        palette = self.palette()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect())
        radius = rect.height() / 2
        painter.setBrush(palette.color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(rect, radius, radius)
        if self._fraction > 0:
            fill = warning_color(palette) if self._warning else palette.color(QPalette.ColorRole.Highlight)
            painter.setBrush(fill)
            painter.drawRoundedRect(QRectF(rect.x(), rect.y(), rect.width() * self._fraction, rect.height()), radius, radius)
        painter.end()
