"""The sources under the conversation's replies, from the history: each shown reply that was given
passages gets them (ui/conversation/source_rows.py draws them); a click on one shows the passage
in full, and Open opens its file with the desktop's application only after the person saw the
full path and agreed (the same confirm-before-open rule as links in replies).

Threads: the history is read here, on the UI thread (the window's connection), like the rest of
the conversation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import sqlite_utils
from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from app.store.sources import sources_for
from ui.conversation.link_dialog import ask_before_opening
from ui.conversation.source_rows import OPEN_SOURCE, SourceLine, shown_sources
from ui.conversation.view import ConversationView


def confirm_open_file(parent: QWidget, line: SourceLine) -> bool:
    """Ask before a document opens: the full path, and with what."""
    where = f" The passage is at {line.where}." if line.where else ""
    return ask_before_opening(
        parent,
        "Open file?",
        f"Open this file with its usual application?\n\n{line.path}",
        f"Your desktop chooses the application for {line.name}.{where}",
    )


class PassageDialog(QDialog):
    """One passage in full, as the model was shown it, with where it is from and Open."""

    def __init__(self, line: SourceLine, open_file: Callable[[SourceLine], bool], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.line = line
        self.setWindowTitle(f"[{line.n}] {line.name}")
        self.setObjectName("passageDialog")
        head = QLabel(line.path + (f"\n{line.where}" if line.where else ""), self)
        head.setWordWrap(True)
        head.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit(line.excerpt, self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Passage")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.open_button = buttons.addButton("Open file…", QDialogButtonBox.ButtonRole.ActionRole)
        self.open_button.clicked.connect(lambda: open_file(line))
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(head)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(560, 380)


class ReplySources(QObject):
    """Gives the view's replies their sources (`show_sources`); answers clicks on them.
    `notice(sentence)`: a file that is gone. `file_opened(path)` once the desktop was asked to open one."""

    file_opened = Signal(str)

    def __init__(
        self,
        view: ConversationView,
        db: Callable[[], sqlite_utils.Database],
        *,
        notice: Callable[[str], None],
        confirm: Callable[[SourceLine], bool] | None = None,
        opener: Callable[[QUrl], object] | None = None,
    ) -> None:
        super().__init__(view)
        self._view, self._db, self._notice = view, db, notice
        self.confirm = confirm or (lambda line: confirm_open_file(view.window(), line))  # tests answer it
        self.opener = opener or QDesktopServices.openUrl
        self.dialog: PassageDialog | None = None
        view.source_activated.connect(self.activate)

    def show_sources(self, message_ids: list[str] | None = None) -> None:
        """Read the sources of these replies (all shown replies when None) and put them on their rows."""
        model = self._view.conversation_model()
        items = [item for item in model.items() if item.role == "assistant" and (message_ids is None or item.id in message_ids)]
        if not items:
            return
        found = sources_for(self._db(), [item.id for item in items])
        for item in items:
            shown = shown_sources(found.get(item.id, []))
            if shown != item.sources:
                model.update_message(dataclasses.replace(item, sources=shown))

    def activate(self, message_id: str, kind: str, n: int) -> None:
        model = self._view.conversation_model()
        row = model.row_of(message_id)
        shown = model.item(row).sources if row >= 0 else None
        line = shown.line(n) if shown is not None else None
        if line is None:
            return
        if kind == OPEN_SOURCE:
            self.open_file(line)
            return
        if self.dialog is not None:
            self.dialog.close()
        dialog = self.dialog = PassageDialog(line, self.open_file, self._view.window())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(lambda _result: self._forget(dialog))
        dialog.show()

    def open_file(self, line: SourceLine) -> bool:
        """Open the passage's file, only after the person agreed; a file that is gone gets a sentence."""
        if not Path(line.path).is_file():
            self._notice(f"{line.name} is no longer at {line.path}, so it cannot be opened.")
            return False
        if not self.confirm(line):
            return False
        self.opener(QUrl.fromLocalFile(line.path))
        self.file_opened.emit(line.path)
        return True

    def _forget(self, dialog: PassageDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
