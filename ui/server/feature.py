"""What the main window needs for its Server switch: the on/off control, the compact entry
at the foot of the sidebar that says whether the server is on and opens the panel, and the
panel itself (built the first time it is opened), with its "other machines" row and the Pair
dialog (pair_dialog.py: the code is made here, on the window's own connection). While the server
is on it tells the window when a request was answered (its conversation is in the history now).
At quit it begins stopping the server."""

from __future__ import annotations

import sqlite_utils
from PySide6.QtCore import QObject, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QDialog, QToolButton, QWidget

from app.cli.serve_cmd import DEFAULT_PORT
from app.core import Core
from app.serve.http.keys import ApiKeys
from ui.server.control import OFF, ON, STARTING, ServerControl, ServerFactory
from ui.server.keys_section import KeysSection
from ui.server.others_section import OthersSection
from ui.server.priority_row import PriorityRow
from ui.server.record_key_section import RecordKeySection
from ui.server.server_panel import ServerPanel
from ui.theme import muted_color

ON_COLOR = QColor("#2da44e")
ANSWERED_CHECK_MS = 1000


def dot_icon(color: QColor, size: int = 10) -> QIcon:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(color)
    painter.drawEllipse(QPointF(size / 2, size / 2), size / 2 - 1, size / 2 - 1)
    painter.end()
    return QIcon(pixmap)


class ServerFeature(QObject):
    """`button` goes in the window; `open()` shows the panel; `shutdown()` on quit, then
    `wait_stopped(timeout)` once the window is gone. `conversations_changed` follows requests
    the server finished answering. `core`: where the panel's priority choice is kept and where the
    certificate a pairing code names lives (without it, neither shows)."""

    conversations_changed = Signal()

    def __init__(
        self, window: QWidget, db: sqlite_utils.Database, factory: ServerFactory, *, port: int | None = None, core: Core | None = None
    ) -> None:
        super().__init__(window)
        self._window, self._db, self._core = window, db, core
        self.port = DEFAULT_PORT if port is None else port
        self.control = ServerControl(factory, self)
        self.panel: ServerPanel | None = None
        self.button = QToolButton(window)
        self.button.setObjectName("serverButton")
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setAccessibleName("Server")
        self.button.setToolTip("The OpenAI- and Anthropic-compatible API server on this computer: on/off, address, requests, keys")
        self.button.clicked.connect(lambda: self.open())
        self._api_history: tuple | None = None  # (count, latest change) of API clients' conversations
        self._answered = QTimer(self)
        self._answered.setInterval(ANSWERED_CHECK_MS)
        self._answered.timeout.connect(self._check_answered)
        self.control.state_changed.connect(self._show_state)
        self._show_state(OFF, "")

    def open(self) -> ServerPanel:
        """Show the Server panel (built on first use)."""
        if self.panel is None:
            keys = KeysSection(ApiKeys(self._db))  # the window's own connection, on the UI thread
            record = RecordKeySection(self._db)
            priority = PriorityRow(self._core) if self._core is not None else None
            others = OthersSection(self.control, self.pair if self._core is not None else None)
            self.panel = ServerPanel(
                self.control, keys, port=self.port, record=record, priority=priority, others=others, parent=self._window
            )
        self.panel.show()
        self.panel.raise_()
        self.panel.activateWindow()
        return self.panel

    def pair(self) -> QDialog | None:
        """Show a new pairing code (Pair a machine…); None without the panel or the core."""
        from ui.server.pair_dialog import open_pair_dialog

        panel, core = self.panel, self._core
        if panel is None or panel.others is None or core is None:
            return None
        dialog = open_pair_dialog(
            self._db,
            core.paths.tls_dir,
            self.control.server,
            panel.others.serving(),
            panel.port.value(),
            read_only=core.read_only,
            notice=core.notice,
            parent=panel,
        )
        dialog.finished.connect(lambda _result: panel.keys.refresh())  # a machine that paired has a key now
        return dialog

    def shutdown(self) -> None:
        self._answered.stop()  # the window's connection closes after the window
        self.control.shutdown()
        if self.panel is not None:
            self.panel.close()

    def wait_stopped(self, timeout_s: float) -> bool:
        return self.control.wait_stopped(timeout_s)

    def _check_answered(self) -> None:
        """Did the server store a turn since the last check? (The window's own connection, which
        sees what the server's connection committed; a count over an index, cheap every second.)"""
        now = tuple(self._db.execute("SELECT count(*), max(updated_at) FROM conversations WHERE client IS NOT NULL").fetchone())
        if self._api_history is not None and now != self._api_history:
            self.conversations_changed.emit()
        self._api_history = now

    def _show_state(self, state: str, why: str) -> None:
        if state == ON:
            self._api_history = None
            self._check_answered()
            self._answered.start()
        elif self._answered.isActive():
            self._answered.stop()
            self._check_answered()  # what it answered last
        if state == ON:
            where = (self.control.address or "").removeprefix("https://").removeprefix("http://").removesuffix("/v1")
            text = f"Server on · {where}" + (" · other machines too" if self.control.others else "")
        elif state == OFF:
            text = "Server off" + (": could not start" if why else "")
        else:
            text = "Server starting…" if state == STARTING else "Server stopping…"
        self.button.setText(text)
        self.button.setIcon(dot_icon(ON_COLOR if state == ON else muted_color(self.button.palette())))
