"""The question before a link from model output opens: the full address, its host, and a note
when it carries a query (the policy of which links may be offered is ui/conversation/link_policy.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

from ui.conversation.link_policy import host_of


def confirm_with_dialog(parent: QWidget, url: str) -> bool:
    """Ask before opening: the full address, its host, and a note when it carries a query."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Open link?")
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(f"Open this address in your web browser?\n\n{url}")
    details = [f"It goes to {host_of(url) or 'an unknown host'}."]
    if "?" in url or "#" in url:
        details.append("Everything after “?” or “#” is sent along; the model wrote this address.")
    box.setInformativeText(" ".join(details))
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    open_button = box.addButton("Open", QMessageBox.ButtonRole.AcceptRole)
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cancel)
    box.exec()
    return box.clickedButton() is open_button
