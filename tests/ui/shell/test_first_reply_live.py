"""While the first reply of a new chat streams, the sidebar already lists the chat, and the
performance panel already shows the time to first token and the prompt's figures."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow


def _window(qtbot, core, engine) -> MainWindow:
    controller = ChatController(core, engine)
    window = MainWindow(controller, state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json")
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window


def _send(qtbot, window: MainWindow, text: str) -> None:
    window.composer.focus_input()
    box = window.composer.text_box
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)


def test_a_new_chat_is_listed_and_its_first_figures_shown_while_the_reply_streams(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "20")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")  # 20 s of reply: it streams throughout the test
    window = _window(qtbot, cove_core, fake_engine)
    assert window.sidebar.conversation_ids() == []
    with qtbot.waitSignal(window.controller.reply_text_received, timeout=15000):
        _send(qtbot, window, "hello sidebar")
    controller = window.controller
    assert controller.busy and controller.conversation_id is not None
    assert window.sidebar.conversation_ids() == [controller.conversation_id]
    qtbot.waitUntil(lambda: window.perf.label_text("ttft") != "–", timeout=5000)
    assert window.perf.label_text("ttft").endswith(" ms")
    assert " read at " in window.perf.label_text("prompt")  # the prompt's tokens and reading speed
    assert controller.busy  # all of it before the reply ended
    with qtbot.waitSignal(controller.reply_finished, timeout=15000):
        qtbot.keyClick(window, Qt.Key.Key_Escape)
