"""Tools with a server's model (app/remote/remote_tools.py): the offer in OpenAI's fields, the
streamed call pieces put together and written as the Hermes markup the tool loop reads, and what
another Cove says of the machine and file that served a reply (sane values only)."""

from __future__ import annotations

import json

from app.engine.request import ToolOffer
from app.remote.remote_tools import ToolCallPieces, served_by, tools_body
from app.tools.families import FAMILIES
from app.tools.parsers import parse_calls

TOOL = {"type": "function", "function": {"name": "echo", "description": "Echo", "parameters": {"type": "object"}}}


def test_the_offer_as_openai_fields() -> None:
    assert tools_body(ToolOffer((TOOL,), "required", parallel=False)) == {
        "tools": [TOOL],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    named = tools_body(ToolOffer((TOOL,), "required", name="echo"))
    assert named["tool_choice"] == {"type": "function", "function": {"name": "echo"}}


def test_streamed_pieces_become_calls_the_tool_loop_reads() -> None:
    pieces = ToolCallPieces()
    assert not pieces and pieces.as_text() == ""
    pieces.add([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo", "arguments": ""}}])
    pieces.add([{"index": 0, "function": {"arguments": '{"text": "hi'}}])
    pieces.add(
        [{"index": 0, "function": {"arguments": ' there"}'}}, {"index": 1, "function": {"name": "echo", "arguments": {"text": "2"}}}]
    )
    pieces.add(["not a piece", {"index": 2, "function": "nor this"}])
    parsed = parse_calls(FAMILIES["hermes"], "Sure." + pieces.as_text(), ("echo",))
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [("echo", {"text": "hi there"}), ("echo", {"text": "2"})]
    assert parsed.content == "Sure."


def test_broken_arguments_stay_as_sent() -> None:
    pieces = ToolCallPieces()
    pieces.add([{"index": 0, "function": {"name": "echo", "arguments": '{"text": '}}])
    assert '"arguments": "{\\"text\\": "' in pieces.as_text()


def test_served_by_takes_only_sane_values() -> None:
    sha = "ab" * 32
    assert served_by({"cove-machine": "desk", "cove-model-sha256": sha.upper()}) == {"machine": "desk", "sha256": sha}
    assert served_by({"cove-machine": "desk\x1b[2J", "cove-model-sha256": "xyz"}) == {}
    assert served_by({}) == {}
