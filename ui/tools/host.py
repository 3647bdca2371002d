"""What the main window needs for its Tools page: the entry at the foot of the sidebar that opens
it, the page in a window of its own (built the first time it is opened), and the MCP host its
Tests use (made on the first Test). At quit it stops any tool server still running."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDialog, QToolButton, QVBoxLayout, QWidget

from app.cli.tools_cmd import LOG_NAME
from app.mcp.host import McpHost
from app.mcp.store import ToolServerStore
from ui.tools.page import Confirm, ToolsPage

if TYPE_CHECKING:
    from app.core import Core

STOP_WAIT_S = 5.0  # at quit, for a Test's server to stop (the host's own waits are bounded too)
McpFactory = Callable[[], McpHost]


class ToolsPanel(QDialog):
    def __init__(self, page: ToolsPage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = page
        self.setWindowTitle("Tools")
        self.setAccessibleName("Tools")
        self.setObjectName("toolsPanel")
        layout = QVBoxLayout(self)
        layout.addWidget(page)
        self.resize(900, 600)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        self.page.refresh()
        self.page.refresh_models()


class ToolsHost(QObject):
    """`button` goes in the window; `open()` shows the Tools page; `shutdown()` on quit."""

    def __init__(self, window: QWidget, core: Core, *, mcp_factory: McpFactory | None = None,
                 confirm: Confirm | None = None) -> None:
        super().__init__(window)
        self._window, self._core = window, core
        self._factory = mcp_factory or self._default_host
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

    def open(self) -> ToolsPanel:
        """Show the Tools page (built on first use)."""
        if self.panel is None:
            core = self._core
            page = ToolsPage(ToolServerStore(core.db), core.network, self._host,
                             installed=core.library.list, confirm=self._confirm)
            self.panel = ToolsPanel(page, self._window)
        self.panel.show()
        self.panel.raise_()
        self.panel.activateWindow()
        return self.panel

    def shutdown(self) -> None:
        """Stop the tool servers a Test still runs, waiting at most STOP_WAIT_S."""
        if self.panel is not None:
            self.panel.close()
        mcp, self.mcp = self.mcp, None
        if mcp is not None:
            closing = threading.Thread(target=mcp.close, name="cove-mcp-close", daemon=True)
            closing.start()
            closing.join(STOP_WAIT_S)

    def _host(self) -> McpHost:
        if self.mcp is None:
            self.mcp = self._factory()
        return self.mcp

    def _default_host(self) -> McpHost:
        logs = self._core.paths.logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        return McpHost(logs / LOG_NAME)
