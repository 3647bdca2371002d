"""The Add tool server dialog: a name and a command line (or a URL), with the exact command line
Cove will run shown, in full, before anything is saved (a pasted control, bidirectional or invisible
character shown as an escape, app/visible_text.py). Adding starts nothing."""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.mcp.servers import ToolServer, ToolServerDefinitionError, check_name, http_server, stdio_server
from app.visible_text import in_window
from ui.theme import show_sentence

COMMAND_HINT = "e.g. uvx mcp-server-time --local-timezone Europe/Paris"
URL_HINT = "e.g. http://127.0.0.1:8000/mcp"


def parse_command_line(text: str) -> list[str]:
    """The arguments of a command line as a POSIX shell splits it (quotes and backslashes);
    raises ToolServerDefinitionError with one sentence."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ToolServerDefinitionError(f"the command line cannot be read ({exc}): check its quotes.") from None


class AddToolServerDialog(QDialog):
    """Emits `add_requested(ToolServer)` when the person presses Add; the page stores it and
    calls `accept()`, or `refuse(sentence)` to keep the dialog open with the reason."""

    add_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a tool server")
        self.setAccessibleName("Add a tool server")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.resize(620, 0)

        self.name_field = QLineEdit(self)
        self.name_field.setAccessibleName("Tool server name")
        self.name_field.setPlaceholderText("e.g. time")
        self.command_choice = QRadioButton("A program on this computer (stdio)", self)
        self.url_choice = QRadioButton("A Streamable HTTP server (URL)", self)
        self.command_choice.setChecked(True)
        kinds = QButtonGroup(self)
        kinds.addButton(self.command_choice)
        kinds.addButton(self.url_choice)
        self.command_field = QLineEdit(self)
        self.command_field.setAccessibleName("Command line")
        self.command_field.setPlaceholderText(COMMAND_HINT)
        self.url_field = QLineEdit(self)
        self.url_field.setAccessibleName("Server URL")
        self.url_field.setPlaceholderText(URL_HINT)
        self.remote_box = QCheckBox("The server is on another machine (not 127.0.0.1 or localhost)", self)
        self.remote_box.setAccessibleName("Allow a server on another machine")

        self.preview_heading = QLabel(self)
        self.preview_heading.setWordWrap(True)
        self.preview = QPlainTextEdit(self)
        self.preview.setReadOnly(True)
        self.preview.setAccessibleName("Exact command line")
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.preview.setMaximumHeight(90)
        self.result_label = QLabel(self)
        self.result_label.setWordWrap(True)
        self.result_label.setAccessibleName("Add tool server message")
        self.result_label.hide()

        self.add_button = QPushButton("Add", self)
        self.add_button.setAccessibleName("Add this tool server")
        self.add_button.setDefault(True)
        self.add_button.clicked.connect(self._add)
        cancel = QPushButton("Cancel", self)
        cancel.clicked.connect(self.reject)

        form = QFormLayout()
        form.addRow("Name", self.name_field)
        form.addRow("", self.command_choice)
        form.addRow("Command line", self.command_field)
        form.addRow("", self.url_choice)
        form.addRow("URL", self.url_field)
        form.addRow("", self.remote_box)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.preview_heading)
        layout.addWidget(self.preview)
        layout.addWidget(self.result_label)
        layout.addLayout(buttons)

        for field in (self.name_field, self.command_field, self.url_field):
            field.textChanged.connect(lambda _t: self._update())
        for box in (self.command_choice, self.url_choice, self.remote_box):
            box.toggled.connect(lambda _c: self._update())
        self._update()

    def clear(self) -> None:
        for field in (self.name_field, self.command_field, self.url_field):
            field.clear()
        self.command_choice.setChecked(True)
        self.remote_box.setChecked(False)
        self.refuse("")
        self._update()

    def server(self) -> ToolServer:
        """The server as the fields define it; raises ToolServerDefinitionError (one sentence)."""
        name = self.name_field.text().strip()
        if not name:
            raise ToolServerDefinitionError("give the tool server a name.")
        check_name(name)
        if self.url_choice.isChecked():
            url = self.url_field.text().strip()
            if not url:
                raise ToolServerDefinitionError("give the server's URL, like http://127.0.0.1:8000/mcp.")
            return http_server(name, url, allow_remote=self.remote_box.isChecked())
        argv = parse_command_line(self.command_field.text())
        if not argv:
            raise ToolServerDefinitionError("give the command line that starts the server.")
        return stdio_server(name, argv)

    def exact_line(self) -> str:
        return self.preview.toPlainText()

    def refuse(self, sentence: str) -> None:
        show_sentence(self.result_label, capital(sentence), True, self)

    def result_text(self) -> str:
        return self.result_label.text() if not self.result_label.isHidden() else ""

    def _update(self) -> None:
        by_url = self.url_choice.isChecked()
        self.command_field.setEnabled(not by_url)
        self.url_field.setEnabled(by_url)
        self.remote_box.setEnabled(by_url)
        self.refuse("")
        try:
            server = self.server()
        except ToolServerDefinitionError as exc:
            server, problem = None, capital(str(exc))
        else:
            problem = ""
        if server is None:
            self.preview.setPlainText("")
            self.preview_heading.setText(problem)
        elif server.url:
            self.preview.setPlainText(in_window(server.identity))
            self.preview_heading.setText("Cove will connect to exactly this URL when you press Test. Adding contacts nothing.")
        else:
            self.preview.setPlainText(in_window(server.identity))
            self.preview_heading.setText(
                f"Cove will run exactly this command line ({len(server.command)} "
                f"argument{'s' if len(server.command) != 1 else ''}) when you press "
                "Test. Adding starts nothing."
            )
        self.add_button.setEnabled(server is not None)

    def _add(self) -> None:
        try:
            server = self.server()
        except ToolServerDefinitionError as exc:
            self.refuse(str(exc))
            return
        self.add_requested.emit(server)


def capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]
