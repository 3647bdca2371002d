"""The Hub and storage settings: the Hugging Face token (saved through app.hub_token.TokenStore,
never shown back), offline mode, the folder downloads go to, and what Auto learned from the person
(ui/models_panel/auto_learned.py).

The token field is a password field that is always empty after saving: the stored token is
never read back into a widget. Where no secure keyring exists, the store keeps the token in
memory for this run and the notice saying so is shown here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.hub_token import TOKENS_PAGE, InvalidToken, TokenStore
from ui.models_panel.auto_learned import AutoLearnedBox

FORCED_OFFLINE = "COVE_OFFLINE is set"


def _wrapping_label(parent: QWidget, name: str) -> QLabel:
    label = QLabel(parent)
    label.setWordWrap(True)
    label.setAccessibleName(name)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class HubSettingsPage(QWidget):
    """Emits `offline_changed(bool)`, `models_dir_changed(str)` and `token_changed()`."""

    offline_changed = Signal(bool)
    models_dir_changed = Signal(str)
    token_changed = Signal()

    def __init__(self, core: Any, token_store: TokenStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self.tokens = token_store

        token_box = QGroupBox("Hugging Face token", self)
        self.token_status = _wrapping_label(token_box, "Token status")
        self.token_field = QLineEdit(token_box)
        self.token_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_field.setPlaceholderText("Paste a read token (hf_…) to save it")
        self.token_field.setAccessibleName("Hugging Face token")
        self.token_field.setToolTip("Needed only for gated models; kept in the system keyring, never shown again")
        self.token_field.returnPressed.connect(self._save_clicked)
        self.save_token_button = QPushButton("Save token", token_box)
        self.save_token_button.setAccessibleName("Save the token")
        self.save_token_button.clicked.connect(self._save_clicked)
        self.remove_token_button = QPushButton("Remove token", token_box)
        self.remove_token_button.setAccessibleName("Remove the saved token")
        self.remove_token_button.clicked.connect(self.remove_token)
        self.token_note = _wrapping_label(token_box, "Token notice")
        about = _wrapping_label(token_box, "About the token")
        about.setText(
            f"Gated models (Llama, Gemma and others) need one: create a read token at {TOKENS_PAGE}, "
            "accept the model's licence on its Hub page, and paste the token here. "
            "It is sent only to the Hub."
        )
        token_row = QHBoxLayout()
        token_row.addWidget(self.token_field, 1)
        token_row.addWidget(self.save_token_button)
        token_row.addWidget(self.remove_token_button)
        token_layout = QVBoxLayout(token_box)
        token_layout.addWidget(self.token_status)
        token_layout.addLayout(token_row)
        token_layout.addWidget(self.token_note)
        token_layout.addWidget(about)

        network_box = QGroupBox("Network", self)
        self.offline_box = QCheckBox("Offline: never connect to the Hub", network_box)
        self.offline_box.setAccessibleName("Offline mode")
        self.offline_box.setToolTip("Search, file listings, fit estimates and downloads are refused; chatting works as always")
        self.offline_box.toggled.connect(self.set_offline)
        self.offline_note = _wrapping_label(network_box, "Offline notice")
        network_layout = QVBoxLayout(network_box)
        network_layout.addWidget(self.offline_box)
        network_layout.addWidget(self.offline_note)

        folder_box = QGroupBox("Models folder", self)
        self.folder_field = QLineEdit(folder_box)
        self.folder_field.setReadOnly(True)
        self.folder_field.setAccessibleName("Models folder")
        self.choose_folder_button = QPushButton("Choose…", folder_box)
        self.choose_folder_button.setAccessibleName("Choose the models folder")
        self.choose_folder_button.clicked.connect(self._choose_folder)
        self.default_folder_button = QPushButton("Use default", folder_box)
        self.default_folder_button.setAccessibleName("Use the default models folder")
        self.default_folder_button.clicked.connect(lambda: self.set_models_dir(None))
        self.folder_note = _wrapping_label(folder_box, "Models folder notice")
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_field, 1)
        folder_row.addWidget(self.choose_folder_button)
        folder_row.addWidget(self.default_folder_button)
        folder_layout = QFormLayout(folder_box)
        folder_layout.addRow(folder_row)
        folder_layout.addRow(self.folder_note)

        self.auto_learned = AutoLearnedBox(core, self)

        layout = QVBoxLayout(self)
        layout.addWidget(token_box)
        layout.addWidget(network_box)
        layout.addWidget(folder_box)
        layout.addWidget(self.auto_learned)
        layout.addStretch(1)
        self.refresh()

    # ---- commands ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Show the stored state (token status, offline, folder, what Auto learned); never the token itself."""
        self._show_token_status()
        gate = self.core.network
        forced = gate.offline_reason == FORCED_OFFLINE
        self.offline_box.blockSignals(True)
        self.offline_box.setChecked(gate.offline)
        self.offline_box.blockSignals(False)
        self.offline_box.setEnabled(not forced)
        self.offline_note.setText(
            "COVE_OFFLINE is set in Cove's environment, so Cove stays offline until it is started without it." if forced else ""
        )
        self.offline_note.setVisible(forced)
        self._show_folder("")
        self.auto_learned.refresh()

    def save_token(self, text: str) -> str:
        """Save `text` as the token; returns (and shows) what happened, in one sentence."""
        self.token_field.clear()  # the field never keeps or shows a token
        try:
            result = self.tokens.save(text)
        except InvalidToken as exc:
            note = str(exc)
        else:
            note = result.notice or "Saved in the system keyring."
            self.token_changed.emit()
        self._show_token_status(note)
        return note

    def remove_token(self) -> None:
        self.token_field.clear()
        self.tokens.clear()
        self.token_changed.emit()
        self._show_token_status(self.tokens.last_notice or "The token was removed.")

    def set_offline(self, offline: bool) -> None:
        self.core.set_offline(offline)
        self.refresh()
        self.offline_changed.emit(self.core.network.offline)

    def set_models_dir(self, folder: str | Path | None) -> bool:
        """Use `folder` (None: the default) for new downloads; False, with a note, if it cannot be written."""
        if folder is not None:
            path = Path(folder).expanduser()
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self._show_folder(f"Cannot use {path}: {exc.strerror or exc}.")
                return False
            if not os.access(path, os.W_OK):
                self._show_folder(f"Cannot use {path}: Cove may not write there.")
                return False
            self.core.set_models_dir(path.resolve())
        else:
            self.core.set_models_dir(None)
        self._show_folder("New downloads go to this folder; models already installed stay where they are.")
        self.models_dir_changed.emit(str(self.core.models_dir))
        return True

    def token_note_text(self) -> str:
        return self.token_note.text() if not self.token_note.isHidden() else ""

    # ---- internals ---------------------------------------------------------------------

    def _save_clicked(self) -> None:
        text = self.token_field.text()
        self.save_token(text)

    def _show_token_status(self, note: str = "") -> None:
        status = self.tokens.status()
        if status.present and status.storage == "keyring":
            text = f"A token is saved in the system keyring ({status.backend})."
        elif status.present:
            text = "A token is kept in memory for this run only."
        else:
            text = "No token saved. Public models need none."
        self.token_status.setText(text)
        self.remove_token_button.setEnabled(status.present)
        shown = note or (status.notice or "")
        self.token_note.setText(shown)
        self.token_note.setVisible(bool(shown))

    def _show_folder(self, note: str) -> None:
        self.folder_field.setText(str(self.core.models_dir))
        self.folder_field.setToolTip(str(self.core.models_dir))
        self.default_folder_button.setEnabled(self.core.settings.models_dir is not None)
        self.folder_note.setText(note)
        self.folder_note.setVisible(bool(note))

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Models folder", str(self.core.models_dir))
        if folder:
            self.set_models_dir(folder)
