"""The Server panel's "Pair a machine…": a new one-time pairing code for this machine's
certificate (app/serve/http/pairing_codes.py: 10 minutes, one use), shown large and selectable
with a Copy button, when it ends, and what to type on the other machine. The code is made on the
UI thread, in the window's own history connection; the certificate is the one the server serves
other machines with when it does, else the one it will serve them with (made now if need be)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import sqlite_utils
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontDatabase, QFontMetrics, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.serve.http.pairing_codes import VALID, PairingCodes, served_certificate
from app.serve.http.runner import ALL_ADDRESSES
from app.serve.http.serving import url_host
from app.serve.http.tls import TlsUnavailable, hosts_for_others
from ui.server.control import Server, sentence
from ui.theme import error_color, muted_color

ADDRESS_HINT = "https://THIS-MACHINE:{port}"  # when the certificate names no address another machine reaches
NOT_SERVING = (
    "The server is not letting other machines in yet: tick “Let my other machines connect (encrypted)” and turn the "
    "server on, then type the code there before it ends."
)


@dataclass(frozen=True)
class PairingOffer:
    """A code just made, and what the dialog says with it."""

    code: str  # nine groups of four characters
    ends: datetime
    urls: list[str]  # https://HOST:PORT, what the other machine types
    fingerprint: str  # this machine's certificate's SHA-256
    serving: bool  # the server lets other machines in now
    notices: tuple[str, ...] = ()  # the certificate was made or made again


def make_offer(db: sqlite_utils.Database, tls_dir: Path, server: Server | None, serving: bool, port: int) -> PairingOffer:
    """A new code for the certificate the server serves other machines with (`serving`), else for
    the one it would serve them with on `port`. TlsUnavailable (a sentence) when it cannot be had."""
    if serving and server is not None and server.certificate is not None and server.certificate_der is not None:
        cert, der, urls = server.certificate, server.certificate_der, server.others_urls()
    else:
        cert, der = served_certificate(tls_dir, ALL_ADDRESSES)
        urls = [f"https://{url_host(h)}:{port}" for h in hosts_for_others(cert)]
    code, ends = PairingCodes(db).make(der)
    return PairingOffer(str(code), ends, urls or [ADDRESS_HINT.format(port=port)], cert.fingerprint, serving, cert.notices)


class PairDialog(QDialog):
    """Shows one offer, or the sentence that says why there is none (`refusal`)."""

    def __init__(self, offer: PairingOffer | None, refusal: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.offer = offer
        self.setWindowTitle("Pair a machine")
        self.setAccessibleName("Pair a machine")
        self.setMinimumWidth(720)
        layout = QVBoxLayout(self)
        self.code_label = QLabel(self)
        self.code_label.setAccessibleName("Pairing code")
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setAccessibleName("Copy the pairing code")
        self.copy_button.clicked.connect(self.copy_code)
        self._copied = QTimer(self)  # "Copied" shows for a moment
        self._copied.setSingleShot(True)
        self._copied.setInterval(1500)
        self._copied.timeout.connect(lambda: self.copy_button.setText("Copy"))
        self.command = QLabel(self)
        self.command.setAccessibleName("What to type on the other machine")
        self.warning = QLabel(self)
        self.warning.setAccessibleName("Pairing notice")
        for label in (self.command, self.warning):
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning.setStyleSheet(f"color: {error_color(self.palette()).name()}")
        if offer is None:
            self.warning.setText(sentence(refusal))
            layout.addWidget(self.warning)
        else:
            self._show(offer, layout)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _show(self, offer: PairingOffer, layout: QVBoxLayout) -> None:
        minutes = int(VALID.total_seconds() // 60)
        intro = QLabel(f"A code for one machine: it works once, for {minutes} minutes (until {offer.ends.astimezone():%H:%M}).", self)
        intro.setWordWrap(True)
        self.code_label.setText(offer.code)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setPointSizeF(max(mono.pointSizeF(), self.font().pointSizeF()) * 1.6)
        mono.setBold(True)
        self.code_label.setFont(mono)
        self.code_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.addWidget(self.code_label, 1)
        row.addWidget(self.copy_button)
        self.code_label.setMinimumWidth(QFontMetrics(mono).horizontalAdvance(offer.code) + 8)
        address, others = offer.urls[0], offer.urls[1:]
        also = f" (or {', '.join(others)})" if others else ""
        terminal = QLabel("On the other machine, in a terminal (NAME is what that machine will call this one):", self)
        terminal.setWordWrap(True)
        self.command.setText(f"cove remote pair NAME {address} {offer.code}")
        self.command.setWordWrap(False)
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        window_way = QLabel(
            f"Or in Cove's window there: Models → Connections → Pair with a Cove…, with the address {address}{also} and this code.", self
        )
        window_way.setWordWrap(True)
        window_way.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        fingerprint = QLabel(f"This machine's certificate, SHA-256:\n{offer.fingerprint}", self)
        fingerprint.setAccessibleName("Certificate fingerprint")
        fingerprint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        fingerprint.setStyleSheet(f"color: {muted_color(self.palette()).name()}")
        layout.addWidget(intro)
        layout.addLayout(row)
        layout.addWidget(terminal)
        layout.addWidget(self.command)
        layout.addWidget(window_way)
        layout.addWidget(fingerprint)
        notes = [] if offer.serving else [NOT_SERVING]
        notes += [n for n in offer.notices if "new certificate" in n]  # a changed fingerprint matters to those paired before
        if notes:
            self.warning.setText(" ".join(notes))
            layout.addWidget(self.warning)

    def code_text(self) -> str:
        return self.code_label.text()

    def warning_text(self) -> str:
        return self.warning.text()

    def copy_code(self) -> None:
        if self.offer is not None:
            QGuiApplication.clipboard().setText(self.offer.code)
            self.copy_button.setText("Copied")
            self._copied.start()


def open_pair_dialog(
    db: sqlite_utils.Database,
    tls_dir: Path,
    server: Server | None,
    serving: bool,
    port: int,
    *,
    read_only: bool,
    notice: str | None,
    parent: QWidget,
) -> PairDialog:
    """Make a code (unless the history is read-only: `notice` says why) and show the dialog,
    window-modal. `serving`: the server lets other machines in now."""
    offer, refusal = None, ""
    if read_only:
        refusal = "The history is open read-only, so a pairing code cannot be kept." + (f" {sentence(notice)}" if notice else "")
    else:
        try:
            offer = make_offer(db, tls_dir, server, serving, port)
        except TlsUnavailable as exc:
            refusal = f"A pairing code needs this machine's certificate, which could not be made: {exc}."
    dialog = PairDialog(offer, refusal, parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
