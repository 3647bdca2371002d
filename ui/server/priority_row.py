"""The Server panel's choice of who goes first while API clients share the window's engine
(app/settings.py window_first): the window's reply, or every reply alike. Saved when chosen;
the window's next turn asks the engine for it (ui/chat/turn_runner.py)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.core import Core
from app.settings import save_settings

CHOICES = (("The window's reply goes first", True), ("All replies are treated equally", False))


class PriorityRow(QWidget):
    """ "When the API server is busy: [the window's reply goes first | all replies are treated equally]"."""

    def __init__(self, core: Core, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._core = core
        self.choice = QComboBox(self)
        for text, window_first in CHOICES:
            self.choice.addItem(text, window_first)
        self.choice.setCurrentIndex(0 if core.settings.window_first else 1)
        self.choice.setAccessibleName("When the API server is busy")
        self.choice.setToolTip(
            "While API clients and this window share a model: the window's reply gets its "
            "token at every step and the clients' replies fill the rest, or every reply "
            "waits its turn alike. Applies from the window's next reply."
        )
        self.note = QLabel(self)
        self.note.setAccessibleName("Priority setting message")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("When the server is busy:", self))
        row.addWidget(self.choice)
        row.addWidget(self.note, 1)
        self.choice.currentIndexChanged.connect(lambda _i: self.save())

    def window_first(self) -> bool:
        return bool(self.choice.currentData())

    def save(self) -> None:
        """Keep the choice in the settings file; a read-only data folder says so beside it."""
        if self._core.read_only:
            self.note.setText(f"Not saved: {self._core.notice or 'the data folder is read-only'}")
            return
        try:
            save_settings(self._core.paths.settings_file, replace(self._core.settings, window_first=self.window_first()))
        except OSError as exc:
            self.note.setText(f"Not saved: {exc.strerror or exc}")
            return
        self.note.setText("")
