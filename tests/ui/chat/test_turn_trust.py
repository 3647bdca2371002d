"""The window's turn on the paths people hit after the first day: a restart on a home that
already has conversations (the model preloads), a disk that fills mid-reply (the turn is
released, the reply kept and saved once there is room), and a model file swapped under Cove
(the reply records the bytes that ran)."""

from __future__ import annotations

import shutil

from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow


def _window(qtbot, core, engine) -> MainWindow:
    controller = ChatController(core, engine)
    window = MainWindow(controller, state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json")
    qtbot.addWidget(window)
    return window


def test_a_restart_on_a_home_with_a_conversation_preloads_the_model_without_error(qtbot, cove_core, fake_engine):
    """The preload thread must not read the history through the UI thread's connection."""
    history = cove_core.history
    conversation = history.create_conversation(model="tiny-llama", params={"n_ctx": 512, "temperature": 0.2})
    user = history.add_user_message(conversation.id, "an earlier question")
    reply = history.start_assistant_message(
        conversation.id, parent_id=user.id, model_name="tiny-llama", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(reply.id, "an earlier answer", status="complete", metrics={})

    window = _window(qtbot, cove_core, fake_engine)
    failures: list[str] = []
    window.controller.model_load_failed.connect(failures.append)
    window.controller.error_reported.connect(failures.append)
    with qtbot.waitSignal(window.controller.model_loaded, timeout=15000) as loaded:
        window.show()
        window.start()
    assert window.controller.conversation_id == conversation.id
    assert loaded.args[0].n_ctx == 512  # the conversation's own context size was used
    assert failures == []
    window.controller.shutdown()


def _fill_the_disk(core) -> None:
    """SQLite's own limit on the file's pages: every write that needs a new page fails with
    SQLITE_FULL ('database or disk is full'), as on a full disk."""
    db = core.db.conn
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def _make_room(core) -> None:
    core.db.conn.execute("PRAGMA max_page_count = 1073741823")


def test_a_full_disk_at_the_end_of_a_reply_releases_the_turn_and_saves_it_once_there_is_room(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "400")
    monkeypatch.setenv("FAKE_HOST_WORDS", "500")  # a reply longer than a page: it needs new pages
    window = _window(qtbot, cove_core, fake_engine)
    window.show()
    window.start()
    c = window.controller
    c.unsaved.retry_ms = 100  # a retry within the wait below
    notices: list[str] = []
    c.error_reported.connect(notices.append)
    with qtbot.waitSignal(c.reply_text_received, timeout=15000):
        assert c.send("a long story please")
    _fill_the_disk(cove_core)
    with qtbot.waitSignal(c.reply_finished, timeout=15000) as done:
        pass
    shown = done.args[0]
    assert shown.status == "complete" and shown.content.startswith("w0 w1")
    assert not c.busy  # Stop, Esc and Send work again
    assert window.composer.send_button.text() == "Send"
    assert any("disk is full" in n and "saves it as soon as there is space" in n for n in notices), notices
    items = window.view.conversation_model().items()
    assert items[-1].content == shown.content  # the text stays on screen
    assert cove_core.history.get_message(shown.id).status == "streaming"  # not in the file yet

    # A new message while the disk is still full is refused with a sentence; nothing is lost.
    assert c.send("another long message " * 500) is False  # it needs new pages
    assert any("Your message could not be saved: the disk is full" in n for n in notices)

    with qtbot.waitSignal(c.unsaved.saved, timeout=5000):
        _make_room(cove_core)
    kept = cove_core.history.get_message(shown.id)
    assert (kept.status, kept.content) == ("complete", shown.content)
    assert kept.metrics.get("gen_tokens") == 500
    c.shutdown()


def test_a_model_file_replaced_under_cove_is_hashed_again_and_the_reply_records_the_new_bytes(
    qtbot, cove_core, fake_engine, tiny_gguf_with_template
):
    window = _window(qtbot, cove_core, fake_engine)
    window.show()
    window.start()
    c = window.controller
    model = c.model
    assert model is not None and model.name == "tiny-llama"
    with qtbot.waitSignal(c.reply_finished, timeout=15000) as first:
        c.send("before the swap")
    assert first.args[0].model_sha256 == model.sha256

    # Someone copies another valid GGUF over the imported file (the library's copy of it).
    swapped = cove_core.paths.data_dir / "swapped.gguf"
    shutil.copyfile(model.path, swapped)  # keep the session's tiny model intact for other tests
    cove_core.library.remove(model.name)
    model = cove_core.library.import_file(swapped)
    cove_core.remember_model(model)
    c.choose_model(model.name)
    old_sha = model.sha256
    shutil.copyfile(tiny_gguf_with_template, swapped)
    notices: list[str] = []
    c.error_reported.connect(notices.append)
    with qtbot.waitSignal(c.reply_finished, timeout=15000) as second:
        c.send("after the swap")
    reply = second.args[0]
    entry = cove_core.library.get(model.name)
    assert entry.sha256 != old_sha
    assert reply.model_sha256 == entry.sha256
    assert cove_core.history.get_message(reply.id).model_sha256 == entry.sha256
    assert any("changed since it was imported" in n and entry.sha256[:12] in n for n in notices), notices
    c.shutdown()
