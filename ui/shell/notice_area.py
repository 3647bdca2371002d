"""The window's notice area, above the conversation: notices that stay until the person
dismisses them (what opening the files found at start-up: a damaged history moved aside, a
newer one opened read-only, unreadable settings, replies repaired), one under another, and
below them one passing line (progress, an error) that is replaced or cleared on its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


def open_in_file_manager(folder: Path) -> bool:
    """Open `folder` in the desktop's file manager; False when the desktop could not."""
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


class KeptNotice(QFrame):
    """One notice that stays: its sentence (selectable, so a path can be copied), an Open
    folder button when it is about a file that was moved, and Dismiss."""

    dismissed = Signal()
    folder_requested = Signal(Path)

    def __init__(self, text: str, folder: Path | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("keptNotice")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        self.setAutoFillBackground(True)
        self.folder = folder
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAccessibleName("Notice")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.label, 1)
        self.open_button: QPushButton | None = None
        if folder is not None:
            self.open_button = QPushButton("Open folder")
            self.open_button.setAccessibleName("Open the folder this notice is about")
            self.open_button.setToolTip(f"Open {folder} in the file manager")
            self.open_button.clicked.connect(lambda: self.folder_requested.emit(folder))
            row.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignTop)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setAccessibleName("Dismiss this notice")
        self.dismiss_button.clicked.connect(self.dismissed.emit)
        row.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)

    def text(self) -> str:
        return self.label.text()


class NoticeArea(QWidget):
    """Kept notices in the order they came, then the passing line. A passing notice never
    removes a kept one, and an empty passing notice clears only the passing line."""

    notice_dismissed = Signal(str)  # the text of a kept notice the person dismissed

    def __init__(self, parent: QWidget | None = None, *, open_folder: Callable[[Path], bool] = open_in_file_manager) -> None:
        super().__init__(parent)
        self._open_folder = open_folder
        self._kept: list[KeptNotice] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(1)
        self.passing = QLabel()
        self.passing.setObjectName("notice")
        self.passing.setWordWrap(True)
        self.passing.setAccessibleName("Notice")
        self.passing.hide()
        self._layout.addWidget(self.passing)

    def keep(self, text: str, folder: Path | None = None) -> KeptNotice | None:
        """Show `text` until the person dismisses it (the same sentence is shown once)."""
        if not text or text in self.kept_texts():
            return None
        notice = KeptNotice(text, folder, self)
        notice.dismissed.connect(lambda: self._dismiss(notice))
        notice.folder_requested.connect(self._open)
        self._layout.insertWidget(len(self._kept), notice)
        notice.show()  # a child added to a shown widget is otherwise hidden until the next event loop pass
        self._kept.append(notice)
        return notice

    def kept(self) -> list[KeptNotice]:
        return list(self._kept)

    def kept_texts(self) -> list[str]:
        return [n.text() for n in self._kept]

    def show_passing(self, text: str) -> None:
        """Replace the passing line; "" clears it (and only it)."""
        self.passing.setText(text)
        self.passing.setVisible(bool(text))

    def _dismiss(self, notice: KeptNotice) -> None:
        if notice in self._kept:
            text = notice.text()
            self._kept.remove(notice)
            self._layout.removeWidget(notice)
            notice.hide()
            notice.deleteLater()
            self.notice_dismissed.emit(text)

    def _open(self, folder: Path) -> None:
        if not self._open_folder(folder):
            self.show_passing(f"Could not open a file manager; the folder is {folder}.")
