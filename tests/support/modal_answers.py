"""Answering the window's modal questions as a person does: a QMessageBox or a QInputDialog
runs its own event loop, so the answer is scheduled before the click that opens it; once the
dialog is up, `press(dialog)` clicks a button or types."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialog, QDialogButtonBox, QInputDialog, QLineEdit, QMessageBox

D = TypeVar("D", bound=QDialog)
POLL_MS = 20
GIVE_UP_MS = 15_000  # a question that never came stops being waited for (the test's own assertion says so)


def answer_next(press: Callable[[D], None], kind: type[D]) -> list[D]:
    """Call `press` on the next modal dialog of `kind` once it is up; the list gets that dialog."""
    seen: list[D] = []
    tries = [GIVE_UP_MS // POLL_MS]

    def find() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, kind):
            seen.append(box)
            press(box)
        elif tries[0] > 0:
            tries[0] -= 1
            QTimer.singleShot(POLL_MS, find)

    QTimer.singleShot(0, find)
    return seen


def answer_question(yes: bool) -> list[str]:
    """Click Yes or No in the next QMessageBox question; the list gets its text."""
    asked: list[str] = []

    def press(box: QMessageBox) -> None:
        asked.append(box.text())
        box.button(QMessageBox.StandardButton.Yes if yes else QMessageBox.StandardButton.No).click()

    answer_next(press, QMessageBox)
    return asked


def answer_text(qtbot, text: str | None) -> list[str]:
    """Type `text` in the next QInputDialog and press OK (None: press Cancel); the list gets its label."""
    asked: list[str] = []

    def press(box: QInputDialog) -> None:
        asked.append(box.labelText())
        buttons = box.findChild(QDialogButtonBox)
        if text is None:
            buttons.button(QDialogButtonBox.StandardButton.Cancel).click()
            return
        field = box.findChild(QLineEdit)
        field.clear()
        if text:
            qtbot.keyClicks(field, text)
        buttons.button(QDialogButtonBox.StandardButton.Ok).click()

    answer_next(press, QInputDialog)
    return asked
