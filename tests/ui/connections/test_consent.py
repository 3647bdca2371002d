"""The question before messages first go to a host outside the private network: it names the
host and the connection, says what leaves the machine, and only the Send button sends (Enter,
the default, does not)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.support.modal_answers import answer_next
from ui.connections.consent import TITLE, ask_consent, consent_question


def _answer(qtbot, press) -> list[QMessageBox]:
    """Answer the dialog ask_consent opens, once it is up: `press(box)` clicks or types."""
    return answer_next(press, QMessageBox)


def test_the_question_names_the_host_and_what_leaves(qtbot) -> None:
    text = consent_question("gpu-box", "gpu.example.org:8000")
    assert text.startswith("Your messages will be sent to gpu.example.org:8000.")
    assert "“gpu-box”" in text and "system prompt, your messages and the replies so far" in text
    assert "asks once" in text


def test_only_send_sends(qtbot) -> None:
    def click_send(box: QMessageBox) -> None:
        send = next(b for b in box.buttons() if b.text() == "Send to gpu.example.org:8000")
        assert box.defaultButton() is not send  # Enter out of habit sends nothing
        assert box.windowTitle() == TITLE and "gpu.example.org:8000" in box.text()
        send.click()

    seen = _answer(qtbot, click_send)
    assert ask_consent(None, "gpu-box", "gpu.example.org:8000") is True and len(seen) == 1

    seen = _answer(qtbot, lambda box: qtbot.keyClick(box, Qt.Key.Key_Return))
    assert ask_consent(None, "gpu-box", "gpu.example.org:8000") is False and len(seen) == 1

    seen = _answer(qtbot, lambda box: qtbot.keyClick(box, Qt.Key.Key_Escape))
    assert ask_consent(None, "gpu-box", "gpu.example.org:8000") is False and len(seen) == 1
