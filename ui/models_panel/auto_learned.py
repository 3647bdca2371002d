"""The Settings tab's "Auto" section: what Auto learned from the person (app/routing/preferences.py),
one line per kind of task with a Forget button, and Forget all; a sentence when it learned nothing.
It reads the settings file each time it is shown or refreshed, and writes it when the person forgets."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.routing.preferences import forget, learned

NOTHING_YET = (
    "Auto has learned nothing yet. When you regenerate an Auto reply with another model and keep it, "
    "or choose “Always …” on a reply, Auto uses that model for that kind of task next time. "
    "This stays on this computer."
)


class AutoLearnedBox(QGroupBox):
    """Emits `changed()` after the person made Auto forget something."""

    changed = Signal()

    def __init__(self, core: Any, parent: QWidget | None = None) -> None:
        super().__init__("Auto", parent)
        self.core = core
        self.setAccessibleName("What Auto learned")
        self.empty_line = QLabel(NOTHING_YET, self)
        self.empty_line.setWordWrap(True)
        self.empty_line.setAccessibleName("Auto has learned nothing")
        self.rows = QVBoxLayout()
        self.rows.setContentsMargins(0, 0, 0, 0)
        self.forget_all_button = QPushButton("Forget all", self)
        self.forget_all_button.setAccessibleName("Forget everything Auto learned")
        self.forget_all_button.clicked.connect(lambda: self.forget(None))
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.note.setAccessibleName("Auto settings notice")
        self.note.hide()
        bottom = QHBoxLayout()
        bottom.addWidget(self.note, 1)
        bottom.addWidget(self.forget_all_button, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addWidget(self.empty_line)
        layout.addLayout(self.rows)
        layout.addLayout(bottom)
        self._forget_buttons: dict[str, QPushButton] = {}
        self._lines: list[QLabel] = []
        self.refresh()

    def lines(self) -> list[str]:
        """The sentences shown, one per kind of task Auto learned a model for."""
        return [label.text() for label in self._lines]

    def forget_button(self, kind: str) -> QPushButton:
        return self._forget_buttons[kind]

    def refresh(self) -> None:
        """Show what the settings file says now."""
        while self.rows.count():
            taken = self.rows.takeAt(0)
            widget = taken.widget() if taken is not None else None
            if widget is not None:
                widget.deleteLater()
        self._forget_buttons, self._lines = {}, []
        items = learned(self.core.settings)
        writable = not self.core.read_only
        for item in items:
            row = QWidget(self)
            line = QHBoxLayout(row)
            line.setContentsMargins(0, 0, 0, 0)
            label = QLabel(item.sentence(), row)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            button = QPushButton("Forget", row)
            button.setAccessibleName(f"Forget {item.model} for this kind of task")
            button.setEnabled(writable)
            button.clicked.connect(lambda _checked=False, kind=item.kind: self.forget(kind))
            line.addWidget(label, 1)
            line.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
            self.rows.addWidget(row)
            self._forget_buttons[item.kind] = button
            self._lines.append(label)
        self.empty_line.setVisible(not items)
        self.forget_all_button.setVisible(bool(items))
        self.forget_all_button.setEnabled(writable)
        if not writable and items:
            self._say("Cove's files are open read-only, so Auto cannot forget these now.")

    def forget(self, kind: str | None) -> bool:
        """Auto forgets the model it learned for `kind` (None: everything); False, with a sentence,
        when the settings could not be written."""
        if self.core.read_only:
            self._say("Cove's files are open read-only, so Auto cannot forget this now.")
            return False
        try:
            forget(self.core.paths.settings_file, self.core.settings, kind)
        except OSError as exc:
            self._say(f"The settings file could not be written ({exc.strerror or exc}), so Auto still remembers this.")
            return False
        self._say("")
        self.refresh()
        self.changed.emit()
        return True

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.refresh()

    def _say(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))
