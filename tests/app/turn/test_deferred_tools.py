"""The two-phase tool step of a Turn driven by polling (the window's way): a call's question goes
out on its ToolCallEvent and nothing reaches the server before `Turn.answer`; the call runs on a
worker, so a poll never blocks while it runs; Stop at the question ends the turn; a rule answers
without a question. And a call cut off by the token limit: its markup is kept out of the reply
and a `tool_note` says it did not run. The scripted fake engine host replays model outputs;
the fault MCP server notes every call that reaches it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine.request import ReplyRequest
from app.mcp.approval import ALLOW_ONCE, ALWAYS, DENY
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.servers import ToolServer
from app.mcp.store import ToolServerStore
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.request_log import RequestLog
from app.turn.backend import backend_for
from app.turn.events import EndEvent, TextEvent, ToolCallEvent, ToolResultEvent
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.tools import ToolLoop, offered_tools
from app.turn.turn import Turn
from tests.support.tool_turns import CALL, LengthBackend, ScriptedBackend, calls_made, split_text

WAIT_S = 60.0


def _never(_request: Any) -> str:
    raise AssertionError("a deferred loop never calls its approver")


@pytest.fixture
def quick_host(tmp_path: Path) -> Iterator[McpHost]:
    """A host whose calls give up after 2 s (the fault server's `hang` never answers)."""
    with McpHost(tmp_path / "logs" / "tool-servers.log", ToolLimits(call_timeout_s=2, result_cap_chars=1000)) as h:
        yield h


def _turn(
    core: Any,
    engine: Any,
    pieces: Path,
    host: McpHost,
    server: ToolServer,
    replies: list[list[str]],
    *,
    deferred: bool = True,
    max_tokens: int = 400,
    backend_type: Any = ScriptedBackend,
    text: str = "Say hi through the tool",
) -> tuple[TurnRecord, Turn]:
    store = ToolServerStore(core.db)
    if store.find(server.name) is None:
        store.add(server)
    loop = ToolLoop(host, offered_tools([(server, host.list_tools(server))]), _never, store, deferred=deferred)
    model = core.library.get("tiny-llama")
    conversation = core.history.last_conversation() or core.history.create_conversation(model=model.name)
    params = SamplingParams(max_tokens=max_tokens)
    record = TurnRecord.begin(core.history, conversation.id, text, model=model, params=params)
    messages = build_prompt_messages(core.history, conversation.id, None, upto=record.user.id)
    asked = ReplyRequest.chat(messages, sampling=params.sampling(), conversation_id=conversation.id)
    turn = Turn(record, asked, library=core.library, tools=lambda: loop)  # built on the start thread, as the window does
    turn.launch(backend_type(backend_for(model, engine=engine), pieces, replies))
    return record, turn


def _poll_until(turn: Turn, seen: list, done: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"the turn did not get there; events so far: {seen}"
        seen.extend(turn.poll())
        time.sleep(0.01)


def _question(events: list) -> ToolCallEvent | None:
    return next((e for e in events if isinstance(e, ToolCallEvent) and e.question is not None), None)


def test_nothing_runs_before_the_answer_then_the_call_runs_and_the_turn_goes_on(
    cove_core, fake_engine, pieces, server, calls_file, quick_host
):
    record, turn = _turn(
        cove_core, fake_engine, pieces, quick_host, server, [split_text("Let me check. " + CALL), split_text("The tool said hi.")]
    )
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    asked = _question(events)
    assert asked is not None and asked.question is not None
    assert asked.question.tool == "echo" and asked.question.arguments == {"text": "hi from the tool"}
    assert asked.server == "fault" and turn.waiting_for is not None
    for _ in range(5):  # frames go by while the question is up: nothing runs, nothing ends
        events.extend(turn.poll())
    assert calls_made(calls_file) == [] and turn.ended is None
    turn.answer("not-the-call", ALLOW_ONCE)  # an answer to no question changes nothing
    assert turn.waiting_for is not None
    turn.answer(asked.call_id, ALLOW_ONCE)
    _poll_until(turn, events, lambda: turn.ended is not None)
    assert calls_made(calls_file) == ["echo"]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.content == "hi from the tool" and result.approved_by == "the person (allowed once)"
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == MessageStatus.COMPLETE and end.message.content == "The tool said hi."
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert branch[1].content == "Let me check." and branch[3].params["approved_by"] == "the person (allowed once)"
    entry = branch[3].params["record_entry"]
    row = next(cove_core.db.query("SELECT * FROM record_entries WHERE seq = ?", [entry]))
    assert json.loads(row["params"])["approved_by"] == "the person (allowed once)"
    assert RequestLog(cove_core.db).verify().intact


def test_a_denial_never_reaches_the_server(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(CALL), split_text("Understood.")])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    turn.answer(_question(events).call_id, DENY)  # type: ignore[union-attr]
    _poll_until(turn, events, lambda: turn.ended is not None)
    assert calls_made(calls_file) == []
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.status == "denied" and result.approved_by == "the person (denied)"
    assert turn.ended is not None and turn.ended.message.content == "Understood."


def test_always_is_asked_once_then_the_rule_answers(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    _record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(CALL), split_text("one")])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    turn.answer(_question(events).call_id, ALWAYS)  # type: ignore[union-attr]
    _poll_until(turn, events, lambda: turn.ended is not None)
    _record, again = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(CALL), split_text("two")], text="again")
    seen: list = []
    _poll_until(again, seen, lambda: again.ended is not None)
    assert _question(seen) is None and any(isinstance(e, ToolCallEvent) for e in seen)
    assert calls_made(calls_file) == ["echo", "echo"]
    result = next(e for e in seen if isinstance(e, ToolResultEvent))
    assert "always allowed" in result.approved_by


