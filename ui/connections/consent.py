"""The question asked once per connection before Cove first sends a conversation to a host
that is not this computer or the person's private network. The answer is kept with
Connections.confirm_public by whoever asks (ui/chat/remote_models.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

AskConsent = Callable[[str, str], bool]  # (connection name, host) -> send?
TITLE = "Send your messages to another machine?"


def consent_question(connection: str, host: str) -> str:
    return (
        f"Your messages will be sent to {host}. It is not this computer or a private network address, so "
        f"each time you send, this conversation (its system prompt, your messages and the replies so far) "
        f"leaves this machine and goes to {host}, the server of the connection “{connection}”.\n\n"
        "Send only if that server is yours, or one you trust with what you write. Cove asks once for this connection; "
        "the history and the record stay on this computer."
    )


def ask_consent(parent: QWidget | None, connection: str, host: str) -> bool:
    """Ask, modal; True when the person chose to send."""
    box = QMessageBox(QMessageBox.Icon.Question, TITLE, consent_question(connection, host), parent=parent)
    send = box.addButton(f"Send to {host}", QMessageBox.ButtonRole.AcceptRole)
    refuse = box.addButton("Don't send", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(refuse)  # Enter pressed out of habit sends nothing
    box.setAccessibleName("Send messages to another machine")
    box.exec()
    return box.clickedButton() is send
