"""The Connections tab of the Models panel: the person's own servers with their address, what
kind of server each is, how many models it listed and whether it has a key ("paired": a key and
the certificate pinned when it paired); each server's models under it. Add… (the dialog), Pair
with a Cove… (pair_dialog.py), Refresh models, Use for next turn and Remove… (asked first).

Runs on the UI thread with the window's Connections (the history's connection); probes go
to the ProbeWorker, which reads nothing but the frozen Connection and key it is handed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.remote.connections import Connection, ConnectionProblem, Connections
from app.remote.pairing import Paired
from app.remote.remote_model import remote_models
from models.network import NetworkGate
from ui.connections.add_dialog import AddConnectionDialog
from ui.connections.pair_dialog import PairWithCoveDialog
from ui.connections.probe_worker import ProbeReply, ProbeWorker, probe_summary, server_words
from ui.models_panel.list_tree import setup_list_tree, top_items
from ui.theme import format_int, show_sentence

COLUMNS = ("Name", "Address", "Server", "Models", "Key")
CONNECTION_ROLE = Qt.ItemDataRole.UserRole  # on a connection's row: its name
MODEL_ROLE = Qt.ItemDataRole.UserRole + 1  # on a model's row: MODEL_ID@CONNECTION
ABOUT = (
    "Your own servers: a bigger machine running llama-server, vLLM, Ollama, LM Studio or another Cove. "
    "Their models are in the model picker under the connection's name; what you send to one of them goes to "
    "that machine, and each reply is marked with where it ran."
)
Confirm = Callable[[str, str], bool]  # (title, question) -> yes?
AskKey = Callable[[str], str | None]  # (connection name) -> the new key ("" for none), None: cancelled


class ConnectionsPage(QWidget):
    """Emits `connections_changed()` (a connection or its models changed: the picker lists
    them again) and `model_chosen(name)` (Use for next turn)."""

    connections_changed = Signal()
    model_chosen = Signal(str)

    def __init__(
        self,
        connections: Connections,
        gate: NetworkGate,
        *,
        worker: ProbeWorker | None = None,
        confirm: Confirm | None = None,
        ask_key: AskKey | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.connections = connections
        self.gate = gate
        self.worker = worker or ProbeWorker(gate, self)
        self._confirm = confirm or self._ask
        self._ask_key = ask_key or self._ask_for_key
        self.dialog: AddConnectionDialog | None = None
        self.pair_dialog: PairWithCoveDialog | None = None
        self._current: str | None = None  # the model the next turn uses

        about = QLabel(ABOUT, self)
        about.setWordWrap(True)
        about.setAccessibleName("About connections")
        self.offline_note = QLabel(self)
        self.offline_note.setWordWrap(True)
        self.offline_note.setAccessibleName("Connections offline notice")
        self.tree = setup_list_tree(QTreeWidget(self), "Connections", COLUMNS, stretch=2)
        self.tree.setRootIsDecorated(True)
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.tree.itemActivated.connect(lambda *_: self._use())
        self.empty = QLabel("No connections yet. Add… one to chat with a model on a server of your own.", self)
        self.empty.setWordWrap(True)
        self.message = QLabel(self)
        self.message.setAccessibleName("Connections message")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()

        self.add_button = QPushButton("Add…", self)
        self.add_button.setAccessibleName("Add a connection")
        self.add_button.clicked.connect(lambda: self.open_add_dialog())
        self.pair_button = QPushButton("Pair with a Cove…", self)
        self.pair_button.setAccessibleName("Pair with another Cove")
        self.pair_button.setToolTip("Connect to another Cove with the one-time code its Server panel shows: no key to copy")
        self.pair_button.clicked.connect(lambda: self.open_pair_dialog())
        self.refresh_button = QPushButton("Refresh models", self)
        self.refresh_button.setAccessibleName("Refresh the selected connection's models")
        self.refresh_button.setToolTip("Ask the server again which models it has")
        self.refresh_button.clicked.connect(self.refresh_selected)
        self.use_button = QPushButton("Use for next turn", self)
        self.use_button.setAccessibleName("Use the selected model for the next turn")
        self.use_button.clicked.connect(self._use)
        self.key_button = QPushButton("Key…", self)
        self.key_button.setAccessibleName("Change the selected connection's key")
        self.key_button.setToolTip("Replace the key this connection sends (kept in the system keyring), or forget it")
        self.key_button.clicked.connect(self.change_key_selected)
        self.remove_button = QPushButton("Remove…", self)
        self.remove_button.setAccessibleName("Remove the selected connection")
        self.remove_button.clicked.connect(self.remove_selected)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.pair_button)
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.key_button)
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(about)
        layout.addWidget(self.offline_note)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.empty)
        layout.addWidget(self.message)
        layout.addLayout(buttons)
        self.worker.probed.connect(self._on_probed)
        self.worker.busy_changed.connect(lambda _name, _busy: self.refresh())
        self.refresh()

    # ---- commands ----------------------------------------------------------------------

    def refresh(self) -> None:
        """List the connections as stored (and the offline state)."""
        selected = self._selected()
        self.tree.blockSignals(True)
        self.tree.clear()
        listed = self.connections.list()
        for connection in listed:
            self.tree.addTopLevelItem(self._connection_item(connection))
        self.tree.expandAll()
        self.tree.blockSignals(False)
        for column in (0, 1, 3, 4):
            self.tree.resizeColumnToContents(column)
        self._reselect(selected)
        self.tree.setVisible(bool(listed))
        self.empty.setVisible(not listed)
        offline = self.gate.offline
        self.offline_note.setText(
            f"Cove is offline ({self.gate.offline_reason}): it does not connect to your servers until offline mode is off."
            if offline
            else ""
        )
        self.offline_note.setVisible(offline)
        self._update_buttons()

    def set_current_model(self, name: str | None) -> None:
        self._current = name
        self._update_buttons()

    def open_add_dialog(self) -> AddConnectionDialog:
        """Show the Add dialog (window-modal; Add stores the connection and lists its models)."""
        if self.dialog is None:
            self.dialog = AddConnectionDialog(self.worker, self)
            self.dialog.add_requested.connect(self.add)
        self.dialog.fill("", "")
        self.dialog.show_result("", error=False)
        self.dialog.open()
        return self.dialog

    def open_pair_dialog(self) -> PairWithCoveDialog:
        """Show the Pair dialog (window-modal); a pairing saved is listed and probed as an added connection."""
        if self.pair_dialog is None:
            self.pair_dialog = PairWithCoveDialog(self.connections, self.gate, self)
            self.pair_dialog.paired.connect(self._on_paired)
        if not self.pair_dialog.pairing():
            self.pair_dialog.fill("", "", "")
            self.pair_dialog.show_result("", error=False)
        self.pair_dialog.open()
        return self.pair_dialog

    def _on_paired(self, paired: Paired) -> None:
        connection = paired.connection
        notice = f" {paired.notice}" if paired.notice else ""
        self.show_message(
            f"Paired with {connection.host} as {connection.name} (its certificate, SHA-256 {paired.fingerprint}, is pinned); "
            f"asking it for its models…{notice}"
        )
        self.worker.probe(connection, self.connections.key(connection.name), "add")
        self.refresh()
        self._reselect(connection.name)
        self.connections_changed.emit()

    def add(self, name: str, url: str, key: str | None, ca_file: str | None) -> Connection | None:
        """Store a connection and ask its server for its models; a refusal stays in the dialog."""
        try:
            connection = self.connections.add(name, url, key, ca_file)
        except ConnectionProblem as exc:
            if self.dialog is not None and self.dialog.isVisible():
                self.dialog.refuse(str(exc))
            else:
                self.show_message(str(exc), error=True)
            return None
        if self.dialog is not None:
            self.dialog.accept()
        notice = f" {self.connections.last_notice}" if self.connections.last_notice else ""
        self.show_message(f"Added {connection.name}; asking {connection.host} for its models…{notice}")
        self.worker.probe(connection, key, "add")
        self.refresh()
        self._reselect(connection.name)
        self.connections_changed.emit()
        return connection

    def refresh_selected(self) -> None:
        name = self._selected_connection()
        if name is None:
            return
        try:
            connection = self.connections.get(name)
            key = self.connections.key(name)  # read here: the probe thread gets it, not the keyring
        except ConnectionProblem as exc:
            self.show_message(str(exc), error=True)
            return
        self.show_message(f"Asking {connection.host} for its models…")
        self.worker.probe(connection, key, "refresh")

    def change_key_selected(self) -> None:
        """Ask for the selected connection's new key (empty: none) and keep it in the keyring."""
        name = self._selected_connection()
        if name is None:
            return
        key = self._ask_key(name)
        if key is None:
            return
        try:
            self.connections.set_key(name, key.strip() or None)
        except ConnectionProblem as exc:
            self.show_message(str(exc), error=True)
            return
        notice = f" {self.connections.last_notice}" if self.connections.last_notice else ""
        self.show_message((f"Saved the new key for {name}." if key.strip() else f"{name} sends no key now.") + notice)
        self.refresh()
        self.connections_changed.emit()

    def remove_selected(self) -> None:
        name = self._selected_connection()
        if name is None:
            return
        question = f"Remove the connection {name} and its key? Its conversations stay in the history; its models leave the model picker."
        if not self._confirm("Remove connection", question):
            return
        try:
            self.connections.remove(name)
        except ConnectionProblem as exc:
            self.show_message(str(exc), error=True)
            return
        self.worker.forget(name)
        notice = f" {self.connections.last_notice}" if self.connections.last_notice else ""
        self.show_message(f"Removed {name}.{notice}")
        self.refresh()
        self.connections_changed.emit()

    def show_message(self, text: str, error: bool = False) -> None:
        show_sentence(self.message, text, error, self)

    def message_text(self) -> str:
        return self.message.text() if not self.message.isHidden() else ""

    def rows(self) -> list[tuple[str, ...]]:
        """Each connection's row as shown (name, address, server, models, key)."""
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in top_items(self.tree)]

    def model_names(self, connection: str) -> list[str]:
        """The names (MODEL_ID@CONNECTION) of the models listed under a connection's row."""
        for item in top_items(self.tree):
            if item.data(0, CONNECTION_ROLE) == connection:
                return [child.data(0, MODEL_ROLE) for child in _children(item)]
        return []

    def select(self, connection: str, model: str | None = None) -> None:
        self._reselect(f"{model}@{connection}" if model else connection)

    # ---- internals ---------------------------------------------------------------------

    def _connection_item(self, connection: Connection) -> QTreeWidgetItem:
        server = connection.server or {}
        models = remote_models(connection)
        if self.worker.busy(connection.name):
            kind, count = "asking…", "…"
        elif server.get("probed_at"):
            kind, count = server_words(server.get("kind"), server.get("version")), format_int(len(models))
        else:
            kind, count = "not reached yet", "–"
        has_key = self.connections.key(connection.name) is not None
        pinned = self.connections.is_pinned(connection)  # paired: it trusts the certificate pinned then, alone
        item = QTreeWidgetItem([connection.name, connection.host, kind, count, ("paired" if pinned else "yes") if has_key else "no"])
        item.setData(0, CONNECTION_ROLE, connection.name)
        if pinned:
            tip = f"{connection.base_url}\nPaired: trusts only the certificate pinned when it paired ({connection.ca_file})"
        else:
            tip = connection.base_url + (f"\nTrusts {connection.ca_file}" if connection.ca_file else "")
        item.setToolTip(0, tip)
        item.setToolTip(1, tip)
        item.setData(
            0,
            Qt.ItemDataRole.AccessibleTextRole,
            f"{connection.name}, {connection.host}, {kind}, {count} models, {'a key' if has_key else 'no key'}"
            + (", paired" if pinned else ""),
        )
        for model in models:
            context = f"{format_int(model.context_length)} tokens of context" if model.context_length else ""
            child = QTreeWidgetItem([model.model_id, "", context, "", ""])
            child.setData(0, MODEL_ROLE, model.name)
            child.setToolTip(0, model.name + (f"\nFingerprint: {model.fingerprint}" if model.fingerprint else ""))
            item.addChild(child)
        return item

    def _on_probed(self, reply: ProbeReply) -> None:
        if reply.purpose == "test":
            return  # the Add dialog shows it
        name = reply.connection.name
        if reply.info is None:
            lead = f"{name} was added, but" if reply.purpose == "add" else f"{name}:"
            self.show_message(f"{lead} {reply.error[:1].lower()}{reply.error[1:]} Refresh models tries again.", error=True)
            return
        try:
            connection = self.connections.record_probe(name, reply.info)
        except ConnectionProblem:
            return  # removed meanwhile
        self.show_message(
            probe_summary(connection.host, reply.info) + (" Its models are in the model picker." if reply.info.models else "")
        )
        self.refresh()
        self.connections_changed.emit()

    def _selected(self) -> str | None:
        item = self.tree.currentItem()
        if item is None:
            return None
        value = item.data(0, MODEL_ROLE) or item.data(0, CONNECTION_ROLE)
        return value if isinstance(value, str) else None

    def _selected_connection(self) -> str | None:
        item = self.tree.currentItem()
        if item is None:
            return None
        parent = item.parent()  # on a model's row: the connection above it
        value = (parent if parent is not None else item).data(0, CONNECTION_ROLE)
        return value if isinstance(value, str) else None

    def _selected_model(self) -> str | None:
        item = self.tree.currentItem()
        value = item.data(0, MODEL_ROLE) if item is not None else None
        return value if isinstance(value, str) else None

    def _reselect(self, value: str | None) -> None:
        if value is None:
            return
        for top in top_items(self.tree):
            if top.data(0, CONNECTION_ROLE) == value:
                self.tree.setCurrentItem(top)
                return
            for child in _children(top):
                if child.data(0, MODEL_ROLE) == value:
                    self.tree.setCurrentItem(child)
                    return

    def _update_buttons(self) -> None:
        connection = self._selected_connection()
        model = self._selected_model()
        self.refresh_button.setEnabled(connection is not None and not self.worker.busy(connection))
        self.remove_button.setEnabled(connection is not None)
        self.key_button.setEnabled(connection is not None)
        self.use_button.setEnabled(model is not None and model != self._current)

    def _use(self) -> None:
        model = self._selected_model()
        if model is not None and model != self._current:
            self.model_chosen.emit(model)
            self.set_current_model(model)

    def _ask(self, title: str, question: str) -> bool:
        return QMessageBox.question(self, title, question) == QMessageBox.StandardButton.Yes

    def _ask_for_key(self, name: str) -> str | None:
        key, accepted = QInputDialog.getText(
            self, "Connection key", f"The key {name} sends (leave it empty for none):", QLineEdit.EchoMode.Password
        )
        return key if accepted else None


def _children(item: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    """A connection row's model rows, in the order shown."""
    children = (item.child(j) for j in range(item.childCount()))
    return [child for child in children if child is not None]
