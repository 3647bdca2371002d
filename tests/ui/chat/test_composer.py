"""Composer: Enter sends, Shift+Enter breaks the line, Send turns into Stop, the context meter."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QWidget

from ui.chat.composer import Composer
from ui.theme import warning_color


@pytest.fixture
def composer(qtbot) -> Composer:
    widget = Composer()
    qtbot.addWidget(widget)
    widget.show()
    return widget


def shows_warning(composer: Composer) -> bool:
    """The meter's words are in the warning colour (amber), not the quiet placeholder grey."""
    color = composer.context_label.palette().color(QPalette.ColorRole.WindowText)
    return color == warning_color(composer.palette())


def test_enter_sends_the_text_and_does_not_clear_it(qtbot, composer: Composer) -> None:
    qtbot.keyClicks(composer.text_box, "hello there")
    with qtbot.waitSignal(composer.send_requested, timeout=1000) as blocker:
        qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert blocker.args == ["hello there"]
    assert composer.text() == "hello there"  # only the owner's clear() empties it
    composer.clear()
    assert composer.text() == ""


def test_keypad_enter_sends_too(qtbot, composer: Composer) -> None:
    composer.set_text("hi")
    with qtbot.waitSignal(composer.send_requested, timeout=1000):
        qtbot.keyClick(composer.text_box, Qt.Key.Key_Enter, Qt.KeyboardModifier.KeypadModifier)


def test_shift_enter_inserts_a_newline_and_does_not_send(qtbot, composer: Composer) -> None:
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    qtbot.keyClicks(composer.text_box, "line one")
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(composer.text_box, "line two")
    assert sent == []
    assert composer.text() == "line one\nline two"
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == ["line one\nline two"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n", " \t \n "])
def test_empty_or_whitespace_does_not_send(qtbot, composer: Composer, text: str) -> None:
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    composer.set_text(text)
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    qtbot.mouseClick(composer.send_button, Qt.MouseButton.LeftButton)
    assert sent == []


def test_send_button_sends(qtbot, composer: Composer) -> None:
    composer.set_text("via button")
    with qtbot.waitSignal(composer.send_requested, timeout=1000) as blocker:
        qtbot.mouseClick(composer.send_button, Qt.MouseButton.LeftButton)
    assert blocker.args == ["via button"]


def test_busy_turns_send_into_stop_and_esc_stops(qtbot, composer: Composer) -> None:
    sent: list[str] = []
    stops: list[bool] = []
    composer.send_requested.connect(sent.append)
    composer.stop_requested.connect(lambda: stops.append(True))
    composer.set_busy(True)
    assert composer.send_button.text() == "Stop"
    assert composer.send_button.accessibleName() == "Stop reply"

    composer.set_text("next question")
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)  # no sending while a reply streams
    assert sent == []
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Escape)
    assert stops == [True]
    qtbot.mouseClick(composer.send_button, Qt.MouseButton.LeftButton)
    assert stops == [True, True]

    composer.set_busy(False)
    assert composer.send_button.text() == "Send"
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Escape)  # Esc when idle does nothing
    assert stops == [True, True]
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == ["next question"]


def test_set_send_enabled_false_refuses_and_explains(qtbot, composer: Composer) -> None:
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    composer.set_send_enabled(False, "Load a model first")
    composer.set_text("hello")
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == []
    assert not composer.send_button.isEnabled()
    assert composer.send_button.toolTip() == "Load a model first"
    composer.set_busy(True)
    assert composer.send_button.isEnabled()  # Stop stays possible
    composer.set_busy(False)
    composer.set_send_enabled(True)
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == ["hello"]


def test_context_meter_text_and_warning(composer: Composer) -> None:
    composer.set_context(1234, 8192, approximate=True)
    assert composer.context_label.text() == "≈ 1,234 / 8,192 tokens"
    assert not shows_warning(composer)
    composer.set_context(8000, 8192, approximate=False)
    assert composer.context_label.text() == "8,000 / 8,192 tokens"
    assert shows_warning(composer)
    assert "98%" in composer.context_label.toolTip()
    composer.set_context(None, None, approximate=False)
    assert composer.context_label.text() == ""
    assert not shows_warning(composer)


def test_set_text_and_focus_input(qtbot, composer: Composer) -> None:
    composer.set_text("edit me")
    assert composer.text() == "edit me"
    assert composer.text_box.textCursor().position() == len("edit me")
    composer.focus_input()  # must not raise even if the window is not active


def test_input_grows_with_lines_up_to_a_limit(composer: Composer) -> None:
    start = composer.text_box.height()
    composer.set_text("\n".join(f"line {i}" for i in range(5)))
    grown = composer.text_box.height()
    composer.set_text("\n".join(f"line {i}" for i in range(50)))
    capped = composer.text_box.height()
    assert start < grown < capped
    composer.set_text("\n".join(f"line {i}" for i in range(80)))
    assert composer.text_box.height() == capped


def test_every_control_has_an_accessible_name(composer: Composer) -> None:
    controls = composer.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
    named = {composer.text_box, composer.send_button, composer.context_label, composer.attach_button, composer.attachment_strip}
    assert named < set(controls)  # and the meter's bar
    assert len(controls) == 6
    for widget in controls:
        assert widget.accessibleName()
