"""Turns with a model on the person's own server, in the real window (pytest-qt, offscreen),
against llama-cpp-python's own server on the tiny model (and the fault proxy in front of it):
the reply streams in, is marked "on HOST", and no local model is loaded; Stop ends a stalled
stream and keeps the text as cancelled; regenerate and edit make versions; a stream cut
mid-reply is kept as interrupted with the reason; the window restarted on the same home
reopens the conversation with the remote model chosen; an unreachable server, offline mode
and a refused consent are sentences on the reply, the person's message kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import Qt

from app.core import open_core
from app.engine.client import EngineClient
from app.paths import resolve_paths
from app.remote import engine as remote_engine
from app.settings import SamplingParams
from app.store.request_log import RequestLog
from tests.support.fault_proxy import FaultProxy
from tests.support.remote_window import KEY, WAIT_MS, add_connection, choose, make_window, remember, send
from tests.support.serve_fixture import free_port
from ui.conversation.row_layout import metrics_line, status_notice

FAKE_HOST = Path(__file__).resolve().parents[2] / "support" / "fake_host.py"


def _short_replies(core, max_tokens: int = 16) -> None:
    core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=max_tokens, seed=1))


def _finished(qtbot, window, act):
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        act()
    return done.args[0]


def test_a_remote_reply_streams_is_marked_on_its_host_and_loads_nothing(qtbot, cove_core, fake_engine, server, keyring_backend):
    _short_replies(cove_core)
    connection = add_connection(cove_core, "box", server.url)
    window = make_window(qtbot, cove_core, fake_engine)
    qtbot.waitUntil(lambda: window.controller.loaded is not None, timeout=WAIT_MS)  # the local model, preloaded
    assert window.picker.loaded() != "tiny@box"
    loads: list[str] = []
    window.controller.model_load_started.connect(loads.append)
    generated: list[object] = []
    real_generate = fake_engine.generate
    fake_engine.generate = lambda *a, **k: generated.append(a) or real_generate(*a, **k)
    choose(window, "tiny@box")
    assert window.controller.model.name == "tiny@box"
    assert window.picker.loaded() == "tiny@box"  # nothing to load: in use at once
    assert window.picker.combo.currentText() == f"tiny · {connection.host}"
    activity: list[str] = []
    cove_core.network.add_listener(lambda a, started: activity.append(a.label) if started else None)
    chunks: list[str] = []
    window.controller.reply_text_received.connect(lambda _mid, text, _n: chunks.append(text))

    final = _finished(qtbot, window, lambda: send(qtbot, window, "hello, box"))
    assert final.status == "length" and final.content and "".join(chunks) == final.content
    assert final.model_name == "tiny@box"
    assert final.metrics["remote"]["host"] == connection.host and final.metrics["remote"]["kind"] == "llama-cpp-python"
    assert final.metrics["gen_tokens"] == 16 and final.metrics["ttft_ms"] > 0
    items = window.view.conversation_model().items()
    assert [i.role for i in items] == ["user", "assistant"] and items[1].content == final.content
    assert metrics_line(items[1].metrics).startswith(f"on {connection.host} · TTFT ")
    assert f"chatting on your server ({connection.host})" in activity  # the indicator named the host
    assert loads == [] and generated == []  # no load, nothing asked of this machine's engine
    # The performance panel says where it ran; the context meter counts what the server reported.
    qtbot.waitUntil(lambda: window.perf.label_text("backend") == f"your server {connection.host} (llama-cpp-python)", timeout=WAIT_MS)
    assert window.perf.label_text("layers") == "on the server"
    # This machine's engine memory, model file and VRAM had no part in the reply.
    assert [window.perf.label_text(f) for f in ("engine_mem", "model_file", "vram")] == ["on the server"] * 3
    assert "prompt_tokens" not in final.metrics  # llama-cpp-python's stream sends no usage
    model = window.controller.model
    # Not this machine's context: the server's own figure for the model, when it gave one.
    expected = f"≈ ? / {model.context_length:,} tokens" if model.context_length else ""
    assert window.composer.context_label.text() == expected
    entry = RequestLog(cove_core.db).entries()[-1]
    assert json.loads(entry["ran_on"])["host"] == connection.host and entry["model_name"] == "tiny@box"


def test_stop_ends_a_stalled_stream_and_keeps_the_text(qtbot, cove_core, fake_engine, server, keyring_backend):
    _short_replies(cove_core, max_tokens=200)
    with FaultProxy(server.url, mode="stall", after_events=4) as proxy:
        add_connection(cove_core, "box", proxy.url)
        remember(cove_core, "tiny@box")
        window = make_window(qtbot, cove_core, fake_engine)
        with qtbot.waitSignal(window.controller.reply_text_received, timeout=WAIT_MS):
            send(qtbot, window, "go on")
        qtbot.wait(300)  # the server has gone quiet; the window has not
        assert window.controller.busy and window.composer.is_busy()
        host = proxy.url.removeprefix("http://")
        assert window.network_indicator.text_shown() == f"● chatting on your server ({host})"
        final = _finished(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key.Key_Escape))
        qtbot.waitUntil(lambda: window.network_indicator.text_shown() == "", timeout=WAIT_MS)  # the stream is closed
    assert final.status == "cancelled" and final.content
    saved = cove_core.history.get_message(final.id)
    assert saved.content == final.content and saved.status == "cancelled"
    row = window.view.conversation_model().items()[-1]
    assert status_notice(row) == ("Stopped before the end.", "warn")
    assert not window.controller.busy


def test_a_stream_cut_mid_reply_is_kept_as_interrupted_with_the_reason(qtbot, cove_core, fake_engine, server, keyring_backend):
    _short_replies(cove_core, max_tokens=60)
    with FaultProxy(server.url, mode="drop", after_events=5) as proxy:
        add_connection(cove_core, "box", proxy.url)
        remember(cove_core, "tiny@box")
        window = make_window(qtbot, cove_core, fake_engine)
        final = _finished(qtbot, window, lambda: send(qtbot, window, "tell me"))
    assert final.status == "interrupted" and final.content and final.error
    notice = status_notice(window.view.conversation_model().items()[-1])
    assert notice is not None and notice[0].startswith("Interrupted: ") and notice[1] == "warn"


def test_regenerate_and_edit_make_versions_on_the_server(qtbot, cove_core, fake_engine, server, keyring_backend):
    cove_core.save_sampling_defaults(SamplingParams(temperature=1.0, max_tokens=8))
    add_connection(cove_core, "box", server.url)
    remember(cove_core, "tiny@box")
    window = make_window(qtbot, cove_core, fake_engine)
    assert window.picker.loaded() == "tiny@box"
    c = window.controller
    first = _finished(qtbot, window, lambda: send(qtbot, window, "question one"))
    second = _finished(qtbot, window, lambda: c.regenerate(first.id))
    shown = c.shown_messages()
    assert shown[-1].message.id == second.id and (shown[-1].version_index, shown[-1].version_count) == (2, 2)
    assert second.model_name == "tiny@box" and second.metrics["remote"]["connection"] == "box"
    _finished(qtbot, window, lambda: c.edit_and_resend(shown[0].message.id, "question one, better"))
    shown = c.shown_messages()
    assert shown[0].message.content == "question one, better" and (shown[0].version_index, shown[0].version_count) == (2, 2)
    assert fake_engine.host_pid is None


def test_the_window_restarted_reopens_the_conversation_with_the_remote_model(qtbot, tmp_path: Path, tiny_gguf, server, keyring_backend):
    home = {"COVE_HOME": str(tmp_path / "home")}
    core = open_core(resolve_paths(home))
    core.remember_model(core.library.import_file(tiny_gguf))
    _short_replies(core, max_tokens=6)
    add_connection(core, "box", server.url)
    engine = EngineClient(host_argv=[sys.executable, str(FAKE_HOST)])
    window = make_window(qtbot, core, engine)
    choose(window, "tiny@box")
    final = _finished(qtbot, window, lambda: send(qtbot, window, "remember me"))
    conversation = window.controller.conversation_id
    window.close()
    core.close()

    core = open_core(resolve_paths(home))
    try:
        window = make_window(qtbot, core, engine)
        assert window.controller.conversation_id == conversation
        assert window.controller.model is not None and window.controller.model.name == "tiny@box"
        assert window.picker.loaded() == "tiny@box"
        items = window.view.conversation_model().items()
        assert items[-1].id == final.id and metrics_line(items[-1].metrics).startswith(f"on 127.0.0.1:{server.port}")
        again = _finished(qtbot, window, lambda: send(qtbot, window, "and again"))  # the key is still there
        assert again.status == "length" and again.model_name == "tiny@box"
        window.close()
    finally:
        core.close()
        engine.close()


def test_an_unreachable_server_is_a_sentence_and_the_message_is_kept(qtbot, cove_core, fake_engine, keyring_backend):
    port = free_port()  # nothing listens there
    cove_core.connections.add("gone", f"http://127.0.0.1:{port}", None)
    remember(cove_core, "tiny@gone")  # chosen when its server still answered
    window = make_window(qtbot, cove_core, fake_engine)
    final = _finished(qtbot, window, lambda: send(qtbot, window, "are you there?"))
    assert final.status == "error" and final.error.startswith(f"127.0.0.1:{port} refused the connection"), final.error
    saved = cove_core.history.messages(window.controller.conversation_id)
    assert [(m.role, m.content) for m in saved][0] == ("user", "are you there?")
    assert window.composer.text() == ""  # it was saved before anything was sent
    assert window.notice.text() == final.error  # said in the window too
    assert fake_engine.host_pid is None


def test_offline_refuses_with_the_gate_sentence(qtbot, cove_core, fake_engine, server, keyring_backend):
    add_connection(cove_core, "box", server.url)
    remember(cove_core, "tiny@box")
    cove_core.set_offline(True)
    window = make_window(qtbot, cove_core, fake_engine)
    final = _finished(qtbot, window, lambda: send(qtbot, window, "offline?"))
    assert final.status == "error" and final.error.startswith("Cove is offline"), final.error
    assert "your server" in final.error
    assert cove_core.history.get_message(final.parent_id).content == "offline?"


def test_consent_is_asked_once_before_messages_first_leave_for_a_public_host(
    qtbot, cove_core, fake_engine, server, keyring_backend, monkeypatch
):
    # Every host counts as public here (the server itself is on loopback; nothing else changes).
    monkeypatch.setattr(remote_engine, "private_without_lookup", lambda _host: False)
    monkeypatch.setattr(remote_engine, "is_private_host", lambda _host: False)
    _short_replies(cove_core, max_tokens=4)
    with FaultProxy(server.url) as proxy:
        connection = add_connection(cove_core, "box", proxy.url)
        asked: list[tuple[str, str]] = []
        answers = [False, True]
        remember(cove_core, "tiny@box")
        window = make_window(qtbot, cove_core, fake_engine, ask_consent=lambda name, host: asked.append((name, host)) or answers.pop(0))
        declined = _finished(qtbot, window, lambda: send(qtbot, window, "secret plans"))
        assert asked == [("box", connection.host)]
        assert declined.status == "error"
        assert declined.error.startswith(f"Not sent: you chose not to send your messages to {connection.host}")
        assert not [r for r in proxy.requests if r.path.endswith("/chat/completions")]  # nothing left the window
        assert cove_core.history.get_message(declined.parent_id).content == "secret plans"

        agreed = _finished(qtbot, window, lambda: window.controller.regenerate(declined.id))  # Retry asks again
        assert len(asked) == 2 and agreed.status == "length"
        assert cove_core.connections.get("box").public_ok
        third = _finished(qtbot, window, lambda: send(qtbot, window, "more"))
        assert len(asked) == 2 and third.status == "length"  # asked once: not again
        sent = [r for r in proxy.requests if r.path.endswith("/chat/completions")]
        assert len(sent) == 2 and all(r.authorization == f"Bearer {KEY}" for r in sent)
