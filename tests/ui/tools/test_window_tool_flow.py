"""The window's tool flow (issue 31 §3), as a person goes through it: tool servers turned on for
the conversation in the Tools menu under the message box, the model's call asked in the approval dialog
(opened without blocking the frame timer), allowed / denied / always allowed / closed, the call
and its result shown as one collapsed row that opens to the arguments and the result, kept in
the history and the record, shown again in a new window on the same database.

The model is the scripted fake engine host replaying a model's real output (a Hermes-style
<tool_call>, then text); the tool server is the fault server, which notes every call that
reaches it, so a denial can be proven never to have reached it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import shiboken6
from PySide6.QtCore import Qt, QTimer

from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.servers import stdio_server
from app.mcp.store import ToolServerStore
from app.statuses import MessageStatus
from app.turn import backend as turn_backend
from tests.support.modal_answers import answer_question
from tests.support.remote_window import make_window, send
from tests.support.tool_turns import CALL, ScriptedBackend, split_text
from tests.support.view_actions import click_action
from tests.ui.tools.conftest import WAIT_MS, fault_command
from ui.conversation.row_layout import status_notice


class Replies:
    """The model's replies, in order, for every turn of the window (the last one repeats)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, pieces: Path) -> None:
        self.replies: list[list[str]] = [["Hello."]]
        self.backends: list[ScriptedBackend] = []
        self.kind: type[ScriptedBackend] = ScriptedBackend
        real = turn_backend.backend_for

        def scripted(*args: Any, **kwargs: Any) -> Any:
            made = self.kind(real(*args, **kwargs), pieces, self.replies)
            self.backends.append(made)
            return made

        monkeypatch.setattr("ui.chat.turn_runner.backend_for", scripted)

    def set(self, *texts: str) -> None:
        self.replies[:] = [split_text(t) for t in texts]


@pytest.fixture
def replies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Replies:
    path = tmp_path / "pieces.json"
    path.write_text("[]")
    monkeypatch.setenv("FAKE_HOST_PIECES", str(path))
    return Replies(monkeypatch, path)


def _window(qtbot, core, engine, hosts: Callable[[], McpHost], calls_file: Path) -> Any:
    store = ToolServerStore(core.db)
    if store.find("fault") is None:
        store.add(stdio_server("fault", fault_command(calls_file)))
    window = make_window(qtbot, core, engine)
    window.tools.mcp_factory = hosts
    return window


def _turn_on(window: Any, name: str) -> None:
    """Check `name` in the composer's Tools menu, as a click on it does."""
    window.tools.fill_menu()
    action = next(a for a in window.tools.menu.actions() if a.text() == name)
    assert action.isCheckable() and not action.isChecked()
    action.trigger()


def _calls(path: Path) -> list[str]:
    return path.read_text().split()


def _asked(qtbot, window: Any) -> Any:
    qtbot.waitUntil(lambda: window.tools.approval is not None and window.tools.approval.isVisible(), timeout=WAIT_MS)
    return window.tools.approval


def _idle(qtbot, window: Any) -> None:
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=WAIT_MS)


def _rows(window: Any) -> list[Any]:
    return window.view.conversation_model().items()


def _click_action(qtbot, window: Any, message_id: str, kind: str) -> None:
    """Click one of a row's actions (its "Show details" for kind "details") where the person sees it."""
    click_action(qtbot, window.view, message_id, kind)


