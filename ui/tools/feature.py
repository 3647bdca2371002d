"""What the main window needs for its tools: the entry at the foot of the sidebar that opens the
Tools page (in a window of its own, built the first time it is opened), the composer's Tools menu
(which servers are on for the open conversation), the question before each call (the approval
dialog, opened without a nested event loop), and the one MCP host the page's Tests and the
conversations' calls use (made on first use). At quit it stops any tool server still running."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDialog, QMenu, QMessageBox, QToolButton, QVBoxLayout, QWidget

from app.cli.tools_cmd import LOG_NAME
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.store import ToolServerStore
from app.turn.events import ToolCallEvent
from ui.tools.approval_dialog import ToolApprovalDialog
from ui.tools.chat_tools import ChatTools
from ui.tools.limits_row import ToolLimitsRow
from ui.tools.page import Confirm, ToolsPage

if TYPE_CHECKING:
    from app.core import Core
    from ui.chat.controller import ChatController

STOP_WAIT_S = 5.0  # at quit, for a Test's server to stop (the host's own waits are bounded too)
McpFactory = Callable[[], McpHost]


class ToolsPanel(QDialog):
    def __init__(self, page: ToolsPage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = page
        self.limits: ToolLimitsRow | None = None  # the call limits, under the page
        self.setWindowTitle("Tools")
        self.setAccessibleName("Tools")
        self.setObjectName("toolsPanel")
        self._layout = QVBoxLayout(self)
        self._layout.addWidget(page)
        self.resize(900, 600)

    def set_limits(self, row: ToolLimitsRow) -> None:
        """Put the call limits under the page."""
        self.limits = row
        self._layout.addWidget(row)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        self.page.refresh()
        self.page.refresh_models()


class ToolsFeature(QObject):
    """`button` goes in the window; `open()` shows the Tools page; `shutdown()` on quit."""

    def __init__(self, window: QWidget, core: Core, *, mcp_factory: McpFactory | None = None, confirm: Confirm | None = None) -> None:
        super().__init__(window)
        self._window, self._core = window, core
        self.mcp_factory = mcp_factory or self._default_host  # how the one McpHost is made (tests give their own)
        self._confirm = confirm
        self.mcp: McpHost | None = None
        self.panel: ToolsPanel | None = None
        self.button = QToolButton(window)
        self.button.setObjectName("toolsButton")
        self.button.setText("Tools")
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.button.setAccessibleName("Tools")
        self.button.setToolTip("Your tool servers (MCP): add, test, see their tools, revoke always-allow rules")
        self.button.clicked.connect(lambda: self.open())
        self.approval: ToolApprovalDialog | None = None  # the question up, if one is
        self.chat = ChatTools(ToolServerStore(core.db), core.network, self.host, confirm or self._ask)
        self._controller: ChatController | None = None
        # The composer's menu: which tool servers the open conversation may use.
        self.menu_button = QToolButton(window)
        self.menu_button.setObjectName("conversationToolsButton")
        self.menu_button.setText("Tools")
        self.menu_button.setAccessibleName("Tools for this conversation")
        self.menu_button.setToolTip("Which of your tool servers the model may use in this conversation (every call is asked first)")
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.menu_button)
        self.menu.aboutToShow.connect(self.fill_menu)
        self.menu_button.setMenu(self.menu)

    def attach(self, controller: ChatController) -> None:
        """Give the chat its tools: the loop for each turn, the questions, the menu's choices."""
        self._controller = controller
        controller.provide_tools(self.chat)  # each turn's loop, and the sentences its thread leaves (a server that did not start)
        controller.tool_asked.connect(self.ask)
        controller.reply_finished.connect(lambda _message: self.close_question())
        controller.tool_servers_changed.connect(self._show_count)

    def fill_menu(self) -> None:
        """The added servers, each a check box for the open conversation, then the Tools page."""
        self.menu.clear()
        controller = self._controller
        on = set(controller.tool_servers()) if controller is not None else set()
        servers = ToolServerStore(self._core.db).all()
        if not servers:
            empty = self.menu.addAction("No tool servers yet")
            empty.setEnabled(False)
        for server in servers:
            action = self.menu.addAction(server.name)
            action.setCheckable(True)
            action.setChecked(server.name in on)
            action.setToolTip(server.identity)
            action.toggled.connect(lambda checked, name=server.name: self.enable(name, checked))
        self.menu.addSeparator()
        self.menu.addAction("Tool servers…", lambda: self.open())

    def enable(self, name: str, on: bool) -> None:
        """Turn one server on or off for the open conversation."""
        controller = self._controller
        if controller is None:
            return
        names = [n for n in controller.tool_servers() if n != name] + ([name] if on else [])
        controller.set_tool_servers(names)

    def ask(self, event: ToolCallEvent) -> ToolApprovalDialog | None:
        """Show the question of a call (window-modal, returns at once); its answer goes to the turn."""
        if event.question is None or self._controller is None:
            return None
        self.close_question()
        dialog = ToolApprovalDialog(event.call_id, event.question, self._window)
        dialog.answered.connect(self._controller.answer_tool)
        dialog.finished.connect(dialog.deleteLater)
        self.approval = dialog
        dialog.open()
        return dialog

    def close_question(self) -> None:
        """The turn ended (a Stop) while its question was up: the dialog goes (its denial is ignored)."""
        dialog, self.approval = self.approval, None
        if dialog is not None and dialog.verdict is None:
            dialog.close()

    def _show_count(self, names: list[str]) -> None:
        self.menu_button.setText(f"Tools ({len(names)})" if names else "Tools")

    def open(self) -> ToolsPanel:
        """Show the Tools page (built on first use)."""
        if self.panel is None:
            core = self._core
            page = ToolsPage(ToolServerStore(core.db), core.network, self.host, installed=core.library.list, confirm=self._confirm)
            self.panel = ToolsPanel(page, self._window)
            self.panel.set_limits(ToolLimitsRow(core, self._apply_limits, self.panel))
        self.panel.show()
        self.panel.raise_()
        self.panel.activateWindow()
        return self.panel

    def shutdown(self) -> None:
        """Stop the tool servers a Test still runs, waiting at most STOP_WAIT_S."""
        self.close_question()
        if self.panel is not None:
            self.panel.close()
        mcp, self.mcp = self.mcp, None
        if mcp is not None:
            closing = threading.Thread(target=mcp.close, name="cove-mcp-close", daemon=True)
            closing.start()
            closing.join(STOP_WAIT_S)

    def _apply_limits(self, limits: ToolLimits) -> None:
        if self.mcp is not None:
            self.mcp.limits = limits  # read at each call and each server start

    def host(self) -> McpHost:
        """The one McpHost the Tools page's Tests and the conversations' calls use (`mcp`),
        made by `mcp_factory` on first use."""
        if self.mcp is None:
            self.mcp = self.mcp_factory()
        return self.mcp

    def _ask(self, title: str, question: str) -> bool:
        answer = QMessageBox.question(
            self._window, title, question, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No
        )
        return answer == QMessageBox.StandardButton.Yes

    def _default_host(self) -> McpHost:
        logs = self._core.paths.logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        return McpHost(logs / LOG_NAME, self._core.tool_limits())
