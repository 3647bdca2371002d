"""One tool server in full, the right side of the Tools page: its exact command line or URL, the
note that Cove cannot see what it does on the network, what the last Test found (its tools with
their descriptions, or the one-sentence failure), and the tools it always allows, with Revoke.

What a server wrote (its tools' names and descriptions, its failures) is shown by the window's rule
for untrusted text (app/visible_text.py): control, bidirectional and invisible characters appear as
escapes, and never as rich text."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtGui import Qt as GuiQt  # convertFromPlainText lives in QtGui
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.mcp.host import ToolInfo
from app.mcp.servers import ToolServer
from app.visible_text import in_window
from ui.theme import muted_color, show_sentence

RULE_ROLE = Qt.ItemDataRole.UserRole  # an always-allow rule's tool name as stored (the text shows it escaped)
NETWORK_NOTE = (
    "Cove cannot see what this server does on the network: the network indicator and "
    "offline mode cover Cove's own connections, not the programs it starts for you."
)


@dataclass(frozen=True)
class TestOutcome:
    """What the last Test of a server found: `tools`, or `failure` (one sentence), or neither while it runs."""

    identity: str  # the command line or URL it was run with
    tools: tuple[ToolInfo, ...] | None = None
    failure: str | None = None

    @property
    def running(self) -> bool:
        return self.tools is None and self.failure is None


class ServerView(QWidget):
    """Emits `revoke_requested(server name, tool)` for the selected always-allow rule."""

    revoke_requested = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._server: ToolServer | None = None
        self.title = QLabel(self)
        self.title.setAccessibleName("Tool server")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.runs_label = QLabel(self)
        self.identity = QLabel(self)
        self.identity.setAccessibleName("Exact command line or URL")
        self.identity.setWordWrap(True)
        self.identity.setTextFormat(Qt.TextFormat.PlainText)
        self.identity.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.identity.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.network_note = QLabel(NETWORK_NOTE, self)
        self.network_note.setAccessibleName("What Cove cannot see")
        self.network_note.setWordWrap(True)
        self.status = QLabel(self)
        self.status.setAccessibleName("Test result")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tools = QTreeWidget(self)
        self.tools.setAccessibleName("Tools")
        self.tools.setHeaderLabels(["Tool", "Description"])
        self.tools.setRootIsDecorated(False)
        self.tools.setWordWrap(True)
        self.tools.setUniformRowHeights(False)
        self.tools.header().setStretchLastSection(True)
        self.rules_label = QLabel(self)
        self.rules_label.setWordWrap(True)
        self.rules = QListWidget(self)
        self.rules.setAccessibleName("Always allowed tools")
        self.rules.setMaximumHeight(90)
        self.rules.currentItemChanged.connect(lambda *_: self._update_revoke())
        self.revoke_button = QPushButton("Revoke", self)
        self.revoke_button.setAccessibleName("Revoke always allow for the selected tool")
        self.revoke_button.setToolTip("Forget 'always allow' for this tool: its calls are asked again")
        self.revoke_button.clicked.connect(self._revoke)

        muted = self.network_note.palette()
        muted.setColor(self.network_note.foregroundRole(), muted_color(muted))
        self.network_note.setPalette(muted)
        self.runs_label.setPalette(muted)

        rules_row = QHBoxLayout()
        rules_row.addWidget(self.rules, 1)
        rules_row.addWidget(self.revoke_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.runs_label)
        layout.addWidget(self.identity)
        layout.addWidget(self.network_note)
        layout.addSpacing(6)
        layout.addWidget(self.status)
        layout.addWidget(self.tools, 100)
        layout.addWidget(self.rules_label)
        layout.addLayout(rules_row)
        layout.addStretch(1)  # keeps the lines together at the top while there is no tool list
        self.show_server(None, None, [])

    @property
    def server(self) -> ToolServer | None:
        return self._server

    def show_server(self, server: ToolServer | None, outcome: TestOutcome | None, always: list[str]) -> None:
        """Show `server` (None: nothing selected) with its last Test and its always-allow rules."""
        self._server = server
        for part in (self.runs_label, self.identity, self.network_note, self.tools, self.rules_label, self.rules, self.revoke_button):
            part.setVisible(server is not None)
        if server is None:
            self.title.setText("Select a tool server, or Add… one.")
            show_sentence(self.status, "", False, self)
            return
        self.title.setText(in_window(f"{server.name} ({'Streamable HTTP' if server.url else 'a program on this computer'})"))
        self.runs_label.setText("Cove connects to exactly:" if server.url else "Cove runs exactly this command line:")
        self.identity.setText(in_window(server.identity))
        self._show_outcome(server, outcome)
        self.rules.clear()
        for tool in always:
            rule = QListWidgetItem(in_window(tool))
            rule.setData(RULE_ROLE, tool)
            self.rules.addItem(rule)
        self.rules.setVisible(bool(always))
        self.revoke_button.setVisible(bool(always))
        self.rules_label.setText(
            "Always allowed (calls of these tools are not asked):"
            if always
            else "No tool is always allowed on this server: every call is asked first."
        )
        self._update_revoke()

    def tool_rows(self) -> list[tuple[str, str]]:
        """Each tool as the list shows it: (name, description)."""
        items = (self.tools.topLevelItem(i) for i in range(self.tools.topLevelItemCount()))
        return [(item.text(0), item.text(1)) for item in items if item is not None]

    def status_text(self) -> str:
        return self.status.text() if not self.status.isHidden() else ""

    def always_allowed(self) -> list[str]:
        return [self.rules.item(i).text() for i in range(self.rules.count())]

    def _show_outcome(self, server: ToolServer, outcome: TestOutcome | None) -> None:
        self.tools.clear()
        if outcome is not None and outcome.identity != server.identity:
            outcome = None  # tested under another definition
        if outcome is None:
            text, error = "Not tested in this run. Test starts the server, lists its tools, and stops it.", False
        elif outcome.running:
            text, error = ("Connecting…" if server.url else "Starting the server and asking for its tools…"), False
        elif outcome.failure is not None:
            text, error = in_window(outcome.failure), True
        else:
            tools = outcome.tools or ()
            count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''}"
            text = f"It offers {count} (it was stopped again after the Test)." if tools else "It offers no tools."
            error = False
            for tool in tools:
                description = in_window(tool.description.strip())
                item = QTreeWidgetItem([in_window(tool.name), description])
                item.setToolTip(1, GuiQt.convertFromPlainText(description) if description else "")
                self.tools.addTopLevelItem(item)
            self.tools.resizeColumnToContents(0)
        show_sentence(self.status, text, error, self)
        self.tools.setVisible(bool(self.tools.topLevelItemCount()))

    def _update_revoke(self) -> None:
        self.revoke_button.setEnabled(self.rules.currentItem() is not None)

    def _revoke(self) -> None:
        item = self.rules.currentItem()
        if self._server is not None and item is not None:
            self.revoke_requested.emit(self._server.name, item.data(RULE_ROLE))