def test_a_call_is_asked_allowed_run_shown_stored_and_recorded(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    assert window.controller.tool_servers() == ["fault"] and window.tools.menu_button.text() == "Tools (1)"
    replies.set("Let me check. " + CALL, "The tool said hi.")
    send(qtbot, window, "Say hi through the tool")

    dialog = _asked(qtbot, window)
    assert "echo" in dialog.heading.text() and "fault" in dialog.heading.text()
    assert fault_command(calls_file)[-1] in dialog.identity.text()  # the full command line
    assert json.loads(dialog.arguments.toPlainText()) == {"text": "hi from the tool"}
    assert dialog.arguments.isReadOnly() and _calls(calls_file) == []  # asked: nothing ran yet
    qtbot.mouseClick(dialog.allow_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)

    assert _calls(calls_file) == ["echo"]
    history = cove_core.history.messages(window.controller.conversation_id)
    assert [m.role for m in history] == ["user", "assistant", "tool_call", "tool", "assistant"]
    result = history[3]
    assert result.content == "hi from the tool" and result.params["approved_by"] == "the person (allowed once)"
    row = next(cove_core.db.query("SELECT * FROM record_entries WHERE seq = ?", [result.params["record_entry"]]))
    assert row["endpoint"] == "tool:fault/echo"
    assert json.loads(row["params"])["approved_by"] == "the person (allowed once)"

    shown = _rows(window)
    assert [r.role for r in shown] == ["user", "assistant", "tool_call", "assistant"]
    tool_row = shown[2]
    assert tool_row.content == "Called fault/echo · done · decided by the person (allowed once)"
    assert shown[1].content == "Let me check." and shown[-1].content == "The tool said hi."
    _click_action(qtbot, window, tool_row.id, "details")  # "Show details"
    opened = _rows(window)[2]
    assert '"text": "hi from the tool"' in opened.content and "**Result**" in opened.content
    _click_action(qtbot, window, tool_row.id, "details")  # "Hide details"
    assert _rows(window)[2].content == tool_row.content

    # Regenerate the answer: it replays from the person's message, not from the tool's result.
    user = history[0]
    replies.set("A fresh answer.")
    window.controller.regenerate(history[-1].id)
    _idle(qtbot, window)
    newest = cove_core.history.messages(window.controller.conversation_id)
    assert [m.role for m in newest] == ["user", "assistant"] and newest[1].parent_id == user.id
    assert newest[1].content == "A fresh answer." and _calls(calls_file) == ["echo"]


def test_a_denied_call_never_reaches_the_server_and_the_model_is_told(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    replies.set(CALL, "Understood.")
    send(qtbot, window, "Say hi through the tool")
    qtbot.mouseClick(_asked(qtbot, window).deny_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)
    assert _calls(calls_file) == []
    told = replies.backends[-1].sent[-1][-1]
    assert told["role"] == "tool" and "denied" in told["content"]
    shown = _rows(window)
    assert shown[2].content == "Called fault/echo · denied · decided by the person (denied)"
    assert shown[-1].content == "Understood."


def test_closing_the_dialog_denies(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    replies.set(CALL, "Fine.")
    send(qtbot, window, "Say hi through the tool")
    _asked(qtbot, window).close()
    _idle(qtbot, window)
    assert _calls(calls_file) == []
    result = [m for m in cove_core.history.messages(window.controller.conversation_id) if m.role == "tool"][-1]
    assert result.params["decision"] == "deny"


def test_always_allowed_is_not_asked_again_and_can_be_revoked(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    asked: list[Any] = []
    window.controller.tool_asked.connect(asked.append)
    _turn_on(window, "fault")
    replies.set(CALL, "One.")
    send(qtbot, window, "first")
    qtbot.mouseClick(_asked(qtbot, window).always_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)
    replies.set(CALL, "Two.")
    send(qtbot, window, "second")
    _idle(qtbot, window)
    assert len(asked) == 1 and _calls(calls_file) == ["echo", "echo"]
    last = [m for m in cove_core.history.messages(window.controller.conversation_id) if m.role == "tool"][-1]
    assert last.params["decision"] == "always" and "always allowed" in last.params["approved_by"]

    store = ToolServerStore(cove_core.db)
    assert store.rules(store.get("fault")) == ["echo"]
    page = window.tools.open().page
    page.revoke("fault", "echo")
    assert store.rules(store.get("fault")) == []
    replies.set(CALL, "Three.")
    send(qtbot, window, "third")
    assert _asked(qtbot, window) is not None and len(asked) == 2  # asked again once revoked
    window.tools.approval.close()
    _idle(qtbot, window)


def test_the_rows_and_the_choice_of_servers_are_shown_again_after_a_restart(
    qtbot, cove_core, fake_engine, hosts, calls_file, replies
) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    replies.set(CALL, "Done.")
    send(qtbot, window, "Say hi through the tool")
    qtbot.mouseClick(_asked(qtbot, window).allow_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)
    before = [(r.role, r.content) for r in _rows(window)]
    conversation_id = window.controller.conversation_id
    window.close()

    again = make_window(qtbot, cove_core, fake_engine)  # a new window on the same database
    assert again.controller.conversation_id == conversation_id
    assert [(r.role, r.content) for r in _rows(again)] == before
    assert ("tool_call", "Called fault/echo · done · decided by the person (allowed once)") in before
    assert again.controller.tool_servers() == ["fault"] and again.tools.menu_button.text() == "Tools (1)"
    again.tools.fill_menu()
    assert next(a for a in again.tools.menu.actions() if a.text() == "fault").isChecked()


def test_the_window_stays_live_while_a_slow_call_runs(qtbot, cove_core, fake_engine, calls_file, replies, tmp_path: Path) -> None:
    made: list[McpHost] = []

    def quick() -> McpHost:  # the hang tool never answers: its call gives up after 2 s
        host = McpHost(tmp_path / "logs" / "tool-servers.log", ToolLimits(call_timeout_s=2, result_cap_chars=1000))
        made.append(host)
        return host

    window = _window(qtbot, cove_core, fake_engine, quick, calls_file)
    _turn_on(window, "fault")
    replies.set('<tool_call>\n{"name": "hang", "arguments": {}}\n</tool_call>', "It did not answer.")
    send(qtbot, window, "hang")
    ticks_while_running: list[int] = []

    def tick() -> None:  # on the window's thread, as its frames are: none comes while that thread waits
        history = cove_core.history.messages(window.controller.conversation_id)
        if _calls(calls_file) == ["hang"] and not any(m.role == "tool" for m in history):  # the server has the call
            ticks_while_running.append(1)

    clock = QTimer(window)
    clock.setInterval(50)
    clock.timeout.connect(tick)
    clock.start()
    qtbot.mouseClick(_asked(qtbot, window).allow_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)
    clock.stop()
    try:
        assert _calls(calls_file) == ["hang"]
        assert len(ticks_while_running) >= 5  # the window's thread kept running during the 2 s the server did not answer
        result = [m for m in cove_core.history.messages(window.controller.conversation_id) if m.role == "tool"][-1]
        assert result.params["status"] == "failed"
        assert _rows(window)[-1].content == "It did not answer." and _rows(window)[-1].status == MessageStatus.COMPLETE
    finally:
        window.close()
        for host in made:
            host.close()


def test_stop_while_the_question_is_up_closes_it_and_nothing_runs(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    replies.set(CALL, "never")
    send(qtbot, window, "Say hi through the tool")
    dialog = _asked(qtbot, window)
    window.controller.stop()
    _idle(qtbot, window)
    assert window.tools.approval is None
    assert not shiboken6.isValid(dialog) or not dialog.isVisible()  # closed (and deleted)
    assert _calls(calls_file) == []
    assert _rows(window)[-1].status == MessageStatus.CANCELLED


def test_offline_the_servers_start_only_if_the_person_allows_it_once(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    cove_core.network.set_offline(True)
    replies.set("No tools here.")
    questions = answer_question(yes=False)  # the window's question before the servers start
    send(qtbot, window, "hello")
    _idle(qtbot, window)
    assert len(questions) == 1 and "offline" in questions[0] and fault_command(calls_file)[-1] in questions[0]
    assert hosts.made == [] and replies.backends[-1].tools_given[-1][0] is None  # nothing started, no tools
    assert "were not started" in window.notice.text()
    replies.set(CALL, "Done.")
    questions = answer_question(yes=True)
    send(qtbot, window, "again")
    qtbot.mouseClick(_asked(qtbot, window).allow_button, Qt.MouseButton.LeftButton)
    _idle(qtbot, window)
    assert len(questions) == 1 and _calls(calls_file) == ["echo"]


def test_a_call_cut_off_by_the_token_limit_shows_its_note_and_no_markup(qtbot, cove_core, fake_engine, hosts, calls_file, replies) -> None:
    from tests.support.tool_turns import LengthBackend

    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    replies.kind = LengthBackend  # the reply ends at its token limit
    replies.set('Checking. <tool_call>\n{"name": "echo", "arguments": {"text": "cut he')
    send(qtbot, window, "Say hi through the tool")
    _idle(qtbot, window)
    last = _rows(window)[-1]
    assert last.status == MessageStatus.LENGTH and "<tool_call>" not in last.content
    assert "cut off by the token limit" in last.metrics["tool_note"]
    assert "cut off by the token limit" in window.notice.text() and _calls(calls_file) == []
    notice = status_notice(last)  # the row's own notice, under its text
    assert notice is not None and notice[0].startswith("The model's tool call was cut off by the token limit")


def test_the_tiny_model_forced_to_call_runs_the_time_server_on_the_real_engine(qtbot, cove_core, hosts, tmp_path: Path) -> None:
    """The real engine, the tiny random-weight model with Qwen 2.5's chat template and the first
    reply's tool_choice "required" (the grammar forces a valid call), and mcp-server-time. As in
    tests/app/turn/test_chat_tools_cli.py, temperature 0 and a bias on the '"' token make every
    string argument "" at once, so the call ends well within the token limit."""
    from app.engine.client import EngineClient
    from app.settings import SamplingParams
    from tests.support.tiny_model import write_tiny_gguf
    from tests.support.tool_turns import QUOTE_TOKEN, QWEN_TEMPLATE
    from tests.ui.tools.conftest import time_command

    model = cove_core.library.import_file(
        write_tiny_gguf(tmp_path / "qwentools.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096)
    )
    cove_core.remember_model(model)
    cove_core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=128, logit_bias=((QUOTE_TOKEN, 10.0),)))
    ToolServerStore(cove_core.db).add(stdio_server("time", time_command()))
    engine = EngineClient()
    window = make_window(qtbot, cove_core, engine)
    try:
        window.tools.mcp_factory = hosts
        window.tools.chat.first_choice = "required"
        _turn_on(window, "time")
        send(qtbot, window, "What time is it in Tokyo?")
        dialog = _asked(qtbot, window)
        tool = dialog.request.tool
        assert dialog.request.server.name == "time" and tool in ("get_current_time", "convert_time")
        qtbot.mouseClick(dialog.allow_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.controller.busy, timeout=2 * WAIT_MS)
        history = cove_core.history.messages(window.controller.conversation_id)
        assert [m.role for m in history][:4] == ["user", "assistant", "tool_call", "tool"]
        result = history[3]
        assert result.params["status"] in ("ok", "tool_error") and result.content  # a time, or the tool's error
        row = next(cove_core.db.query("SELECT * FROM record_entries WHERE seq = ?", [result.params["record_entry"]]))
        assert row["endpoint"] == f"tool:time/{tool}"
        assert json.loads(row["params"])["approved_by"] == "the person (allowed once)"
        assert any(r.content.startswith(f"Called time/{tool} · ") for r in _rows(window))
    finally:
        window.close()


def test_a_server_that_does_not_start_is_one_sentence_and_the_reply_goes_on(
    qtbot, cove_core, fake_engine, hosts, calls_file, replies
) -> None:
    import sys

    ToolServerStore(cove_core.db).add(stdio_server("broken", [sys.executable, "-c", "import sys; sys.exit(3)"]))
    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "broken")
    replies.set("Plain answer.")
    send(qtbot, window, "hello")
    _idle(qtbot, window)
    assert "broken" in window.notice.text() and "not offered" in window.notice.text()
    assert "Traceback" not in window.notice.text()
    assert replies.backends[-1].tools_given[-1][0] is None and _rows(window)[-1].content == "Plain answer."


def test_a_host_that_cannot_be_made_is_one_sentence_and_the_reply_goes_on(qtbot, cove_core, fake_engine, calls_file, replies) -> None:
    def no_host() -> McpHost:
        raise PermissionError(13, "Permission denied", "/nowhere/tool-servers.log")

    window = _window(qtbot, cove_core, fake_engine, no_host, calls_file)
    _turn_on(window, "fault")
    replies.set("Plain answer.")
    send(qtbot, window, "hello")
    _idle(qtbot, window)
    assert "were not started: permission denied" in window.notice.text()
    assert _rows(window)[-1].content == "Plain answer." and _calls(calls_file) == []


def test_a_model_on_a_server_is_offered_the_tools_which_run_here(qtbot, cove_core, fake_engine, hosts, calls_file) -> None:
    """The tools go with a server's model's request and its calls run here (app/remote/remote_tools.py;
    end to end in tests/app/remote/test_paired_machines.py), as for a model of this machine."""
    from app.remote.remote_model import RemoteModel

    window = _window(qtbot, cove_core, fake_engine, hosts, calls_file)
    _turn_on(window, "fault")
    controller = window.controller
    controller.model = RemoteModel("box", "m1", "127.0.0.1:9", None)
    assert controller.turns.inputs.tools_for(controller.conversation_id) is not None  # what a turn would get
    assert not window.tools.chat.notes  # no refusal
