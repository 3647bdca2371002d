"""Colors derived from the system palette (light or dark), the number formats the widgets
share, and a label showing a sentence in the text or error colour.

Nothing here holds state: every function takes the palette it should read, so a widget
that receives a palette change simply asks again.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QLabel, QWidget

from models.units import format_size


def is_dark(palette: QPalette) -> bool:
    """True when the palette's text background (Base, behind lists, tables and the conversation) is dark."""
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def warning_color(palette: QPalette) -> QColor:
    """An amber that stays readable on the palette's background."""
    return QColor("#f0b429") if is_dark(palette) else QColor("#b35c00")


def error_color(palette: QPalette) -> QColor:
    """A red that stays readable on the palette's background."""
    return QColor("#ff7b72") if is_dark(palette) else QColor("#c62828")


def show_sentence(label: QLabel, text: str, error: bool, palette_of: QWidget, *, muted: bool = False) -> None:
    """Show `text` in `label` (hidden when empty), red when it is an error, grey when `muted` (a
    step under way), in the colours of `palette_of`'s palette; the label's `isError` property says
    which (tests read it)."""
    palette = QPalette(palette_of.palette())
    if error:
        palette.setColor(QPalette.ColorRole.WindowText, error_color(palette_of.palette()))
    elif muted:
        palette.setColor(QPalette.ColorRole.WindowText, muted_color(palette_of.palette()))
    label.setPalette(palette)
    label.setText(text)
    label.setProperty("isError", error)
    label.setVisible(bool(text))


def muted_color(palette: QPalette) -> QColor:
    """Secondary text: the palette's placeholder color."""
    return palette.color(QPalette.ColorRole.PlaceholderText)


def format_int(n: int) -> str:
    """1234 -> '1,234'."""
    return f"{n:,}"


def format_bytes(n: int | None) -> str:
    """Decimal units as file managers show them: 253 MB, 1.2 GB; None -> 'n/a'."""
    return "n/a" if n is None else format_size(n, compact=True)


def format_rate(tok_per_s: float | None) -> str:
    """Tokens per second with a precision that suits the magnitude."""
    if tok_per_s is None:
        return "–"
    return f"{tok_per_s:.1f} tok/s" if tok_per_s < 100 else f"{tok_per_s:.0f} tok/s"


def pin_icon(color: QColor, size: int = 14) -> QIcon:
    """A small push-pin drawn in `color` (no icon theme needed, works in light and dark)."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = float(size)
    painter.setPen(QPen(color, max(1.0, s / 9), Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    painter.drawLine(QPointF(s * 0.5, s * 0.55), QPointF(s * 0.5, s * 0.95))  # needle
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(color)
    head = QPainterPath()
    head.addRoundedRect(QRectF(s * 0.3, s * 0.08, s * 0.4, s * 0.3), s * 0.08, s * 0.08)
    head.addRect(QRectF(s * 0.15, s * 0.4, s * 0.7, s * 0.14))
    head.addRect(QRectF(s * 0.38, s * 0.3, s * 0.24, s * 0.12))
    painter.drawPath(head)
    painter.end()
    return QIcon(pixmap)


def dot_icon(color: QColor, size: int = 12, selected_color: QColor | None = None) -> QIcon:
    """A filled circle, used to mark the loaded model; `selected_color` is used on highlighted rows."""
    icon = QIcon()
    icon.addPixmap(_dot_pixmap(color, size), QIcon.Mode.Normal)
    highlighted = _dot_pixmap(selected_color or color, size)
    icon.addPixmap(highlighted, QIcon.Mode.Selected)  # item views
    icon.addPixmap(highlighted, QIcon.Mode.Active)  # menu-style combo popups
    return icon


def _dot_pixmap(color: QColor, size: int) -> QPixmap:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(color)
    inset = size * 0.2
    painter.drawEllipse(QRectF(inset, inset, size - 2 * inset, size - 2 * inset))
    painter.end()
    return pixmap


def blank_icon(size: int = 12) -> QIcon:
    """A transparent icon that keeps unmarked rows aligned with marked ones."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    return QIcon(pixmap)
