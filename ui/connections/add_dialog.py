"""The Add connection dialog: a name, the server's URL, an optional key (a password field,
never shown back), an optional CA or certificate file for a self-signed https server, and
Test, which asks the server what it is (on a worker thread) and shows what it said or why
it could not be reached. Add hands the fields to the Connections tab, which stores them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from app.remote.connections import Connection, ConnectionProblem, check_ca_file, check_name, host_of, normalise_url
from app.remote.keys import InvalidKey, validate_key
from ui.connections.probe_worker import ProbeReply, ProbeWorker, probe_summary
from ui.theme import show_sentence

URL_HINT = "http://gpu-box.lan:8000/v1"
ABOUT = (
    "Any server that speaks the OpenAI API: llama.cpp's llama-server, vLLM, Ollama, LM Studio, "
    "llama-cpp-python or another Cove (cove serve). Cove adds /v1 when the address has no path."
)
TEST_NAME = "test"  # the name a draft is probed under while the name field is still empty


def draft_connection(name: str, url: str, ca_file: str | None) -> Connection:
    """The connection the fields describe, checked the way Connections.add checks it, for Test
    (nothing is stored). Raises ConnectionProblem."""
    base_url = normalise_url(url)
    ca = None
    if ca_file:
        if not base_url.startswith("https://"):
            raise ConnectionProblem("A certificate file is used only for an https:// address; the address is http://.")
        ca = check_ca_file(ca_file)
    return Connection(name=check_name(name.strip()) if name.strip() else TEST_NAME, base_url=base_url, ca_file=ca, host=host_of(base_url))


class AddConnectionDialog(QDialog):
    """Emits `add_requested(name, url, key, ca_file)` from Add; the tab answers with `refuse`
    (the sentence, the dialog stays open) or closes it. `tested` carries the last Test's reply."""

    add_requested = Signal(str, str, object, object)  # name, url, key or None, CA file or None
    tested = Signal(object)  # ProbeReply

    def __init__(self, worker: ProbeWorker, parent: QWidget | None = None, *, choose_file: Callable[[], str | None] | None = None) -> None:
        super().__init__(parent)
        self.worker = worker
        self._choose_file = choose_file or self._ask_file
        self._ticket: int | None = None
        self.last_test: ProbeReply | None = None
        self.setWindowTitle("Add a connection")
        self.setAccessibleName("Add a connection")
        self.setMinimumWidth(560)

        self.name_field = QLineEdit(self)
        self.name_field.setAccessibleName("Connection name")
        self.name_field.setPlaceholderText("gpu-box")
        self.name_field.setToolTip("How the connection is called in the model picker and in model names (MODEL@NAME)")
        self.url_field = QLineEdit(self)
        self.url_field.setAccessibleName("Server URL")
        self.url_field.setPlaceholderText(URL_HINT)
        self.key_field = QLineEdit(self)
        self.key_field.setAccessibleName("Key")
        self.key_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_field.setPlaceholderText("Only if the server asks for one")
        self.key_field.setToolTip("Kept in the system keyring and sent only to this server, never shown again")
        self.ca_field = QLineEdit(self)
        self.ca_field.setAccessibleName("Certificate file")
        self.ca_field.setPlaceholderText("None: the system's certificates")
        self.ca_field.setToolTip("A CA or certificate file (PEM) to trust for this https server, besides the system's")
        self.ca_button = QPushButton("Choose…", self)
        self.ca_button.setAccessibleName("Choose a certificate file")
        self.ca_button.clicked.connect(self._pick_file)
        ca_row = QHBoxLayout()
        ca_row.addWidget(self.ca_field, 1)
        ca_row.addWidget(self.ca_button)

        about = QLabel(ABOUT, self)
        about.setWordWrap(True)
        about.setAccessibleName("About connections")
        self.result_label = QLabel(self)
        self.result_label.setAccessibleName("Test result")
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result_label.hide()

        self.buttons = QDialogButtonBox(self)
        self.test_button = self.buttons.addButton("Test", QDialogButtonBox.ButtonRole.ActionRole)
        self.test_button.setAccessibleName("Test the connection")
        self.test_button.setToolTip("Ask the server what it is and which models it has; nothing is stored")
        self.add_button = self.buttons.addButton("Add", QDialogButtonBox.ButtonRole.AcceptRole)
        self.add_button.setAccessibleName("Add the connection")
        self.add_button.setDefault(True)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.test_button.clicked.connect(self.test)
        self.buttons.accepted.connect(self._add_clicked)
        self.buttons.rejected.connect(self.reject)

        form = QFormLayout(self)
        form.addRow(about)
        form.addRow("Name", self.name_field)
        form.addRow("URL", self.url_field)
        form.addRow("Key", self.key_field)
        form.addRow("Certificate", ca_row)
        form.addRow(self.result_label)
        form.addRow(self.buttons)
        worker.probed.connect(self._on_probed)
        self.url_field.textChanged.connect(self._update_buttons)
        self._update_buttons()

    # ---- commands ----------------------------------------------------------------------

    def fill(self, name: str, url: str, key: str | None = None, ca_file: str | None = None) -> None:
        self.name_field.setText(name)
        self.url_field.setText(url)
        self.key_field.setText(key or "")
        self.ca_field.setText(ca_file or "")

    def test(self) -> None:
        """Probe the server the fields describe, off the UI thread; the answer shows below."""
        try:
            draft = draft_connection(self.name_field.text(), self.url_field.text(), self._ca())
            key = self._key()
        except (ConnectionProblem, InvalidKey) as exc:
            self.show_result(str(exc), error=True)
            return
        self.show_result(f"Asking {draft.host}…", error=False, muted=True)
        self.test_button.setEnabled(False)
        self._ticket = self.worker.probe(draft, key, "test")

    def refuse(self, sentence: str) -> None:
        """The tab could not add the connection: say why and keep the dialog open."""
        self.show_result(sentence, error=True)

    def show_result(self, text: str, *, error: bool, muted: bool = False) -> None:
        show_sentence(self.result_label, text, error, self, muted=muted)

    def result_text(self) -> str:
        return self.result_label.text() if not self.result_label.isHidden() else ""

    def testing(self) -> bool:
        return self._ticket is not None

    # ---- internals ---------------------------------------------------------------------

    def _key(self) -> str | None:
        text = self.key_field.text()
        return validate_key(text) if text.strip() else None

    def _ca(self) -> str | None:
        return self.ca_field.text().strip() or None

    def _add_clicked(self) -> None:
        self.add_requested.emit(
            self.name_field.text().strip(), self.url_field.text().strip(), self.key_field.text().strip() or None, self._ca()
        )

    def _on_probed(self, reply: ProbeReply) -> None:
        if reply.ticket != self._ticket:
            return
        self._ticket = None
        self._update_buttons()
        self.last_test = reply
        if reply.info is not None:
            self.show_result(probe_summary(reply.connection.host, reply.info), error=False)
        else:
            self.show_result(reply.error, error=True)
        self.tested.emit(reply)

    def _update_buttons(self) -> None:
        has_url = bool(self.url_field.text().strip())
        self.test_button.setEnabled(has_url and self._ticket is None)
        self.add_button.setEnabled(has_url)

    def _pick_file(self) -> None:
        path = self._choose_file()
        if path:
            self.ca_field.setText(path)

    def _ask_file(self) -> str | None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Certificate file to trust", str(Path.home()), "Certificates (*.pem *.crt *.cer);;All files (*)"
        )
        return path or None
