"""The tool loop inside a turn (app/turn/tools.py), with the scripted fake engine host replaying
model outputs (a Qwen-style <tool_call> reply, then text) and the fault MCP server, which notes
every call that reaches it: approved, denied (it never sees the call), always allowed (asked once),
the step limit; the rows the history keeps, the prompt rebuilt from them, the record entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.mcp.approval import ALLOW_ONCE, ALWAYS, DENY, ToolRequest
from app.mcp.host import McpHost
from app.mcp.servers import ToolServer
from app.mcp.store import ToolServerStore
from app.statuses import MessageStatus
from app.store.export import export_conversation
from app.store.request_log import RequestLog
from app.turn.answer_step import NO_CALL_FIRST
from app.turn.events import EndEvent, TextEvent, ToolCallEvent, ToolResultEvent
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.tools import ToolLoop, offered_tools
from app.turn.turn import Turn
from tests.support.tool_turns import CALL, calls_made, run_turn, split_text


def _run(
    core: Any,
    engine: Any,
    pieces: Path,
    host: McpHost,
    server: ToolServer,
    replies: list[list[str]],
    approver: Any,
    max_steps: int = 8,
    text: str = "Say hi through the tool",
) -> tuple[TurnRecord, Turn, list, Any]:
    store = ToolServerStore(core.db)
    if store.find(server.name) is None:
        store.add(server)
    loop = ToolLoop(host, offered_tools([(server, host.list_tools(server))]), approver, store, max_steps=max_steps)
    conversation = core.history.last_conversation() or core.history.create_conversation(model="tiny-llama")
    return run_turn(core, engine, pieces, loop, replies, conversation, text)


def test_an_approved_call_runs_and_the_model_answers_with_its_result(cove_core, fake_engine, pieces, host, server, calls_file):
    asked: list[ToolRequest] = []

    def approver(request: ToolRequest) -> str:
        asked.append(request)
        return ALLOW_ONCE

    record, turn, events, backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text("Let me check. " + CALL), split_text("The tool said hi.")], approver
    )
    assert [r.tool for r in asked] == ["echo"] and asked[0].arguments == {"text": "hi from the tool"}
    assert calls_made(calls_file) == ["echo"]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallEvent") < kinds.index("ToolResultEvent") < kinds.index("EndEvent") == len(kinds) - 1
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.content == "hi from the tool" and result.status == "ok" and result.server == "fault"
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert "<tool_call>" not in shown and shown.startswith("Let me check.") and shown.endswith("The tool said hi.")
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == MessageStatus.COMPLETE
    assert end.message.content == "The tool said hi."

    # The history: the reply that called, the call, its result, the answer, each a row of its own.
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "tool_call", "tool", "assistant"]
    first, call, res, final = branch[1:]
    assert first.content == "Let me check." and first.status == MessageStatus.COMPLETE
    assert call.params["server"] == "fault" and call.params["arguments"] == {"text": "hi from the tool"}
    assert res.content == "hi from the tool" and res.params["decision"] == "once"
    assert res.params["approved_by"] == "the person (allowed once)"
    assert final.id == end.message.id and final.parent_id == res.id

    # The second reply was sent the call and its result in the shape chat templates expect.
    second = backend.sent[1]
    assert second[-2]["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"text": "hi from the tool"}'}
    assert second[-1] == {"role": "tool", "tool_call_id": second[-2]["tool_calls"][0]["id"], "name": "echo", "content": "hi from the tool"}
    assert backend.tools_given[0][0][0]["function"]["name"] == "echo"
    # ... and the prompt rebuilt from the history for the next turn says the same.
    rebuilt = build_prompt_messages(cove_core.history, record.conversation_id, None)
    assert [m["role"] for m in rebuilt] == ["user", "assistant", "tool", "assistant"]
    assert rebuilt[1]["tool_calls"][0]["id"] == rebuilt[2]["tool_call_id"] == call.params["call_id"]

    # The record: both replies and the call, chained and intact; the call names who approved it.
    log = RequestLog(cove_core.db)
    assert log.verify().intact
    entry = res.params["record_entry"]
    row = next(cove_core.db.query("SELECT * FROM record_entries WHERE seq = ?", [entry]))
    params = json.loads(row["params"])
    assert row["endpoint"] == "tool:fault/echo" and params["approved_by"] == "the person (allowed once)"
    assert row["reply"] == "hi from the tool"
    # The reply that called is entered with the model's raw output and the calls read from it
    # (the row keeps only the text outside the call): "why did the tool not run" has an answer.
    calling = next(r for r in cove_core.db.query("SELECT * FROM record_entries WHERE endpoint = 'chat' ORDER BY seq"))
    assert calling["reply"] == "Let me check. " + CALL
    assert json.loads(calling["params"])["tool_calls"] == [
        {"id": call.params["call_id"], "name": "echo", "arguments": {"text": "hi from the tool"}}
    ]
    # Searchable: the call and its result are in the full-text index.
    hits = list(cove_core.db.query("SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"hi from the tool\"'"))
    assert len(hits) >= 2
    # Exported: Markdown shows the call and its result in sections of their own, JSON keeps the details.
    markdown = export_conversation(cove_core.history, record.conversation_id, "md")
    assert "## Tool call · fault/echo" in markdown and '"text": "hi from the tool"' in markdown
    assert "## Tool result · echo · ok · decided by the person (allowed once)" in markdown
    exported = json.loads(export_conversation(cove_core.history, record.conversation_id, "json"))["messages"]
    assert [m["role"] for m in exported][2:4] == ["tool_call", "tool"] and exported[3]["params"]["record_entry"] == entry


def test_a_denied_call_never_reaches_the_server_and_the_model_is_told(cove_core, fake_engine, pieces, host, server, calls_file):
    record, turn, events, backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text(CALL), split_text("Understood.")], lambda _request: DENY
    )
    assert calls_made(calls_file) == []
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.status == "denied" and result.is_error and "denied" in result.content
    assert backend.sent[1][-1]["content"] == result.content
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert branch[3].params["decision"] == "deny" and branch[-1].content == "Understood."
    assert RequestLog(cove_core.db).verify().intact


def test_a_question_that_fails_denies(cove_core, fake_engine, pieces, host, server, calls_file):
    def broken(_request: ToolRequest) -> str:
        raise OSError("the terminal went away")

    _run(cove_core, fake_engine, pieces, host, server, [split_text(CALL), split_text("ok")], broken)
    assert calls_made(calls_file) == []


def test_always_allow_asks_once_then_the_rule_answers(cove_core, fake_engine, pieces, host, server, calls_file):
    _run(cove_core, fake_engine, pieces, host, server, [split_text(CALL), split_text("one")], lambda _r: ALWAYS)

    def never(_request: ToolRequest) -> str:
        raise AssertionError("asked again although the tool is always allowed")

    record, _turn, events, _backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text(CALL), split_text("two")], never, text="again"
    )
    assert calls_made(calls_file) == ["echo", "echo"]
    result_row = [m for m in cove_core.history.messages(record.conversation_id) if m.role == "tool"][-1]
    assert result_row.params["decision"] == "always" and "always allowed" in result_row.params["approved_by"]


def test_the_step_limit_ends_the_loop_and_the_model_answers_without_tools(cove_core, fake_engine, pieces, host, server, calls_file):
    """Calls past the last round do not run (each is written with a result saying why), and the
    model is asked once more, without tools and kept from opening a call, for its answer."""
    replies = [split_text(CALL.replace("hi from the tool", f"hi {n}")) for n in range(3)]
    record, turn, events, backend = _run(
        cove_core,
        fake_engine,
        pieces,
        host,
        server,
        [*replies, split_text("The tool said hi 0 and hi 1.")],
        lambda _r: ALLOW_ONCE,
        max_steps=2,
    )
    assert calls_made(calls_file) == ["echo", "echo"]
    assert turn.steps == 2 and len(backend.sent) == 4
    assert backend.tools_given[3] == (None, None) and backend.grammars[3] == NO_CALL_FIRST
    assert backend.grammars[:3] == [None, None, None]
    # The answer's prompt holds the calls that ran and their results; the one that did not is left out.
    assert backend.sent[3] == backend.sent[2]
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == MessageStatus.COMPLETE
    assert end.message.content == "The tool said hi 0 and hi 1."
    assert "2 rounds" in end.message.metrics["tool_note"] and "answer from the results without tools" in end.message.metrics["tool_note"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.status for r in results] == ["ok", "ok", "failed"]
    assert results[2].content.startswith("Cove did not run 'echo': this turn has had 2 rounds of calls")
    rows = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in rows] == [
        "user",
        "assistant",
        "tool_call",
        "tool",
        "assistant",
        "tool_call",
        "tool",
        "assistant",
        "tool_call",
        "tool",
        "assistant",
    ]
    entries = list(cove_core.db.query("SELECT * FROM record_entries WHERE endpoint = 'chat' ORDER BY seq"))
    assert CALL.replace("hi from the tool", "hi 2") in [e["reply"] for e in entries]  # the call that did not run
    assert "2 rounds" in json.loads(entries[-1]["params"])["tool_note"]
    assert RequestLog(cove_core.db).verify().intact


def test_a_call_made_again_with_the_same_arguments_does_not_run_again(cove_core, fake_engine, pieces, host, server, calls_file):
    """A small model given a result may ask for the very same call again and again (Qwen2.5-Coder
    0.5B does): it runs once, and the model answers without tools from the prompt it had."""
    spaced = CALL.replace('"text": ', '"text":  ')  # the same arguments, spelled otherwise
    record, turn, events, backend = _run(
        cove_core,
        fake_engine,
        pieces,
        host,
        server,
        [split_text(CALL), split_text(spaced), split_text("It said hi.")],
        lambda _r: ALLOW_ONCE,
    )
    assert calls_made(calls_file) == ["echo"]
    assert turn.steps == 1 and len(backend.sent) == 3 and backend.sent[2] == backend.sent[1]
    assert backend.tools_given[2] == (None, None) and backend.grammars[2] == NO_CALL_FIRST
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == MessageStatus.COMPLETE and end.message.content == "It said hi."
    assert "same arguments" in end.message.metrics["tool_note"] and "'echo'" in end.message.metrics["tool_note"]
    again = [e for e in events if isinstance(e, ToolResultEvent)][-1]
    assert again.status == "failed" and "made the same call with the same arguments before" in again.content


def test_a_call_in_the_answer_without_tools_does_not_run(cove_core, fake_engine, pieces, host, server, calls_file):
    """The answer may still write a call (after text: only its beginning is kept from one): it
    does not run, and the reply keeps the text beside it."""
    record, turn, events, backend = _run(
        cove_core,
        fake_engine,
        pieces,
        host,
        server,
        [split_text(CALL), split_text(CALL), split_text("Once more: " + CALL)],
        lambda _r: ALLOW_ONCE,
    )
    assert calls_made(calls_file) == ["echo"] and len(backend.sent) == 3
    end = events[-1]
    assert isinstance(end, EndEvent) and end.message.content.strip() == "Once more:"
    assert "<tool_call>" not in "".join(e.text for e in events if isinstance(e, TextEvent))
    assert "same arguments" in end.message.metrics["tool_note"]


def test_text_beside_a_repeated_call_is_the_answer(cove_core, fake_engine, pieces, host, server, calls_file):
    """A reply that says something beside a call made before ends the turn with that text: the
    model was not asked again."""
    record, turn, events, backend = _run(
        cove_core,
        fake_engine,
        pieces,
        host,
        server,
        [split_text(CALL), split_text("It said hi. " + CALL), split_text("never")],
        lambda _r: ALLOW_ONCE,
    )
    assert calls_made(calls_file) == ["echo"] and len(backend.sent) == 2
    end = events[-1]
    assert end.message.content.strip() == "It said hi." and "same arguments" in end.message.metrics["tool_note"]
    assert "without tools" not in end.message.metrics["tool_note"]


def test_a_call_of_a_tool_the_turn_does_not_offer_runs_nothing(cove_core, fake_engine, pieces, host, server, calls_file):
    unknown = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    asked: list[ToolRequest] = []
    record, _turn, events, backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text(unknown), split_text("sorry")], lambda r: asked.append(r) or ALLOW_ONCE
    )
    assert asked == [] and calls_made(calls_file) == []
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.status == "failed" and "no tool named 'rm_rf'" in result.content


def test_a_reply_without_calls_is_written_whole(cove_core, fake_engine, pieces, host, server, calls_file):
    record, _turn, events, _backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text("Just text, no tools <tool")], lambda _r: ALLOW_ONCE
    )
    assert not any(isinstance(e, (ToolCallEvent, ToolResultEvent)) for e in events)
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert shown == "Just text, no tools <tool" == events[-1].message.content
    assert [m.role for m in cove_core.history.messages(record.conversation_id)] == ["user", "assistant"]


HARMONY_CALL = (
    "<|channel|>analysis<|message|>The person wants a greeting through the tool.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.echo <|constrain|>json<|message|>"
    '{"text": "hi from the tool"}'
)
HARMONY_ANSWER = "<|channel|>analysis<|message|>The tool answered.<|end|><|start|>assistant<|channel|>final<|message|>The tool said hi."


def test_a_harmony_reply_keeps_only_its_final_channel_and_its_call_runs(
    cove_core, fake_engine, pieces, host, server, calls_file, monkeypatch
):
    """gpt-oss's channels (replayed): the call runs, the rows hold no analysis text or markup,
    and the record keeps what the model wrote."""
    from app.tools.families import FAMILIES

    monkeypatch.setattr(Turn, "_family", lambda _self, _metrics: FAMILIES["harmony"])
    record, _turn, events, _backend = _run(
        cove_core, fake_engine, pieces, host, server, [split_text(HARMONY_CALL), split_text(HARMONY_ANSWER)], lambda _r: ALLOW_ONCE
    )
    assert calls_made(calls_file) == ["echo"]
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert shown == "The tool said hi."
    branch = cove_core.history.messages(record.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert branch[1].content == "" and branch[-1].content == "The tool said hi."
    replies = list(cove_core.db.query("SELECT reply FROM record_entries WHERE endpoint = 'chat' ORDER BY seq"))
    assert [r["reply"] for r in replies] == [HARMONY_CALL, HARMONY_ANSWER]
