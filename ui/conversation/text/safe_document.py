"""A QTextDocument that never loads a resource: no http, file, UNC, ftp, qrc or data URL.

QTextDocument.loadResource is where Qt would read `file:` images from disk (a UNC path on
Windows is an SMB connection that leaks the person's NTLM hash) and decode `data:` URLs; a
well-meant override that fetched http would send the conversation to whoever wrote the URL.
This override never calls the base class: images get an in-memory placeholder, everything else
gets nothing, and each refusal is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QUrl
from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument

_PLACEHOLDER_SIZE = 16


class SafeTextDocument(QTextDocument):
    """Refuses every resource load; `refused` lists the URLs it was asked for."""

    def __init__(self, parent: QObject | None = None, on_refused: Callable[[str], None] | None = None) -> None:
        super().__init__(parent)
        self.refused: list[str] = []
        self._on_refused = on_refused
        self._placeholder: QImage | None = None
        self.setUndoRedoEnabled(False)  # streaming inserts must not grow an undo stack

    def loadResource(self, type: int, name: QUrl | str) -> Any:  # Qt's names
        # Invariant: the base class is never called, whatever the scheme (http, https, file,
        # UNC, ftp, qrc, data, relative). Nothing leaves or is read into this process.
        url = name.toString() if isinstance(name, QUrl) else name  # Qt passes a QUrl
        self.refused.append(url)
        if self._on_refused is not None:
            self._on_refused(url)
        if int(type) == int(QTextDocument.ResourceType.ImageResource):
            return self._placeholder_image()
        return None

    def _placeholder_image(self) -> QImage:
        if self._placeholder is None:
            image = QImage(_PLACEHOLDER_SIZE, _PLACEHOLDER_SIZE, QImage.Format.Format_ARGB32)
            image.fill(QColor(128, 128, 128, 60))
            painter = QPainter(image)
            painter.setPen(QColor(128, 128, 128, 200))
            painter.drawRect(0, 0, _PLACEHOLDER_SIZE - 1, _PLACEHOLDER_SIZE - 1)
            painter.drawLine(0, 0, _PLACEHOLDER_SIZE - 1, _PLACEHOLDER_SIZE - 1)
            painter.end()
            self._placeholder = image
        return self._placeholder
