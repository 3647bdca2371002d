"""The window's turn controller against the scripted fake engine host (real pipe protocol):
streaming, stop, regenerate and edit branches, a host crash, quitting mid-reply."""

from __future__ import annotations

import psutil
import pytest

from ui.chat.controller import ChatController


@pytest.fixture
def controller(qtbot, cove_core, fake_engine):
    c = ChatController(cove_core, fake_engine)
    c.start()
    yield c
    c.shutdown()


def _wait_finished(qtbot, controller, timeout=15000):
    with qtbot.waitSignal(controller.reply_finished, timeout=timeout) as blocker:
        pass
    return blocker.args[0]


def test_streaming_reply_is_coalesced_and_saved(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "2000")
    chunks: list[str] = []
    controller.reply_text_received.connect(lambda mid, text, n: chunks.append(text))
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as done:
        assert controller.send("hello #n")
    final = done.args[0]
    assert final.status == "complete"
    assert "".join(chunks) == final.content
    assert final.content.startswith("w0 w1 ")
    # 40 tokens at 2000/s arrive within a few frames: far fewer UI updates than tokens.
    assert 1 <= len(chunks) < 40
    saved = controller.core.history.messages(controller.conversation_id)
    assert [m.role for m in saved] == ["user", "assistant"]
    assert saved[1].content == final.content and saved[1].metrics["gen_tokens"] == 40
    assert not controller.busy


def test_stop_keeps_the_partial_reply_as_cancelled(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "30")
    monkeypatch.setenv("FAKE_HOST_WORDS", "500")
    with qtbot.waitSignal(controller.reply_text_received, timeout=15000):
        controller.send("a long one")
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as done:
        controller.stop()
    final = done.args[0]
    assert final.status == "cancelled"
    assert final.content.startswith("w0") and len(final.content.split()) < 500
    assert controller.core.history.get_message(final.id).content == final.content


