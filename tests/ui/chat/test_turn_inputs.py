"""What the features provide through the ChatController reaches the turn: the documents a
conversation's turn is given are those `provide_documents` registered, and the sentences the
provided tools leave are shown while the turn runs (ui/chat/turn_inputs.py)."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from ui.chat.controller import ChatController


class _Documents:
    """Stands in for a turn's TurnDocuments: passes the prompt through, finds no passage."""

    given: list[Any] = []
    problem: str | None = None

    def __init__(self) -> None:
        self.applied = 0

    def apply(self, messages: list[dict]) -> list[dict]:
        self.applied += 1
        return messages


class _Tools:
    """Stands in for ChatTools: no loop for any conversation, one sentence waiting in its notes."""

    def __init__(self) -> None:
        self.notes: deque[str] = deque(["The tool server box did not start."])
        self.asked: list[Any] = []

    def loop_for(self, conversation: Any) -> None:
        self.asked.append(conversation.id)
        return None


@pytest.fixture
def controller(qtbot, cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "3")
    controller = ChatController(cove_core, fake_engine)
    controller.start()
    yield controller
    controller.shutdown()


def test_the_documents_provided_through_the_controller_are_the_turns(qtbot, controller) -> None:
    documents = _Documents()
    asked: list[str] = []

    def docs_for(conversation_id: str) -> _Documents:
        asked.append(conversation_id)
        return documents

    controller.provide_documents(docs_for)  # type: ignore[arg-type]
    assert controller.turns.inputs.docs_for("c1") is documents and asked == ["c1"]
    with qtbot.waitSignal(controller.reply_finished, timeout=15000) as done:
        assert controller.send("what do my notes say?")
        record = controller.turns.record
        assert record is not None and record.docs is documents  # what the turn was given
    assert done.args[0].status == "complete"
    assert asked[-1] == controller.conversation_id and documents.applied == 1  # its prompt went through them


def test_the_provided_tools_are_asked_and_their_notes_are_shown(qtbot, controller) -> None:
    tools = _Tools()
    controller.provide_tools(tools)  # type: ignore[arg-type]
    assert controller.turns.inputs.notes is tools.notes
    reported: list[str] = []
    controller.error_reported.connect(reported.append)
    with qtbot.waitSignal(controller.reply_finished, timeout=15000):
        assert controller.send("hello")
    assert tools.asked == [controller.conversation_id]
    assert reported == ["The tool server box did not start."] and not tools.notes
