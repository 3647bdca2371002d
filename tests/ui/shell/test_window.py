"""The main window, driven the way a person uses it (pytest-qt, offscreen): type and press
Enter, watch the reply stream in, stop it, search, delete, survive an engine crash; and one
turn through the real engine on the tiny generated model."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.engine.client import EngineClient
from tests.support.starter_stand_in import first_start_with_starter
from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow


def _window(qtbot, core, engine, **kwargs) -> MainWindow:
    controller = ChatController(core, engine)
    window = MainWindow(
        controller, state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json", **kwargs
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window


def _type_and_send(qtbot, window: MainWindow, text: str) -> None:
    window.activateWindow()
    window.composer.focus_input()  # Ctrl+L does the same
    box = window.composer.text_box  # the text box itself: offscreen, focus may sit in another window
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)


def test_type_enter_streams_a_reply_and_lists_the_conversation(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "300")
    window = _window(qtbot, cove_core, fake_engine)
    assert window.windowTitle().startswith("Cove")
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as done:
        _type_and_send(qtbot, window, "hello window")
    assert done.args[0].status == "complete"
    items = window.view.conversation_model().items()
    assert [i.role for i in items] == ["user", "assistant"]
    assert items[0].content == "hello window" and items[1].content == done.args[0].content
    assert window.composer.text() == ""  # cleared only after the message was saved
    assert window.windowTitle() == "Cove — hello window"
    assert window.sidebar.conversation_ids() == [window.controller.conversation_id]
    qtbot.waitUntil(lambda: window.perf.label_text("gen") != "–", timeout=3000)  # repaints are throttled


def test_escape_stops_a_streaming_reply(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "20")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")
    window = _window(qtbot, cove_core, fake_engine)
    with qtbot.waitSignal(window.controller.reply_text_received, timeout=15000):
        _type_and_send(qtbot, window, "go on and on")
    assert window.composer.is_busy()
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as done:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert done.args[0].status == "cancelled"
    assert not window.composer.is_busy()


def test_search_opens_the_conversation_at_the_message(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    window = _window(qtbot, cove_core, fake_engine)
    for text in ("alpha lighthouse", "beta harbour"):
        window.new_chat()
        with qtbot.waitSignal(window.controller.reply_finished, timeout=15000):
            _type_and_send(qtbot, window, text)
    lighthouse = cove_core.history.list_conversations()[-1]
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)  # Ctrl+K: search
    qtbot.keyClicks(QGuiApplication.focusObject(), "lighthouse")
    qtbot.waitUntil(window.sidebar.is_showing_results, timeout=5000)
    window.conversations.open_search_result(lighthouse.id, cove_core.history.messages(lighthouse.id)[0].id)
    assert window.controller.conversation_id == lighthouse.id
    assert window.view.conversation_model().items()[0].content == "alpha lighthouse"


def test_delete_is_confirmed_and_keeps_other_chats(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    answers: list[bool] = [False, True]
    window = _window(qtbot, cove_core, fake_engine, confirm_delete=lambda title: answers.pop(0))
    for text in ("keep me", "delete me"):
        window.new_chat()
        with qtbot.waitSignal(window.controller.reply_finished, timeout=15000):
            _type_and_send(qtbot, window, text)
    target = window.controller.conversation_id
    window.conversations.delete(target)  # refused
    assert len(cove_core.history.list_conversations()) == 2
    window.conversations.delete(target)  # confirmed
    titles = [c.title for c in cove_core.history.list_conversations()]
    assert titles == ["keep me"]
    assert window.view.conversation_model().items() == []


def test_engine_crash_marks_the_reply_and_the_window_stays_usable(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    window = _window(qtbot, cove_core, fake_engine)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as crashed:
        _type_and_send(qtbot, window, "#crash now")
    assert crashed.args[0].status == "error"
    assert window.notice.isVisible() and "stopped unexpectedly" in window.notice.text()
    assert window.view.conversation_model().items()[-1].status == "error"
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as again:
        _type_and_send(qtbot, window, "still there?")
    assert again.args[0].status == "complete"


def test_closing_mid_reply_keeps_it_and_restores_state_next_time(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "30")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")
    window = _window(qtbot, cove_core, fake_engine)
    window.resize(790, 560)  # within the offscreen screen (800x600)
    with qtbot.waitSignal(window.controller.reply_text_received, timeout=15000):
        _type_and_send(qtbot, window, "long story")
    message_id = window.controller.streaming_message_id
    conversation_id = window.controller.conversation_id
    window.close()
    saved = cove_core.history.get_message(message_id)
    assert saved.status == "interrupted" and saved.content.startswith("w0")
    # Next start: the same conversation, the same size.
    again = _window(qtbot, cove_core, EngineClient())
    assert again.controller.conversation_id == conversation_id
    assert (again.width(), again.height()) == (790, 560)
    again.close()


def test_real_engine_turn_on_the_tiny_model(qtbot, cove_core):
    from app.settings import SamplingParams

    cove_core.save_sampling_defaults(SamplingParams(max_tokens=16, seed=3))
    engine = EngineClient()
    window = _window(qtbot, cove_core, engine)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=120000) as done:
        _type_and_send(qtbot, window, "hello real engine")
    final = done.args[0]
    assert final.status in {"complete", "length"}, final.error
    assert 1 <= final.metrics["gen_tokens"] <= 16 and final.metrics["n_ctx"] > 0
    assert final.params["max_tokens"] == 16 and final.params["seed"] == 3
    assert final.model_name == "tiny-llama"
    assert window.view.conversation_model().items()[-1].content == final.content
    window.close()
    assert engine.host_pid is None


def test_first_start_prepares_the_starter_without_freezing_the_window(qtbot, tmp_path, tiny_gguf, monkeypatch):
    """No model yet: the starter is assembled on a worker thread while the window stays live,
    then registered and chosen."""
    from app.core import open_core
    from app.paths import resolve_paths

    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "fresh")}))
    release = first_start_with_starter(monkeypatch, tiny_gguf, wait_s=10)  # stands in for assembling 253 MB
    window = _window(qtbot, core, EngineClient())
    assert "Preparing the starter model" in window.notice.text()
    qtbot.wait(100)  # the event loop runs while the file is prepared
    with qtbot.waitSignal(window.controller.models_changed, timeout=10000):
        release.set()
    assert window.controller.model is not None and window.controller.model.source == "starter"
    assert not window.notice.isVisible()
    assert core.settings.last_model == window.controller.model.name
    window.close()
    core.close()


def test_a_first_run_opens_on_the_welcome_page_and_the_first_message_leaves_it(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "300")
    window = _window(qtbot, cove_core, fake_engine)
    page = window.welcome.page
    assert window.welcome.shown and page is not None
    assert str(cove_core.paths.database) in page.findChild(object, "privacyNote").text()
    qtbot.waitUntil(lambda: page.start_button.isEnabled(), timeout=5000)  # the tiny model is ready
    assert "tiny" in page.starter_status.text()
    assert window.composer.isVisible()  # no click needed: the first message can be typed at once
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000):
        _type_and_send(qtbot, window, "my first message")
    assert not window.welcome.shown and window.view.isVisible()


def test_a_returning_person_sees_their_last_chat_not_the_welcome(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "300")
    conversation = cove_core.history.create_conversation(title="earlier")
    cove_core.history.add_user_message(conversation.id, "from last week")
    window = _window(qtbot, cove_core, fake_engine)
    assert not window.welcome.shown
    assert window.view.conversation_model().items()[0].content == "from last week"


def test_the_welcome_import_button_opens_the_file_dialog_and_imports(qtbot, cove_core, fake_engine, tiny_gguf_with_template, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    asked: list[str] = []

    def fake_dialog(*args, **kwargs):
        asked.append(args[1])
        return [str(tiny_gguf_with_template)], "GGUF models (*.gguf)"

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(fake_dialog))
    window = _window(qtbot, cove_core, fake_engine)
    buttons = {b.accessibleName(): b for b in window.welcome.page.findChildren(type(window.welcome.page.start_button))}
    buttons["Import a GGUF file"].click()
    assert asked == ["Import a GGUF model"]
    qtbot.waitUntil(lambda: any(Path(m.path) == tiny_gguf_with_template for m in cove_core.library.list()), timeout=15000)
    window.models.panel.close()


def test_a_message_sent_from_the_welcome_page_shows_its_conversation(qtbot, tmp_path: Path, tiny_gguf, monkeypatch):
    # A home with a conversation (made by `cove chat` with a model since removed) and no model:
    # the welcome page shows; once the starter is ready, a message goes to the open conversation,
    # and the window shows it rather than keeping the welcome page over it.
    from app.core import open_core
    from app.paths import resolve_paths

    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    earlier = core.history.create_conversation(title="earlier")
    core.history.add_user_message(earlier.id, "from the command line")
    release = first_start_with_starter(monkeypatch, tiny_gguf, wait_s=10)
    window = _window(qtbot, core, EngineClient())
    assert window.welcome.shown
    with qtbot.waitSignal(window.controller.models_changed, timeout=10000):
        release.set()
    with qtbot.waitSignal(window.controller.reply_finished, timeout=120_000):
        _type_and_send(qtbot, window, "and now from the window")
    assert not window.welcome.shown and window.view.isVisible()
    assert "and now from the window" in [item.content for item in window.view.conversation_model().items()]
    window.close()
    core.close()


def test_a_person_who_chats_only_with_their_own_server_is_not_welcomed_again(qtbot, tmp_path: Path, tiny_gguf, monkeypatch):
    # No model on this computer, but a connection whose server lists one and a conversation:
    # not a first run, so the window opens on that conversation.
    from app.core import open_core
    from app.paths import resolve_paths
    from app.remote.probe import ServerInfo
    from tests.support.keyrings import InMemoryKeyring, use_keyring

    with use_keyring(InMemoryKeyring()):
        core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
        core.connections.add("box", "http://192.168.1.20:8080", key=None)
        core.connections.record_probe("box", ServerInfo("llama-server", None, [{"id": "big", "fingerprint": None}], True))
        earlier = core.history.create_conversation(title="earlier")
        core.history.add_user_message(earlier.id, "asked of the server")
        release = first_start_with_starter(monkeypatch, tiny_gguf, wait_s=10)  # the starter is still prepared
        window = _window(qtbot, core, EngineClient())
        assert not window.welcome.shown
        assert window.view.conversation_model().items()[0].content == "asked of the server"
        with qtbot.waitSignal(window.controller.models_changed, timeout=10000):
            release.set()
        window.close()
        core.close()
