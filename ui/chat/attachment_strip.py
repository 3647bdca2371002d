"""The strip above the composer's text box: a thumbnail of each attached image with a button that
removes it, and one line for what the person should know about attaching (an image being checked,
a file refused). Hidden while it has nothing to show."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from ui.chat.attachments import THUMB, Attachment
from ui.theme import warning_color


class _Tile(QWidget):
    """One attached image: its thumbnail, and a small × in the corner that removes it."""

    remove_clicked = Signal(str)  # the image's sha256

    def __init__(self, attachment: Attachment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachment = attachment
        self.setFixedSize(THUMB + 8, THUMB + 8)
        tip = attachment.describe()
        self.setToolTip(tip)
        self.setAccessibleName(f"Attached image: {attachment.label}")
        self.setAccessibleDescription(tip)
        picture = QLabel(self)
        picture.setGeometry(0, 8, THUMB, THUMB)
        picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        picture.setPixmap(QPixmap.fromImage(attachment.thumbnail))  # a QPixmap: made here, on the UI thread
        picture.setFrameShape(QLabel.Shape.StyledPanel)
        self.picture = picture
        remove = QToolButton(self)
        remove.setText("×")
        remove.setAutoRaise(False)
        remove.setFixedSize(18, 18)
        remove.move(THUMB + 8 - 18, 0)
        remove.setToolTip(f"Remove {attachment.label}")
        remove.setAccessibleName(f"Remove {attachment.label}")
        remove.clicked.connect(lambda: self.remove_clicked.emit(attachment.sha256))
        self.remove_button = remove


class AttachmentStrip(QWidget):
    """Shows `set_attachments(...)` and `set_note(...)`; emits `remove_requested(sha256)`."""

    remove_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Attached images")
        self._tiles: list[_Tile] = []
        self._row = QHBoxLayout()
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.note.setAccessibleName("Attachment note")
        self.note.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(self._row)
        layout.addWidget(self.note)
        self._warning = False
        self.set_note("")
        self._refresh_visibility()

    def tiles(self) -> list[_Tile]:
        return list(self._tiles)

    def set_attachments(self, attachments: Sequence[Attachment]) -> None:
        for tile in self._tiles:
            self._row.removeWidget(tile)
            tile.deleteLater()
        self._tiles = []
        for n, attachment in enumerate(attachments):
            tile = _Tile(attachment, self)
            tile.remove_clicked.connect(self.remove_requested)
            self._row.insertWidget(n, tile)
            self._tiles.append(tile)
        self._refresh_visibility()

    def set_note(self, text: str, *, warning: bool = False) -> None:
        """One line under the thumbnails ("" hides it); `warning`: in the warning colour (a refusal)."""
        self._warning = warning
        self.note.setText(text)
        self.note.setVisible(bool(text))
        palette = self.note.palette()
        color = warning_color(self.palette()) if warning else self.palette().color(QPalette.ColorRole.PlaceholderText)
        palette.setColor(QPalette.ColorRole.WindowText, color)
        self.note.setPalette(palette)
        self._refresh_visibility()

    def _refresh_visibility(self) -> None:
        self.setVisible(bool(self._tiles) or bool(self.note.text()))
