"""Palettes the UI tests draw with."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette


def dark_palette() -> QPalette:
    """A dark palette (the system's dark mode, roughly)."""
    palette = QPalette()
    for role, colour in (
        (QPalette.ColorRole.Base, "#1e1e1e"),
        (QPalette.ColorRole.Window, "#1e1e1e"),
        (QPalette.ColorRole.Text, "#f0f0f0"),
        (QPalette.ColorRole.WindowText, "#f0f0f0"),
    ):
        palette.setColor(role, QColor(colour))
    return palette
