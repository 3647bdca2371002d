"""The Server panel's row for the person's other machines: "Let my other machines connect
(encrypted)" (off by default, not remembered; it takes effect when the server is turned on), the
https addresses they type and this machine's certificate fingerprint while the server lets them
in, and "Pair a machine…". It reads the server only on the UI thread, when the state changes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ui.server.control import OFF, ON, ServerControl
from ui.theme import muted_color

CHECK_TEXT = "Let my other machines connect (encrypted)"
CHECK_TIP = (
    "Listen on every address of this computer with HTTPS and this machine's own certificate, as "
    "`cove serve --host 0.0.0.0` does. Every request then needs an API key: pairing gives each machine its own."
)
WHEN_ON = (
    "When the server is on, other machines on your network reach it over HTTPS with a key of their own: "
    "pairing gives each machine one (Pair a machine…)."
)


class OthersSection(QWidget):
    """`wanted()`: whether the next start lets other machines in. `pair` (None: no button) opens
    the Pair dialog."""

    def __init__(self, control: ServerControl, pair: Callable[[], object] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.control = control
        self.check = QCheckBox(CHECK_TEXT, self)
        self.check.setAccessibleName("Let my other machines connect")
        self.check.setToolTip(CHECK_TIP)
        self.check.toggled.connect(lambda _on: self._show())
        self.pair_button = QPushButton("Pair a machine…", self)
        self.pair_button.setAccessibleName("Pair a machine")
        self.pair_button.setToolTip("A one-time code another Cove types to connect to this one: no key to copy")
        if pair is not None:
            self.pair_button.clicked.connect(lambda: pair())
        self.pair_button.setVisible(pair is not None)
        self.where = QLabel(self)
        self.where.setAccessibleName("Addresses for other machines")
        self.where.setWordWrap(True)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.check)
        row.addStretch(1)
        row.addWidget(self.pair_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.where)
        control.state_changed.connect(lambda _state, _why: self._show())
        self._show()

    def wanted(self) -> bool:
        return self.check.isChecked()

    def serving(self) -> bool:
        """Whether the server on now lets other machines in."""
        return self.control.state == ON and self.control.others and self.control.server is not None

    def where_text(self) -> str:
        return self.where.text() if not self.where.isHidden() else ""

    def _show(self) -> None:
        self.check.setEnabled(self.control.state == OFF)
        server = self.control.server
        if self.serving() and server is not None:
            urls = server.others_urls()
            cert = server.certificate
            lines = ["Your other machines type: " + (" or ".join(urls) if urls else "this machine's address, with https://")]
            if cert is not None:
                lines.append(f"This machine's certificate, SHA-256: {cert.fingerprint}")
                lines += [n for n in cert.notices if "new certificate" in n]  # machines paired before must pair again
            self.where.setText("\n".join(lines))
            self.where.setStyleSheet("")
        else:
            self.where.setText(WHEN_ON if self.check.isChecked() else "")
            self.where.setStyleSheet(f"color: {muted_color(self.palette()).name()}")
        self.where.setVisible(bool(self.where.text()))
