"""An on/off switch drawn as a sliding knob in a rounded track, from the palette's colours:
a checkable button, so clicks, Space and `toggled` behave as on any Qt button."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QAbstractButton, QWidget


class Switch(QAbstractButton):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setCheckable(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        h = max(20, self.fontMetrics().height() + 4)
        return QSize(h * 2, h)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        palette = self.palette()
        group = QPalette.ColorGroup.Active if self.isEnabled() else QPalette.ColorGroup.Disabled
        on = self.isChecked()
        track = palette.color(group, QPalette.ColorRole.Highlight if on else QPalette.ColorRole.Mid)
        knob = palette.color(group, QPalette.ColorRole.Base)
        h = float(min(self.height(), self.width() / 2))
        rect = QRectF(0.5, (self.height() - h) / 2 + 0.5, 2 * h - 1, h - 1)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        if not self.isEnabled():
            painter.setOpacity(0.6)
        painter.setBrush(track)
        painter.drawRoundedRect(rect, rect.height() / 2, rect.height() / 2)
        inset = 3.0
        d = rect.height() - 2 * inset
        x = rect.right() - inset - d if on else rect.left() + inset
        painter.setBrush(knob)
        painter.drawEllipse(QRectF(x, rect.top() + inset, d, d))
        if self.hasFocus():
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(rect, rect.height() / 2, rect.height() / 2)
        painter.end()