def test_regenerate_and_edit_keep_every_version(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as first:
        controller.send("question one")
    reply1 = first.args[0]
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as second:
        controller.regenerate(reply1.id)
    reply2 = second.args[0]
    shown = controller.shown_messages()
    assert [s.message.id for s in shown][-1] == reply2.id
    assert (shown[-1].version_index, shown[-1].version_count) == (2, 2)
    controller.switch_version(reply2.id, -1)
    assert controller.shown_messages()[-1].message.id == reply1.id

    user1 = shown[0].message
    with qtbot.waitSignal(controller.reply_finished, timeout=15000):
        assert controller.edit_and_resend(user1.id, "question one, better")
    shown = controller.shown_messages()
    assert shown[0].message.content == "question one, better"
    assert (shown[0].version_index, shown[0].version_count) == (2, 2)
    controller.switch_version(shown[0].message.id, -1)
    assert controller.shown_messages()[0].message.content == "question one"
    # the question, 2 replies, the edited question and its reply
    assert controller.core.history.get_conversation(controller.conversation_id).message_count == 5


def test_engine_crash_marks_the_reply_and_the_next_turn_works(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    monkeypatch.setenv("FAKE_HOST_WORDS", "50")
    errors: list[str] = []
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as crashed:
        controller.send("please #crash")
    final = crashed.args[0]
    assert final.status == "error"
    assert "stopped unexpectedly" in final.error and final.content.startswith("w0 w1")
    controller.error_reported.connect(errors.append)
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as again:
        controller.send("are you back?")
    assert again.args[0].status == "complete"
    assert [m.status for m in controller.core.history.messages(controller.conversation_id)] == ["complete", "error", "complete", "complete"]


def test_shutdown_mid_reply_keeps_text_as_interrupted_and_stops_the_host(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "30")
    monkeypatch.setenv("FAKE_HOST_WORDS", "500")
    controller = ChatController(cove_core, fake_engine)
    controller.start()
    with qtbot.waitSignal(controller.reply_text_received, timeout=15000):
        controller.send("long")
    qtbot.wait(200)
    pid = fake_engine.host_pid
    message_id = controller.streaming_message_id
    controller.shutdown()
    saved = cove_core.history.get_message(message_id)
    assert saved.status == "interrupted" and saved.content.startswith("w0")
    assert pid is not None and not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_hung_engine_is_stopped_after_the_grace_period(qtbot, controller):
    with qtbot.waitSignal(controller.reply_started, timeout=5000):
        controller.send("#hang")
    qtbot.wait(300)
    with qtbot.waitSignal(controller.reply_finished, timeout=10000) as done:
        controller.stop()
    assert done.args[0].status == "cancelled"
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as again:
        controller.send("hello again")
    assert again.args[0].status == "complete"


def test_a_long_conversation_opens_on_its_newest_page_and_loads_earlier(qtbot, controller, monkeypatch):
    import ui.chat.controller as module

    monkeypatch.setattr(module, "PAGE", 4)
    history = controller.core.history
    c = history.create_conversation(title="long")
    ids = []
    for i in range(5):
        u = history.add_user_message(c.id, f"question {i}")
        a = history.start_assistant_message(c.id, parent_id=u.id, model_name="m", model_sha256=None, model_quant=None, params={})
        history.finish_assistant(a.id, f"answer {i}", status="complete", metrics={})
        ids += [u.id, a.id]
    controller.open_conversation(c.id)
    shown = [s.message.content for s in controller.shown_messages()]
    assert shown == ["question 3", "answer 3", "question 4", "answer 4"] and controller.has_earlier
    with qtbot.waitSignal(controller.messages_reloaded) as reloaded:
        controller.load_earlier()
    assert len(reloaded.args[0]) == 8 and controller.has_earlier
    controller.open_conversation(c.id, focus_message=ids[0])  # a search hit far back
    shown = controller.shown_messages()
    assert shown[0].message.id == ids[0] and not controller.has_earlier


def test_turns_the_model_no_longer_sees_are_marked(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "2")
    monkeypatch.setenv("FAKE_HOST_KEEP_TURNS", "2")
    for text in ("first", "second", "third"):
        with qtbot.waitSignal(controller.reply_finished, timeout=15000):
            controller.send(text)
    shown = controller.shown_messages()
    assert [s.message.content for s in shown if not s.seen_by_model] == ["first", "w0 w1 "]
    assert all(s.seen_by_model for s in shown[2:])


def test_no_thread_wakes_per_token_once_the_reply_streams(qtbot, controller, monkeypatch):
    # The UI thread takes tokens from the Generation itself; the turn's worker thread only
    # loads and starts the reply, then ends (a thread woken per token cost CPU the engine needs).
    import threading

    monkeypatch.setenv("FAKE_HOST_TPS", "40")
    monkeypatch.setenv("FAKE_HOST_WORDS", "60")
    with qtbot.waitSignal(controller.reply_text_received, timeout=15000):
        controller.send("stream slowly")
    qtbot.waitUntil(lambda: not any(t.name == "cove-turn" for t in threading.enumerate()), timeout=5000)
    assert controller.busy  # still streaming, with no turn thread left
    final = _wait_finished(qtbot, controller)
    assert final.status == "complete" and final.content.split() == [f"w{i}" for i in range(60)]


def test_quitting_mid_reply_keeps_the_text_without_a_turn_thread(qtbot, controller, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "30")
    monkeypatch.setenv("FAKE_HOST_WORDS", "500")
    with qtbot.waitSignal(controller.reply_text_received, timeout=15000):
        controller.send("a long one to quit during")
    qtbot.wait(200)
    reply_id = controller.streaming_message_id
    controller.shutdown()
    saved = controller.core.history.get_message(reply_id)
    assert saved.status == "interrupted"
    assert saved.content.startswith("w0 w1 ") and len(saved.content.split()) < 500
