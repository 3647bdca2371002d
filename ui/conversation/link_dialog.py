"""The question before something opens outside Cove: a link from model output (the full address,
its host, and a note when it carries a query; which links may be offered is
ui/conversation/link_policy.py), or a source's file (ui/documents/sources.py). Open is never the
default button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

from ui.conversation.link_policy import host_of


def confirm_with_dialog(parent: QWidget, url: str) -> bool:
    """Ask before opening: the full address, its host, and a note when it carries a query."""
    details = [f"It goes to {host_of(url) or 'an unknown host'}."]
    if "?" in url or "#" in url:
        details.append("Everything after “?” or “#” is sent along; the model wrote this address.")
    return ask_before_opening(parent, "Open link?", f"Open this address in your web browser?\n\n{url}", " ".join(details))


def ask_before_opening(parent: QWidget, title: str, text: str, details: str) -> bool:
    """True when the person chose Open (Cancel is the default)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle(title)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    box.setInformativeText(details)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    open_button = box.addButton("Open", QMessageBox.ButtonRole.AcceptRole)
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cancel)
    box.exec()
    return box.clickedButton() is open_button
