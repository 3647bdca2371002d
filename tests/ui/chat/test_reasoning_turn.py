"""A reply that thinks, in the window: the turn's reasoning reaches the reply's row as "Thinking…"
while it streams, collapsed above an answer that never holds it; the row ends "Thought for N s",
Copy copies the answer alone, and the conversation opened again shows the same collapsed line.

The model is the scripted fake engine host replaying a thinking model's output (`<think>…</think>`
then the answer), its reply started in the "think" mode a template that thinks gets from the
engine host (app/reasoning/style.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.engine.request import ReplyRequest
from app.reasoning.style import MODE_THINK
from app.statuses import MessageStatus
from tests.support.remote_window import make_window, send
from tests.support.tool_turns import ScriptedBackend
from ui.conversation.item_model import MessageItem

PIECES = ["<think>", "The user", " wants", " <b>2+2</b>", ".", " Easy.", "</think>", "\n\n", "2 + 2", " is", " **4**."]
REASONING = "The user wants <b>2+2</b>. Easy."
ANSWER = "2 + 2 is **4**."


class _Thinking:
    """A generation whose reply starts as a template that thinks starts it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def started(self) -> Any:
        started = self.inner.started
        return dataclasses.replace(started, reasoning=MODE_THINK) if started is not None else None


class ThinkingBackend(ScriptedBackend):
    def start(self, request: ReplyRequest, **kwargs: Any) -> Any:
        return _Thinking(super().start(request, **kwargs))


@pytest.fixture
def thinking_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = tmp_path / "pieces.json"
    pieces.write_text("[]")
    monkeypatch.setenv("FAKE_HOST_PIECES", str(pieces))
    monkeypatch.setenv("FAKE_HOST_TPS", "40")  # a few frames of reasoning before the answer
    from app.turn import backend as turn_backend

    real = turn_backend.backend_for
    monkeypatch.setattr("ui.chat.turn_runner.backend_for", lambda *a, **kw: ThinkingBackend(real(*a, **kw), pieces, [list(PIECES)]))


def _row(window: Any, message_id: str) -> MessageItem:
    model = window.view.conversation_model()
    return model.item(model.row_of(message_id))


def test_a_thinking_reply_shows_its_reasoning_apart_live_and_after(qtbot, cove_core, fake_engine, thinking_model) -> None:
    window = make_window(qtbot, cove_core, fake_engine)
    seen: list[tuple[str, str, str]] = []  # (line, answer so far, reasoning so far) each time reasoning arrived

    def on_reasoning(message_id: str, _text: str, _t: float) -> None:  # connected after the view: the row is updated
        row = _row(window, message_id)
        seen.append((row.reasoning.label, row.content, row.reasoning.text))

    window.controller.reply_reasoning_received.connect(on_reasoning)
    answering: list[tuple[bool, str]] = []  # (still "Thinking…", the answer so far) each frame of answer text
    window.controller.reply_text_received.connect(
        lambda message_id, text, _n: (
            answering.append((_row(window, message_id).reasoning.live, _row(window, message_id).content)) if text else None
        )
    )
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as done:
        send(qtbot, window, "What is 2+2?")
    final = done.args[0]

    assert seen and all(line.startswith("Thinking… ") for line, _answer, _thought in seen)
    assert all(answer == "" for _line, answer, _thought in seen)  # the answer had not begun while it thought
    assert seen[-1][2] == REASONING
    assert answering and not any(live for live, _answer in answering)  # its answer began: it thought, not thinks
    assert answering[-1][1] == ANSWER and all(REASONING not in answer for _live, answer in answering)
    assert final.status == MessageStatus.COMPLETE and final.content == ANSWER and final.reasoning == REASONING
    assert "reasoning_ms" in final.metrics

    row = _row(window, final.id)
    assert row.content == ANSWER and "<think>" not in row.content and "Easy" not in row.content
    assert row.reasoning.text == REASONING and not row.reasoning.expanded and not row.reasoning.live
    seconds = round(final.metrics["reasoning_ms"] / 1000)
    expected = "Thought for less than a second" if final.metrics["reasoning_ms"] < 1000 else f"Thought for {seconds} s"
    assert row.reasoning.label == expected
    qtbot.waitUntil(lambda: not window.view.thinking_clock.timer.isActive(), timeout=3000)

    view = window.view
    index = view.model().index(view.conversation_model().row_of(final.id), 0)
    view.scrollTo(index)
    qtbot.wait(30)
    regions = view.message_delegate().action_regions(index, view.visualRect(index))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=regions["copy"].center())
    assert QGuiApplication.clipboard().text() == ANSWER  # the answer alone
    window.copy_last_reply()
    assert QGuiApplication.clipboard().text() == ANSWER

    stored = cove_core.history.get_message(final.id)
    assert stored.content == ANSWER and stored.reasoning == REASONING
    window.controller.reload_messages()  # the conversation read back from the history
    again = _row(window, final.id)
    assert again.content == ANSWER and again.reasoning.label == expected and not again.reasoning.expanded
    assert json.dumps(stored.metrics)  # its figures are stored with it
    window.controller.shutdown()


def test_a_reply_without_reasoning_has_no_line(qtbot, cove_core, fake_engine, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_HOST_WORDS", "5")
    window = make_window(qtbot, cove_core, fake_engine)
    received: list[str] = []
    window.controller.reply_reasoning_received.connect(lambda _id, text, _t: received.append(text))
    with qtbot.waitSignal(window.controller.reply_finished, timeout=15000) as done:
        send(qtbot, window, "hello")
    assert received == [] and done.args[0].reasoning == ""
    assert _row(window, done.args[0].id).reasoning is None
    window.controller.shutdown()
