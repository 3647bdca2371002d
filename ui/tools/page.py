"""The Tools page: the person's tool servers with their full command lines or URLs; Add… (the
dialog shows the exact command line; nothing starts), Test (starts the server off the UI thread,
lists its tools with their descriptions, stops it), Remove…, and each server's always-allow rules
with Revoke. While Cove is offline, Test asks before it starts anything. Below, which installed
models can call tools. Command lines and what a server wrote are shown with their control,
bidirectional and invisible characters as escapes (app/visible_text.py).

Threads: the store (the window's history connection) is read and written here, on the UI thread.
A Test's thread gets the frozen ToolServer and the McpHost, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.errors import describe_error
from app.mcp.failures import ToolServerError
from app.mcp.host import McpHost, ToolInfo
from app.mcp.servers import ToolServer
from app.mcp.store import ToolServerStore
from app.visible_text import in_window
from models.library import InstalledModel
from models.network import NetworkGate
from ui.background import BackgroundJob, run_in_background
from ui.theme import show_sentence
from ui.tools.add_dialog import AddToolServerDialog, capital
from ui.tools.server_view import ServerView, TestOutcome
from ui.tools.tool_models import ToolModel, tool_capable, tool_models_text

NAME_ROLE = Qt.ItemDataRole.UserRole
IDENTITY_ROLE = Qt.ItemDataRole.UserRole + 1  # the full command line or URL
ABOUT = (
    "Tool servers (MCP) are programs you choose, or HTTP servers on this computer, that offer tools a model "
    "can call. Adding one starts nothing; Test starts it to list its tools, then stops it. Turn a server on for "
    "a conversation in the Tools menu under the message box; every call a model wants to make is then shown to "
    "you first (Allow once, Always allow this tool, Deny). Cove cannot see what a tool server does on the network, "
    "and while Cove is offline it starts one only if you allow it for that reply."
)
Confirm = Callable[[str, str], bool]  # (title, question) -> yes?


class ToolsPage(QWidget):
    """Emits `servers_changed()` after an add, a remove or a revoke."""

    servers_changed = Signal()

    def __init__(
        self,
        store: ToolServerStore,
        gate: NetworkGate,
        mcp: Callable[[], McpHost],
        *,
        installed: Callable[[], list[InstalledModel]] | None = None,
        confirm: Confirm | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.store, self.gate = store, gate
        self._mcp = mcp  # made on the first Test
        self._installed = installed
        self._confirm = confirm or self._ask
        self.dialog: AddToolServerDialog | None = None
        self._outcomes: dict[str, TestOutcome] = {}  # name -> the last Test in this run
        self._jobs: dict[str, BackgroundJob] = {}  # name -> the Test running now
        self._models_job: BackgroundJob | None = None

        about = QLabel(ABOUT, self)
        about.setWordWrap(True)
        about.setAccessibleName("About tool servers")
        self.offline_note = QLabel(self)
        self.offline_note.setWordWrap(True)
        self.offline_note.setAccessibleName("Tools offline notice")
        # Each server as its name over its full command line or URL, wrapped, never cut with "…".
        self.server_list = QListWidget(self)
        self.server_list.setAccessibleName("Tool servers")
        self.server_list.setWordWrap(True)
        self.server_list.setResizeMode(QListView.ResizeMode.Adjust)  # re-wrap when the width changes
        self.server_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.server_list.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.server_list.setSpacing(3)
        self.server_list.currentItemChanged.connect(lambda *_: self._show_selected())
        self.empty = QLabel("No tool servers yet. Add… one: a name and the command line that starts it.", self)
        self.empty.setWordWrap(True)
        self.details = ServerView(self)
        self.details.revoke_requested.connect(self.revoke)
        self.message = QLabel(self)
        self.message.setAccessibleName("Tools message")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        self.models_label = QLabel(self)
        self.models_label.setAccessibleName("Models that can call tools")
        self.models_label.setWordWrap(True)
        self.models_label.setVisible(installed is not None)

        self.add_button = QPushButton("Add…", self)
        self.add_button.setAccessibleName("Add a tool server")
        self.add_button.clicked.connect(lambda: self.open_add_dialog())
        self.test_button = QPushButton("Test", self)
        self.test_button.setAccessibleName("Test the selected tool server")
        self.test_button.setToolTip("Start the server, list its tools with their descriptions, and stop it")
        self.test_button.clicked.connect(self.test_selected)
        self.remove_button = QPushButton("Remove…", self)
        self.remove_button.setAccessibleName("Remove the selected tool server")
        self.remove_button.clicked.connect(self.remove_selected)

        left = QWidget(self)
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.server_list, 1)
        column.addWidget(self.empty)
        column.addStretch(0)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(self.details)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setChildrenCollapsible(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.test_button)
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(about)
        layout.addWidget(self.offline_note)
        layout.addWidget(split, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)
        layout.addWidget(self.models_label)
        self.refresh()

    # ---- commands ----------------------------------------------------------------------

    def refresh(self) -> None:
        """List the servers as stored, and say whether Cove is offline."""
        selected = self._selected_name()
        self.server_list.blockSignals(True)
        self.server_list.clear()
        servers = self.store.all()
        for server in servers:
            item = QListWidgetItem(in_window(f"{server.name}\n{server.identity}"))
            item.setData(NAME_ROLE, server.name)
            item.setData(IDENTITY_ROLE, server.identity)
            item.setData(Qt.ItemDataRole.AccessibleTextRole, f"{server.name}: {server.identity}")
            self.server_list.addItem(item)
        self.server_list.blockSignals(False)
        self.server_list.setVisible(bool(servers))
        self.empty.setVisible(not servers)
        if selected is None and servers:
            selected = servers[0].name
        self._reselect(selected)
        offline = self.gate.offline
        self.offline_note.setText(
            f"Cove is offline ({self.gate.offline_reason}): Test asks before it starts a tool "
            "server, and starts it for that one Test only; a conversation's tool servers start only if you "
            "allow it for that reply."
            if offline
            else ""
        )
        self.offline_note.setVisible(offline)
        self._show_selected()

    def refresh_models(self) -> None:
        """Find, off the UI thread, which installed models' templates know tools."""
        if self._installed is None:
            return
        models = self._installed()  # the library's SQLite, on the UI thread
        if self._models_job is not None:
            self._models_job.drop()
        self.models_label.setText("Reading the installed models' chat templates…")
        self._models_job = run_in_background(
            self,
            lambda: tool_capable(models),
            on_done=lambda found: self._show_models(found, len(models)),
            on_failed=lambda sentence: self.models_label.setText(f"Could not read the models' templates: {sentence}"),
            name="cove-tool-models",
        )

    def open_add_dialog(self) -> AddToolServerDialog:
        """Show the Add dialog (window-modal; Add stores the server and starts nothing)."""
        if self.dialog is None:
            self.dialog = AddToolServerDialog(self)
            self.dialog.add_requested.connect(self.add)
        self.dialog.clear()
        self.dialog.open()
        return self.dialog

    def add(self, server: ToolServer) -> bool:
        """Store `server`; a refusal stays in the dialog. Starts nothing."""
        try:
            self.store.add(server)
        except ValueError as exc:  # a name taken already
            self._refuse(str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - the history could not be written
            self._refuse(describe_error(exc))
            return False
        if self.dialog is not None:
            self.dialog.accept()
        self._outcomes.pop(server.name, None)
        self.show_message(f"Added {server.name}. Nothing was started: Test starts it and lists its tools.")
        self.refresh()
        self._reselect(server.name)
        self.servers_changed.emit()
        return True

    def test_selected(self) -> None:
        """Start the selected server off the UI thread, list its tools, and stop it."""
        server = self._selected_server()
        if server is None or server.name in self._jobs:
            return
        if self.gate.offline:
            question = (
                f"Cove is offline ({self.gate.offline_reason}). Start the tool server {server.name} this once "
                f"to list its tools?\n\n{in_window(server.identity)}\n\nCove cannot see what it does on the network."
            )
            if not self._confirm("Start a tool server while offline?", question):
                self.show_message(f"{server.name} was not started: Cove is offline.")
                return
        try:
            host = self._mcp()
        except OSError as exc:  # its log file in Cove's log folder could not be opened
            self.show_message(capital(describe_error(exc)), error=True)
            return

        def work() -> list[ToolInfo]:
            try:
                return host.list_tools(server)
            finally:
                host.stop(server.name)  # a Test leaves nothing running

        self._outcomes[server.name] = TestOutcome(server.identity)
        self._jobs[server.name] = run_in_background(
            self,
            work,
            on_done=lambda tools: self._tested(server, TestOutcome(server.identity, tools=tuple(tools))),
            on_failed=lambda sentence: self._tested(server, TestOutcome(server.identity, failure=capital(sentence))),
            describe=_sentence,
            name="cove-tool-test",
        )
        self.show_message("")
        self._show_selected()

    def remove_selected(self) -> None:
        server = self._selected_server()
        if server is None:
            return
        question = f"Remove the tool server {server.name} and its always-allow rules?\n\n{in_window(server.identity)}"
        if not self._confirm("Remove tool server", question):
            return
        try:
            self.store.remove(server.name)
        except Exception as exc:  # noqa: BLE001 - one sentence
            self.show_message(capital(describe_error(exc)), error=True)
            return
        job = self._jobs.pop(server.name, None)
        if job is not None:
            job.drop()  # its thread stops the server when the listing ends
        self._outcomes.pop(server.name, None)
        self.show_message(f"Removed {server.name} and its always-allow rules.")
        self.refresh()
        self.servers_changed.emit()

    def revoke(self, name: str, tool: str) -> None:
        try:
            self.store.revoke(name, tool)
        except Exception as exc:  # noqa: BLE001 - one sentence
            self.show_message(capital(describe_error(exc)), error=True)
            return
        self.show_message(f"{tool} on {name} is no longer always allowed: its calls are asked again.")
        self._show_selected()
        self.servers_changed.emit()

    def show_message(self, text: str, error: bool = False) -> None:
        """One sentence under the list; a server's words in it (a tool's name) are shown, not obeyed."""
        show_sentence(self.message, in_window(text), error, self)

    def message_text(self) -> str:
        return self.message.text() if not self.message.isHidden() else ""

    def rows(self) -> list[tuple[str, str]]:
        """Each server's row as shown (name, command line or URL)."""
        return [
            (self.server_list.item(i).data(NAME_ROLE), self.server_list.item(i).data(IDENTITY_ROLE))
            for i in range(self.server_list.count())
        ]

    def select(self, name: str) -> None:
        """Show the server `name` (read again from the store)."""
        self._reselect(name)
        self._show_selected()

    def testing(self, name: str) -> bool:
        return name in self._jobs

    # ---- internals ---------------------------------------------------------------------

    def _tested(self, server: ToolServer, outcome: TestOutcome) -> None:
        self._jobs.pop(server.name, None)
        self._outcomes[server.name] = outcome
        self._show_selected()

    def _show_models(self, found: list[ToolModel], installed: int) -> None:
        self._models_job = None
        self.models_label.setText(tool_models_text(found, installed))

    def _show_selected(self) -> None:
        server = self._selected_server()
        if server is None:
            self.details.show_server(None, None, [])
        else:
            self.details.show_server(server, self._outcomes.get(server.name), self.store.rules(server))
        self.test_button.setEnabled(server is not None and server.name not in self._jobs)
        self.remove_button.setEnabled(server is not None)

    def _selected_name(self) -> str | None:
        item = self.server_list.currentItem()
        value = item.data(NAME_ROLE) if item is not None else None
        return value if isinstance(value, str) else None

    def _selected_server(self) -> ToolServer | None:
        name = self._selected_name()
        return self.store.find(name) if name else None

    def _reselect(self, name: str | None) -> None:
        for i in range(self.server_list.count()):
            item = self.server_list.item(i)
            if item.data(NAME_ROLE) == name:
                self.server_list.setCurrentItem(item)
                return

    def _refuse(self, sentence: str) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.refuse(sentence)
        else:
            self.show_message(capital(sentence), error=True)

    def _ask(self, title: str, question: str) -> bool:
        return QMessageBox.question(self, title, question) == QMessageBox.StandardButton.Yes


def _sentence(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, ToolServerError) else describe_error(exc)
