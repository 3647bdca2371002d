"""The API keys in the Server panel: the names of the clients' keys with Remove, and New key…,
which shows the new key once (only its sha256 is kept). Runs on the UI thread, on the window's
own database connection."""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.serve.http.keys import ApiKeys, KeyRefused
from ui.server.control import sentence
from ui.theme import error_color

AskName = Callable[[], str | None]  # the name for a new key, or None: cancelled
Confirm = Callable[[str], bool]  # (question) -> yes?
SHOWN_ONCE = "Copy it now: Cove keeps only a fingerprint of it, so it will not be shown again."
# Without a key, Linux lets only the person's own account in (app/serve/http/peer_owner.py); elsewhere
# the socket's owner is not checked.
NO_KEYS = (
    "No keys: your own programs on this computer may use the server; other accounts on it and web pages may not."
    if sys.platform.startswith("linux")
    else "No keys: any program on this computer may use the server (web pages may not); make a key to let only chosen programs in."
)
KEYS_NOTE = (
    "Name a key after the client that uses it (an editor, a script); the record shows "
    "each request's key name. Once a key exists, every request needs one."
)


class KeysSection(QGroupBox):
    def __init__(
        self, keys: ApiKeys, *, ask_name: AskName | None = None, confirm: Confirm | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__("API keys", parent)
        self.keys = keys
        self._ask_name = ask_name or self._ask
        self._confirm = confirm or self._ask_remove
        self.setAccessibleName("API keys")

        self.list = QListWidget(self)
        self.list.setAccessibleName("Key names")
        self.list.itemSelectionChanged.connect(self._update_buttons)
        self.empty = QLabel(NO_KEYS, self)
        self.empty.setWordWrap(True)
        self.new_button = QPushButton("New key…", self)
        self.new_button.setAccessibleName("New API key")
        self.new_button.clicked.connect(self.new_key)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setAccessibleName("Remove API key")
        self.remove_button.clicked.connect(self.remove_selected)
        self.message = QLabel(self)
        self.message.setAccessibleName("Key message")
        self.message.setWordWrap(True)
        self.message.setStyleSheet(f"color: {error_color(self.palette()).name()}")

        self.shown = QWidget(self)  # the new key, once
        self.shown_for = QLabel(self.shown)
        self.key_field = QLineEdit(self.shown)
        self.key_field.setReadOnly(True)
        self.key_field.setAccessibleName("New key")
        self.copy_button = QPushButton("Copy", self.shown)
        self.copy_button.setAccessibleName("Copy the new key")
        self.copy_button.clicked.connect(self._copy_key)
        once = QLabel(SHOWN_ONCE, self.shown)
        once.setWordWrap(True)
        shown = QVBoxLayout(self.shown)
        shown.setContentsMargins(0, 0, 0, 0)
        shown.addWidget(self.shown_for)
        field_row = QHBoxLayout()
        field_row.addWidget(self.key_field, 1)
        field_row.addWidget(self.copy_button)
        shown.addLayout(field_row)
        shown.addWidget(once)
        self.shown.hide()

        note = QLabel(KEYS_NOTE, self)
        note.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty)
        layout.addLayout(buttons)
        layout.addWidget(self.message)
        layout.addWidget(self.shown)
        layout.addWidget(note)
        self.refresh()

    def names(self) -> list[str]:
        return [self.list.item(row).text() for row in range(self.list.count())]

    def refresh(self) -> None:
        names = self.keys.names()
        self.list.clear()
        self.list.addItems(names)
        self.list.setVisible(bool(names))
        self.empty.setVisible(not names)
        self._update_buttons()

    def new_key(self) -> None:
        name = self._ask_name()
        if name is None:
            return
        self.forget_shown_key()
        try:
            key = self.keys.add(name.strip())
        except KeyRefused as exc:
            self.message.setText(sentence(str(exc)) + ".")
            return
        self.message.clear()
        self.refresh()
        self.shown_for.setText(f"The key for “{name.strip()}”:")
        self.key_field.setText(key)
        self.key_field.setCursorPosition(0)
        self.shown.show()
        self.copy_button.setText("Copy")

    def remove_selected(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        name = item.text()
        if not self._confirm(f"Remove the key “{name}”? A client using it is refused from now on."):
            return
        self.forget_shown_key()
        self.message.clear()
        self.keys.remove(name)
        self.refresh()

    def forget_shown_key(self) -> None:
        """Take the new key off the screen for good (the panel closed, or another key was made)."""
        self.key_field.clear()
        self.shown.hide()

    def _copy_key(self) -> None:
        if self.key_field.text():
            QGuiApplication.clipboard().setText(self.key_field.text())
            self.copy_button.setText("Copied")

    def _update_buttons(self) -> None:
        self.remove_button.setEnabled(self.list.currentItem() is not None and bool(self.list.selectedItems()))

    def _ask(self) -> str | None:
        name, ok = QInputDialog.getText(self, "New API key", "Name of the client that will use it (e.g. editor):")
        return name if ok and name.strip() else None

    def _ask_remove(self, question: str) -> bool:
        return QMessageBox.question(self, "Remove API key", question) == QMessageBox.StandardButton.Yes
