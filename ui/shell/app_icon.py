"""Cove's window icon, from the PNGs in assets/icons (beside the checkout, or inside the frozen app)."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtGui import QIcon


def icon_dirs() -> list[Path]:
    """Where the icon PNGs may be: the PyInstaller bundle's data folder, then the checkout."""
    dirs = []
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        dirs.append(Path(bundle) / "assets" / "icons" / "png")
    dirs.append(Path(__file__).resolve().parents[2] / "assets" / "icons" / "png")  # ui/shell/ -> the checkout
    return dirs


def app_icon() -> QIcon:
    """Every size found (Qt picks the right one per use); an empty icon if none is installed."""
    icon = QIcon()
    for folder in icon_dirs():
        for png in sorted(folder.glob("cove-*.png")):
            icon.addFile(str(png))
        if not icon.isNull():
            break
    return icon
