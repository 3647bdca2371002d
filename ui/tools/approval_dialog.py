"""The question before a tool call runs: the server (its name and full command line or URL), the
tool, and the arguments in full as pretty JSON, with Allow once / Always allow this tool / Deny.

Opened with `open()` (window-modal, never a nested event loop), so the window's frame timer keeps
running while it is up; the answer comes back as `answered(call_id, verdict)`. Closing the
dialog in any way (the close box, Esc) answers Deny. The dialog only asks: the Decision is made
by app.mcp.approval and checked where the call runs.

What a model or a server wrote is shown by the window's rule for untrusted text
(app/visible_text.py): control, bidirectional and invisible characters appear as escapes (the
arguments as JSON's own), so nothing can make the question read backwards or hide a part of it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.mcp.approval import ALLOW_ONCE, ALWAYS, DENY, ToolRequest
from app.visible_text import in_window, json_in_window


class ToolApprovalDialog(QDialog):
    """One call's question. `answered` is emitted exactly once."""

    answered = Signal(str, str)  # call id, ALLOW_ONCE | ALWAYS | DENY

    def __init__(self, call_id: str, request: ToolRequest, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call_id = call_id
        self.request = request
        self._verdict: str | None = None
        self.setObjectName("toolApprovalDialog")
        self.setWindowTitle("Allow this tool call?")
        self.setAccessibleName("Allow this tool call?")
        server = request.server
        tool, name, identity = in_window(request.tool), in_window(server.name), in_window(server.identity)
        self.heading = QLabel(f"The model wants to call <b>{_escape(tool)}</b> on the tool server <b>{_escape(name)}</b>.", self)
        self.heading.setTextFormat(Qt.TextFormat.RichText)
        self.heading.setWordWrap(True)
        where = "URL" if server.url else "command line"
        self.identity = QLabel(f"Server {where}: {identity}", self)
        self.identity.setWordWrap(True)
        self.identity.setTextFormat(Qt.TextFormat.PlainText)
        self.identity.setAccessibleName("Tool server")
        # Why a tool "always" allowed is asked about again (what will run has changed), if it is.
        self.asked_again = QLabel(in_window(request.asked_again), self)
        self.asked_again.setWordWrap(True)
        self.asked_again.setTextFormat(Qt.TextFormat.PlainText)
        self.asked_again.setVisible(bool(request.asked_again))
        self.arguments = QPlainTextEdit(json_in_window(request.arguments_text()), self)  # scrollable, in full
        self.arguments.setReadOnly(True)
        self.arguments.setAccessibleName("Arguments")
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.arguments.setFont(mono)
        note = QLabel(
            "Cove cannot see what a tool server does on your computer or on the network. Closing this window denies the call.", self
        )
        note.setWordWrap(True)

        self.allow_button = QPushButton("Allow once", self)
        self.always_button = QPushButton("Always allow this tool", self)
        self.always_button.setToolTip(f"Kept for {tool} on {name} as it is defined now ({identity}); revoke it on the Tools page")
        self.deny_button = QPushButton("Deny", self)
        for button in (self.allow_button, self.always_button):
            button.setAutoDefault(False)
        self.deny_button.setDefault(True)  # Enter never allows
        self.allow_button.clicked.connect(lambda: self._answer(ALLOW_ONCE))
        self.always_button.clicked.connect(lambda: self._answer(ALWAYS))
        self.deny_button.clicked.connect(lambda: self._answer(DENY))

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.deny_button)
        buttons.addWidget(self.always_button)
        buttons.addWidget(self.allow_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.asked_again)
        layout.addWidget(self.identity)
        layout.addWidget(QLabel("Arguments:", self))
        layout.addWidget(self.arguments, 1)
        layout.addWidget(note)
        layout.addLayout(buttons)
        self.resize(620, 420)

    @property
    def verdict(self) -> str | None:
        return self._verdict

    def _answer(self, verdict: str) -> None:
        if self._verdict is None:  # the first answer counts; a later one only closes the dialog
            self._verdict = verdict
            self.answered.emit(self.call_id, verdict)
        if self._verdict == DENY:
            super().reject()
        else:
            super().accept()

    def reject(self) -> None:  # the close box, Esc: a question closed unanswered is a denial
        self._answer(DENY)

    def done(self, result: int) -> None:
        if self._verdict is None:
            self._answer(DENY)
            return
        super().done(result)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if self._verdict is None:
            self._verdict = DENY
            self.answered.emit(self.call_id, DENY)
        super().closeEvent(event)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
