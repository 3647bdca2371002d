"""The Connections tab's "Pair with a Cove…" dialog: a name, the other Cove's https:// address and
the one-time code its Server panel (or `cove serve pair`) showed. Pair checks the fields and that
the name is free on the UI thread, runs the network step of app/remote/pairing.py (the
certificate checked against the code, then the code's secret redeemed for a key) on a thread of
its own, and saves the connection, its key and the pinned certificate back on the UI thread,
which owns the history's connection. A refusal is one sentence in the dialog; the fields stay."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QWidget

from app.errors import describe_error
from app.pairing.code import PairingCodeError, parse_code
from app.remote.connections import ConnectionProblem, Connections, check_name
from app.remote.pairing import Learned, PairingRefused, check_unused, exchange, https_url, save
from models.network import NetworkGate, NetworkRefused
from ui.background import BackgroundJob, run_in_background
from ui.theme import show_sentence

ABOUT = (
    "Pair with another Cove: on that machine, open Server, tick “Let my other machines connect”, turn the server on "
    "and press Pair a machine…; type here the address and the code it shows. Cove checks that machine's certificate "
    "against the code before it sends anything, and keeps that certificate and the key it gets."
)
ADDRESS_HINT = "https://desktop.local:8642"
REFUSALS = (PairingRefused, PairingCodeError, ConnectionProblem, NetworkRefused)


def pairing_sentence(exc: BaseException) -> str:
    """The sentence for what pairing raised: its own message for a refusal, else the error described."""
    text = str(exc) if isinstance(exc, REFUSALS) else describe_error(exc)
    text = text[:1].upper() + text[1:] if text else "Pairing did not happen."
    return text if text.endswith((".", "?", "!")) else text + "."


class PairWithCoveDialog(QDialog):
    """Emits `paired(Paired)` once the connection is saved, then closes."""

    paired = Signal(object)  # app.remote.pairing.Paired

    def __init__(self, connections: Connections, gate: NetworkGate, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.connections, self.gate = connections, gate
        self._job: BackgroundJob[Learned] | None = None
        self.setWindowTitle("Pair with a Cove")
        self.setAccessibleName("Pair with a Cove")
        self.setMinimumWidth(560)

        about = QLabel(ABOUT, self)
        about.setWordWrap(True)
        self.name_field = QLineEdit(self)
        self.name_field.setAccessibleName("Connection name")
        self.name_field.setPlaceholderText("desktop")
        self.name_field.setToolTip("What this machine calls the other one: in the model picker and in model names (MODEL@NAME)")
        self.address_field = QLineEdit(self)
        self.address_field.setAccessibleName("Address")
        self.address_field.setPlaceholderText(ADDRESS_HINT)
        self.code_field = QLineEdit(self)
        self.code_field.setAccessibleName("Pairing code")
        self.code_field.setPlaceholderText("XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX")
        self.code_field.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.result_label = QLabel(self)
        self.result_label.setAccessibleName("Pairing result")
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result_label.hide()

        self.buttons = QDialogButtonBox(self)
        self.pair_button = self.buttons.addButton("Pair", QDialogButtonBox.ButtonRole.AcceptRole)
        self.pair_button.setAccessibleName("Pair with the Cove")
        self.pair_button.setDefault(True)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.pair)
        self.buttons.rejected.connect(self.reject)

        form = QFormLayout(self)
        form.addRow(about)
        form.addRow("Name", self.name_field)
        form.addRow("Address", self.address_field)
        form.addRow("Code", self.code_field)
        form.addRow(self.result_label)
        form.addRow(self.buttons)
        for field in (self.name_field, self.address_field, self.code_field):
            field.textChanged.connect(lambda _text: self._update_buttons())
        self._update_buttons()

    # ---- commands ----------------------------------------------------------------------

    def fill(self, name: str, address: str, code: str) -> None:
        self.name_field.setText(name)
        self.address_field.setText(address)
        self.code_field.setText(code)

    def pair(self) -> None:
        """Check the fields here, then pair off the UI thread; the answer comes back here."""
        if self.pairing():
            return
        try:
            code = parse_code(self.code_field.text())
            name = check_name(self.name_field.text().strip())
            base_url = https_url(self.address_field.text().strip())
            check_unused(self.connections, name)  # before the code is spent
        except REFUSALS as exc:
            self.show_result(pairing_sentence(exc), error=True)
            return
        self.show_result(f"Checking the certificate at {self.address_field.text().strip()} against the code…", error=False, muted=True)
        gate = self.gate
        self._job = run_in_background(
            self,
            lambda: exchange(gate, base_url, code),  # the network only: no database on that thread
            on_done=lambda learned: self._save(name, learned),
            on_failed=self._refused,
            describe=pairing_sentence,
            name="cove-remote-pair",
        )
        self._update_buttons()

    def pairing(self) -> bool:
        """Whether a pairing is under way (its network step)."""
        return self._job is not None

    def show_result(self, text: str, *, error: bool, muted: bool = False) -> None:
        show_sentence(self.result_label, text, error, self, muted=muted)

    def result_text(self) -> str:
        return self.result_label.text() if not self.result_label.isHidden() else ""

    # ---- internals ---------------------------------------------------------------------

    def _save(self, name: str, learned: Learned) -> None:
        """The code was redeemed: keep the connection (even when the dialog was cancelled meanwhile:
        the other Cove made the key already, and the code is spent)."""
        self._job = None
        self._update_buttons()
        try:
            paired = save(self.connections, name, learned)
        except REFUSALS as exc:
            self.show_result(pairing_sentence(exc), error=True)
            return
        self.show_result("", error=False)
        self.accept()
        self.paired.emit(paired)

    def _refused(self, sentence: str) -> None:
        self._job = None
        self._update_buttons()
        self.show_result(sentence, error=True)

    def _update_buttons(self) -> None:
        filled = all(f.text().strip() for f in (self.name_field, self.address_field, self.code_field))
        self.pair_button.setEnabled(filled and self._job is None)
