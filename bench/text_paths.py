"""Diagnosis only, not a product mode: swap the conversation view's streaming text path.

The starter's tg through the window falls short of 0.98x headless because of what
the window spends per streamed token on a 2-core machine. These stand-ins for the view's
text path bound that cost from below:
  full     the real path (markdown document, plain tail, row layout, quick-path paints, and
           the surface a streaming reply is drawn on)
  unpainted the real path without its paints: text is laid out, the view never repaints
  minimal  a 700x22 widget over the view that draws the last 90 characters with one
           drawText per frame: what any Qt window pays to show a token (update, paint event,
           backing store), with the same frame pacing, engine client and performance panel
  none     the text is not shown at all (nor counted by the performance panel)
Used by bench/ratio_diag.py (tg ratio) and bench/ui_cpu.py --text (CPU per token).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

MODES = ("full", "unpainted", "minimal", "none")


class _LastLine(QWidget):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.text = ""
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().base())
        painter.drawText(4, 16, self.text[-90:])
        painter.end()


def use_text_path(window, mode: str) -> None:
    """Make `window` (a MainWindow) show streamed text the `mode` way (see the docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown text path {mode!r}: one of {', '.join(MODES)}")
    if mode == "full":
        return
    if mode == "unpainted":
        window.view.viewport().setUpdatesEnabled(False)
        return
    window.controller.reply_text_received.disconnect(window._on_text)
    if mode == "none":
        return
    line = _LastLine(window.view.viewport())
    line.setGeometry(10, 300, 700, 22)
    line.show()
    window._diag_line = line  # keep it alive

    def on_text(_message_id: str, text: str, n_tokens: int) -> None:
        line.text += text
        line.update()
        window.perf.tokens_arrived(n_tokens, time.monotonic())

    window.controller.reply_text_received.connect(on_text)
