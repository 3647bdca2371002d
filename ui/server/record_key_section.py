"""The record in the Server panel: whether it verifies (checked when the panel is first shown,
and by Check the record, on a thread of its own with a read-only connection, with this machine's
key; the verdict's last sentence says what that check can prove, and what only the verification
key kept elsewhere can), and Show the verification key…, which gives the key out once
(app/store/record_key.py), as text with a Copy button and as a QR code to photograph with another
device, then Cove forgets it. The key runs on the UI thread, on the window's own database
connection."""

from __future__ import annotations

import io
from pathlib import Path

import segno
import sqlite_utils
from PySide6.QtGui import QGuiApplication, QPixmap, QShowEvent
from PySide6.QtWidgets import QDialog, QGroupBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.store.database import open_reader
from app.store.record_key import ALREADY_GIVEN, give_out
from app.store.record_verdict import verdict_lines
from app.store.request_log import RequestLog
from app.store.seal_keys import SealKeyError
from ui.background import BackgroundJob, run_in_background

RECORD_NOTE = (
    "Every request and turn is an entry of the record, sealed with a key that evolves. This window checks "
    "it with this machine's key. Keep the verification key elsewhere (another device, a password manager, "
    "paper): only it proves the record against someone who can write this account's files, the key "
    "included (cove record verify --key FILE). If this machine's key is ever lost, Cove begins a new one "
    "and says so here: keep that one's verification key too."
)
SHOWN_ONCE = "Keep it elsewhere now (another device, a password manager, paper): Cove has forgotten it and will not show it again."


def qr_pixmap(text: str, scale: int = 4) -> QPixmap:
    """`text` as a QR code (segno: error correction M, a quiet zone of 4 modules)."""
    out = io.BytesIO()
    segno.make(text, error="m", micro=False).save(out, kind="png", scale=scale, border=4)
    pixmap = QPixmap()
    pixmap.loadFromData(out.getvalue(), "PNG")
    return pixmap


class KeyDialog(QDialog):
    """The verification key, shown this once: text, Copy, QR code."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("The record's verification key")
        self.setAccessibleName("Verification key")
        self.text = QPlainTextEdit(text, self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Verification key text")
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setAccessibleName("Copy the verification key")
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(text))
        self.qr = QLabel(self)
        self.qr.setAccessibleName("Verification key as a QR code")
        self.qr.setPixmap(qr_pixmap(text))
        once = QLabel(SHOWN_ONCE, self)
        once.setWordWrap(True)
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        row = QHBoxLayout()
        row.addWidget(self.text, 1)
        row.addWidget(self.qr)
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(once)
        layout.addLayout(buttons)


class RecordKeySection(QGroupBox):
    def __init__(self, db: sqlite_utils.Database, parent: QWidget | None = None) -> None:
        super().__init__("The record", parent)
        self.db = db
        self.setAccessibleName("The record")
        self.dialog: KeyDialog | None = None
        note = QLabel(RECORD_NOTE, self)
        note.setWordWrap(True)
        self.show_button = QPushButton("Show the verification key…", self)
        self.show_button.setAccessibleName("Show the verification key")
        self.show_button.clicked.connect(self.show_key)
        self.message = QLabel(self)
        self.message.setAccessibleName("Record key message")
        self.message.setWordWrap(True)
        self.verdict = QLabel(self)
        self.verdict.setAccessibleName("Whether the record verifies")
        self.verdict.setWordWrap(True)
        self.check_button = QPushButton("Check the record", self)
        self.check_button.setAccessibleName("Check the record")
        self.check_button.clicked.connect(self.check)
        self.intact: bool | None = None  # what the last check found; None before one ended
        self._checking: BackgroundJob[tuple[bool, list[str]]] | None = None
        layout = QVBoxLayout(self)
        layout.addWidget(note)
        layout.addWidget(self.verdict)
        layout.addWidget(self.check_button)
        layout.addWidget(self.show_button)
        layout.addWidget(self.message)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self.intact is None and self._checking is None:
            self.check()

    def check(self) -> None:
        """Verify the record off the UI thread (its own read-only connection) and show what it found."""
        path = next((row[2] for row in self.db.conn.execute("PRAGMA database_list") if row[1] == "main"), "")
        if not path:
            return
        self.check_button.setEnabled(False)
        self.verdict.setText("Checking the record…")

        def work() -> tuple[bool, list[str]]:
            reader = open_reader(Path(path))
            try:
                verdict = RequestLog(reader).verify()
            finally:
                reader.close()
            return verdict.intact, verdict_lines(verdict)

        self._checking = run_in_background(self, work, on_done=self._show_verdict, on_failed=self._check_failed, name="cove-record-check")

    def _show_verdict(self, found: tuple[bool, list[str]]) -> None:
        self.intact, lines = found
        self._checking = None
        self.check_button.setEnabled(True)
        self.verdict.setText(" ".join(lines) if self.intact else "⚠ " + " ".join(lines))
        self.verdict.setStyleSheet("" if self.intact else "color: #b00020; font-weight: bold;")

    def _check_failed(self, why: str) -> None:
        self._checking = None
        self.check_button.setEnabled(True)
        self.verdict.setText(f"The record could not be checked: {why}")

    def show_key(self) -> None:
        """Give the key out once, in a dialog; afterwards, say that it was."""
        shown: list[str] = []
        try:
            given = give_out(self.db, shown.append)
        except SealKeyError as exc:
            self.message.setText(f"The key could not be read: {exc}.")
            return
        if not given:
            self.message.setText(ALREADY_GIVEN[0].upper() + ALREADY_GIVEN[1:] + ".")
            return
        self.message.setText("")
        self.dialog = KeyDialog(shown[0], self)
        self.dialog.open()
