"""A small line chart of recent values (generation speed over the current reply), painted with QPainter.

It holds only the values it was last given; the owner decides how often to give new ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

# At most one point per this many pixels: a long reply has hundreds of samples, and stroking
# them all with antialiasing costs far more than a repaint should, for no visible gain.
PIXELS_PER_POINT = 3
# The faint fill under the line, as this fraction of the line's colour over the background.
# It is blended here into one opaque colour: the raster engine fills an opaque polygon several
# times faster than a translucent one, and the widget paints its own background, so the pixels are the same (to one level of rounding).
FILL_ALPHA = 50 / 255


def _blend(color: QColor, background: QColor, alpha: float) -> QColor:
    """`color` at `alpha` over `background`, as an opaque colour."""
    return QColor(
        round(color.red() * alpha + background.red() * (1 - alpha)),
        round(color.green() * alpha + background.green() * (1 - alpha)),
        round(color.blue() * alpha + background.blue() * (1 - alpha)),
    )


def _fit(values: Sequence[float], limit: int) -> list[float]:
    """`values` averaged into at most `limit` equal buckets (in order); unchanged when they fit."""
    n = len(values)
    if n <= limit:
        return list(values)
    out = []
    for k in range(limit):
        bucket = values[k * n // limit : (k + 1) * n // limit]
        out.append(sum(bucket) / len(bucket))
    return out


class Sparkline(QWidget):
    """Draws `values` left to right, scaled from 0 to their maximum; the last point is marked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: tuple[float, ...] = ()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumSize(60, 28)
        # It fills its own background: a repaint (4 a second while a reply streams) then does
        # not repaint the panel and the main window beneath it.
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def values(self) -> tuple[float, ...]:
        return self._values

    def set_values(self, values: Sequence[float]) -> None:
        """Replace the plotted values and schedule one repaint (only if they changed)."""
        new = tuple(float(v) for v in values)
        if new != self._values:
            self._values = new
            self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(160, 36)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        palette = self.palette()
        painter = QPainter(self)
        painter.fillRect(event.rect(), palette.color(self.backgroundRole()))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        area = QRectF(self.rect()).adjusted(2, 3, -4, -3)

        baseline = palette.color(QPalette.ColorRole.Mid)
        painter.setPen(QPen(baseline, 1))
        painter.drawLine(area.bottomLeft(), area.bottomRight())

        points = self._points(area)
        if not points:
            painter.end()
            return
        line_color = palette.color(QPalette.ColorRole.Highlight)
        if len(points) > 1:
            fill = _blend(line_color, palette.color(self.backgroundRole()), FILL_ALPHA)
            under = QPolygonF([QPointF(points[0].x(), area.bottom()), *points, QPointF(points[-1].x(), area.bottom())])
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)  # a faint fill: edges do not show
            painter.drawPolygon(under)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            # One pixel wide: at 1.5 the raster engine strokes the line as a path, many times
            # slower, and this repaints 4 times a second while the engine runs.
            painter.setPen(QPen(line_color, 1.0, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.PenJoinStyle.RoundJoin))
            painter.drawPolyline(points)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(line_color)
        painter.drawEllipse(points[-1], 2.5, 2.5)
        painter.end()

    def _points(self, area: QRectF) -> list[QPointF]:
        values = _fit(self._values, max(2, int(area.width() // PIXELS_PER_POINT)))
        if not values:
            return []
        top = max(values)
        top = top if top > 0 else 1.0
        step = area.width() / (len(values) - 1) if len(values) > 1 else 0.0
        x0 = area.left() if len(values) > 1 else area.right()
        return [QPointF(x0 + i * step, area.bottom() - area.height() * max(0.0, v) / top) for i, v in enumerate(values)]