def test_stop_at_the_question_ends_the_turn_and_nothing_runs(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(CALL), split_text("never")])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    turn.cancel()
    _poll_until(turn, events, lambda: turn.ended is not None)
    assert turn.ended is not None and turn.ended.status == MessageStatus.CANCELLED
    turn.answer(_question(events).call_id, ALLOW_ONCE)  # type: ignore[union-attr]  # too late: ignored
    assert calls_made(calls_file) == []
    assert [m.role for m in cove_core.history.messages(record.conversation_id)] == ["user", "assistant", "assistant"]


def test_polls_return_while_a_call_hangs_on_its_worker(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    hang = '<tool_call>\n{"name": "hang", "arguments": {}}\n</tool_call>'
    _record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(hang), split_text("It hung.")])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    turn.answer(_question(events).call_id, ALLOW_ONCE)  # type: ignore[union-attr]
    polls_while_running = 0
    deadline = time.monotonic() + WAIT_S
    while turn.ended is None:
        assert time.monotonic() < deadline
        events.extend(turn.poll())
        if turn.call_running:
            polls_while_running += 1
        time.sleep(0.01)
    assert polls_while_running >= 3  # the driver's thread kept polling while the server did not answer
    assert calls_made(calls_file) == ["hang"]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.status == "failed" and "hang" in result.content
    assert turn.ended is not None and turn.ended.message.content == "It hung."


def test_a_call_cut_off_by_the_token_limit_is_kept_out_of_the_reply_with_a_note(
    cove_core, fake_engine, pieces, server, calls_file, quick_host
):
    cut = 'Let me look that up. <tool_call>\n{"name": "echo", "arguments": {"text": "hi fr'
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(cut)], max_tokens=40, backend_type=LengthBackend)
    events: list = []
    _poll_until(turn, events, lambda: turn.ended is not None)
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert "<tool_call>" not in shown and shown.startswith("Let me look that up.")
    end = turn.ended
    assert end is not None and end.status == MessageStatus.LENGTH
    assert "<tool_call>" not in end.message.content and end.message.content.startswith("Let me look that up.")
    note = end.message.metrics["tool_note"]
    assert "cut off by the token limit (40 tokens)" in note and "did not run" in note
    assert calls_made(calls_file) == [] and not any(isinstance(e, ToolCallEvent) for e in events)
    stored = cove_core.history.messages(record.conversation_id)[-1]
    assert stored.content == end.message.content and stored.metrics["tool_note"] == note


@pytest.mark.parametrize("cut_at", ["</tool_", "</tool_call", "</tool_call>"])
def test_a_call_cut_off_in_its_closing_tag_or_right_after_it_is_kept_out_with_a_note(
    cove_core, fake_engine, pieces, server, calls_file, quick_host, cut_at
):
    """The token limit may end a reply within the closing tag or just after it: the call is whole
    but did not run, and neither the tags nor any part of them stay in the saved reply."""
    text = "Let me look that up. " + CALL[: CALL.index("</tool_call>")] + cut_at
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(text)], max_tokens=40, backend_type=LengthBackend)
    events: list = []
    _poll_until(turn, events, lambda: turn.ended is not None)
    end = turn.ended
    assert end is not None and end.status == MessageStatus.LENGTH
    assert end.message.content.strip() == "Let me look that up."
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert "<" not in shown and "tool_call" not in shown
    assert "cut off by the token limit (40 tokens)" in end.message.metrics["tool_note"]
    assert calls_made(calls_file) == [] and not any(isinstance(e, ToolCallEvent) for e in events)
    assert cove_core.history.messages(record.conversation_id)[-1].content == end.message.content


def test_a_reply_cut_off_outside_a_call_keeps_its_text_and_has_no_note(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    text = "A long answer that simply ran out of room <tool"
    _record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(text)], backend_type=LengthBackend)
    events: list = []
    _poll_until(turn, events, lambda: turn.ended is not None)
    assert turn.ended is not None and turn.ended.message.content == text
    assert "tool_note" not in turn.ended.message.metrics


def test_quitting_at_the_question_keeps_the_turn_as_interrupted_and_runs_nothing(
    cove_core, fake_engine, pieces, server, calls_file, quick_host
):
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text("Let me see. " + CALL)])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    end = turn.abandon(1.0)
    assert end.status == MessageStatus.INTERRUPTED and turn.waiting_for is None
    assert calls_made(calls_file) == []
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "assistant"]
    assert branch[1].content == "Let me see." and branch[2].status == MessageStatus.INTERRUPTED


def test_quitting_while_a_call_runs_keeps_that_it_was_made(cove_core, fake_engine, pieces, server, calls_file, quick_host):
    hang = '<tool_call>\n{"name": "hang", "arguments": {}}\n</tool_call>'
    record, turn = _turn(cove_core, fake_engine, pieces, quick_host, server, [split_text(hang)])
    events: list = []
    _poll_until(turn, events, lambda: _question(events) is not None)
    turn.answer(_question(events).call_id, ALLOW_ONCE)  # type: ignore[union-attr]
    _poll_until(turn, events, lambda: calls_made(calls_file) == ["hang"])
    end = turn.abandon(0.2)  # the server does not answer within the grace
    assert end.status == MessageStatus.INTERRUPTED
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "tool_call", "tool", "assistant"]
    result = branch[3]
    assert "result is unknown" in result.content and result.params["approved_by"] == "the person (allowed once)"
    assert result.params["record_entry"] is not None and RequestLog(cove_core.db).verify().intact
