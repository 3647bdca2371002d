"""The Server panel: the switch and port of the window's API server, its address with a Copy
button, whether the person's other machines may connect (others_section.py), who goes first
while the server is busy, the requests it is answering, the models it has loaded, the pool's
recent events, and the API keys. While it is visible and the server is on it reads the server's
snapshots every 250 ms; it never calls into the server from another thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QGuiApplication, QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.server.control import OFF, ON, STARTING, STOPPING, ServerControl
from ui.server.keys_section import KeysSection
from ui.server.others_section import OthersSection
from ui.server.switch import Switch
from ui.theme import error_color, muted_color

if TYPE_CHECKING:
    from app.serve.http.runner import LoadedEngine
    from app.serve.pool.live_request import LiveRequest

REFRESH_MS = 250
EVENTS_SHOWN = 40
COLUMNS = ("Client", "Model", "Endpoint", "Status", "Tokens")
STATE_TEXT = {OFF: "Off", STARTING: "Starting…", ON: "On: answering on this computer only", STOPPING: "Stopping…"}
ON_FOR_OTHERS = "On: answering this computer and your other machines (HTTPS, with a key)"
HINT = "OpenAI and Anthropic APIs: give a client this base URL (Anthropic clients: without /v1)."
FOR_OTHERS_HINT = " This machine's programs reach it there too, with a key, trusting its certificate."


def address_for(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def engine_line(engine: LoadedEngine) -> str:
    """One engine: its model, what it is doing, and how many of its slots answer requests."""
    if engine.loading:
        doing = "loading…"
    elif engine.answering:
        doing = f"answering {engine.answering} of {engine.slots} at once" if engine.slots > 1 else "answering"
    else:
        doing = "ready" if engine.slots == 1 else f"ready, {engine.slots} at once"
    return f"{engine.model} — {doing}"


class ServerPanel(QDialog):
    def __init__(
        self,
        control: ServerControl,
        keys: KeysSection,
        *,
        port: int,
        record: QWidget | None = None,
        priority: QWidget | None = None,
        others: OthersSection | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.control = control
        self.keys = keys
        self.others = others
        self.setWindowTitle("Server")
        self.setAccessibleName("Server")
        self.setObjectName("serverPanel")
        self._shown: tuple = ()  # what the lists show, to redraw only on change

        self.switch = Switch(self)
        self.switch.setAccessibleName("Server on")
        self.switch.setToolTip("Serve the installed models over the OpenAI API on 127.0.0.1")
        self.switch.clicked.connect(self._on_switch)
        self.state = QLabel(self)
        self.state.setAccessibleName("Server state")
        self.state.setWordWrap(True)
        self.port = QSpinBox(self)
        self.port.setRange(1, 65535)
        self.port.setValue(port)
        self.port.setAccessibleName("Port")
        self.port.valueChanged.connect(lambda _p: self._show_address())
        self.address = QLabel(self)
        self.address.setAccessibleName("Address")
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.address.font()
        font.setBold(True)
        self.address.setFont(font)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setAccessibleName("Copy the address")
        self.copy_button.clicked.connect(self.copy_address)
        self._copied = QTimer(self)  # "Copied" shows for a moment
        self._copied.setSingleShot(True)
        self._copied.setInterval(1500)
        self._copied.timeout.connect(lambda: self.copy_button.setText("Copy"))
        self.hint = hint = QLabel(self)
        hint.setWordWrap(True)
        hint.setStyleSheet(f"color: {muted_color(self.palette()).name()}")

        self.requests = QTableWidget(0, len(COLUMNS), self)
        self.requests.setAccessibleName("Requests in progress")
        self.requests.setHorizontalHeaderLabels(COLUMNS)
        self.requests.verticalHeader().hide()
        self.requests.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.requests.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.requests.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.no_requests = QLabel("No requests in progress.", self)
        self.engines = QListWidget(self)
        self.engines.setAccessibleName("Loaded models")
        self.engines.setMaximumHeight(90)
        self.no_engines = QLabel("No model loaded: the first request for a model loads it.", self)
        self.no_engines.setWordWrap(True)
        self.events = QPlainTextEdit(self)
        self.events.setAccessibleName("Server events")
        self.events.setReadOnly(True)
        self.events.setMaximumHeight(110)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)

        top = QHBoxLayout()
        top.addWidget(self.switch)
        top.addWidget(self.state, 1)
        top.addWidget(QLabel("Port", self))
        top.addWidget(self.port)
        address_row = QHBoxLayout()
        address_row.addWidget(self.address)
        address_row.addWidget(self.copy_button)
        address_row.addStretch(1)

        activity = QVBoxLayout()
        activity.addWidget(self._group("Requests", self.requests, self.no_requests), 1)
        activity.addWidget(self._group("Models", self.engines, self.no_engines))
        activity.addWidget(self._group("Events", self.events))
        columns = QHBoxLayout()
        columns.addLayout(activity, 3)
        side = QVBoxLayout()
        side.addWidget(keys, 1)
        if record is not None:  # the record's verification key (record_key_section.py)
            side.addWidget(record)
        columns.addLayout(side, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(address_row)
        layout.addWidget(hint)
        if others is not None:  # let my other machines connect; Pair a machine… (others_section.py)
            layout.addWidget(others)
        if priority is not None:  # the window's reply first, or all alike (priority_row.py)
            layout.addWidget(priority)
        layout.addLayout(columns, 1)
        self.resize(900, 600)

        control.state_changed.connect(self._on_state)
        self._on_state(control.state, control.why)

    def _group(self, title: str, *widgets: QWidget) -> QGroupBox:
        box = QGroupBox(title, self)
        col = QVBoxLayout(box)
        for widget in widgets:
            col.addWidget(widget)
        return box

    # ---- the switch --------------------------------------------------------------------

    def _on_switch(self, checked: bool) -> None:
        if checked:
            self.control.turn_on(self.port.value(), others=self.others is not None and self.others.wanted())
        else:
            self.control.turn_off()

    def _on_state(self, state: str, why: str) -> None:
        self.switch.setChecked(state in (ON, STARTING))
        self.switch.setEnabled(state in (ON, OFF))
        self.port.setEnabled(state == OFF)
        for_others = state == ON and self.control.others
        self.state.setText(why or (ON_FOR_OTHERS if for_others else STATE_TEXT[state]))
        self.hint.setText(HINT + (FOR_OTHERS_HINT if for_others else " Other machines cannot reach it."))
        self.state.setStyleSheet(f"color: {error_color(self.palette()).name()}" if why else "")
        self.copy_button.setEnabled(state == ON)
        self._show_address()
        if state == OFF:
            self._show_activity([], [])
        self.refresh()
        self._sync_timer()

    def _show_address(self) -> None:
        address = self.control.address or address_for(self.port.value())
        self.address.setText(address)
        color = "" if self.control.state == ON else f"color: {muted_color(self.palette()).name()}"
        self.address.setStyleSheet(color)

    def copy_address(self) -> None:
        address = self.control.address
        if address:
            QGuiApplication.clipboard().setText(address)
            self.copy_button.setText("Copied")
            self._copied.start()

    # ---- what the server is doing ------------------------------------------------------

    def refresh(self) -> None:
        """Read the server's snapshots (thread-safe copies) and show what changed."""
        self.control.check()
        server = self.control.server
        if server is None or self.control.state != ON:
            return
        self._show_activity(server.live(), server.loaded())
        events = server.events()[-EVENTS_SHOWN:]
        text = "\n".join(events)
        if text != self.events.toPlainText():
            self.events.setPlainText(text)
            self.events.verticalScrollBar().setValue(self.events.verticalScrollBar().maximum())

    def _show_activity(self, live: list[LiveRequest], loaded: list[LoadedEngine]) -> None:
        rows = tuple((r.client, r.model, r.endpoint, r.status, str(r.tokens)) for r in live)
        lines = tuple(engine_line(e) for e in loaded)
        if (rows, lines) == self._shown:
            return
        self._shown = (rows, lines)
        self.requests.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                if c == 4:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.requests.setItem(r, c, item)
        self.requests.setVisible(bool(rows))
        self.no_requests.setVisible(not rows)
        self.engines.clear()
        self.engines.addItems(list(lines))
        self.engines.setVisible(bool(lines))
        self.no_engines.setVisible(not lines)

    def request_rows(self) -> list[tuple[str, ...]]:
        """What the requests table shows, row by row."""
        return [tuple(self._cell_text(r, c) for c in range(len(COLUMNS))) for r in range(self.requests.rowCount())]

    def _cell_text(self, row: int, column: int) -> str:
        item = self.requests.item(row, column)
        return item.text() if item is not None else ""

    def engine_lines(self) -> list[str]:
        return [self.engines.item(r).text() for r in range(self.engines.count())]

    def _sync_timer(self) -> None:
        if self.isVisible() and self.control.state == ON:
            if not self.timer.isActive():
                self.timer.start()
        else:
            self.timer.stop()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.keys.refresh()  # `cove serve keys` may have changed them
        self.refresh()
        self._sync_timer()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 (Qt override)
        self.keys.forget_shown_key()  # a new key is shown once: not again when the panel reopens
        self.timer.stop()
        super().hideEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.timer.stop()
        super().closeEvent(event)
