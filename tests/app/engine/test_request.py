"""The typed reply request (app/engine/request.py): messages from the dicts the history and the APIs
read, and the one function that writes the engine pipe's message."""

from __future__ import annotations

from dataclasses import fields

import pytest

from app.engine import protocol
from app.engine.request import ChatMessage, ReplyRequest, Sampling, TextPart, ToolOffer, generate_message
from app.settings import SamplingParams

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}


def test_a_dict_message_keeps_its_tool_fields_and_text() -> None:
    m = ChatMessage.from_dict({"role": "assistant", "content": "sum", "tool_calls": [CALL], "reasoning": "think", "extra": 1})
    assert m.text == "sum" and m.tool_calls == (CALL,) and m.reasoning == "think"
    assert m.to_dict() == {"role": "assistant", "content": "sum", "tool_calls": [CALL], "reasoning": "think"}
    result = ChatMessage.from_dict({"role": "tool", "content": "3", "tool_call_id": "c1", "name": "add"})
    assert result.to_dict() == {"role": "tool", "content": "3", "tool_call_id": "c1", "name": "add"}


def test_content_as_parts_becomes_text_parts() -> None:
    m = ChatMessage.from_dict({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    assert m.parts == (TextPart("a"), TextPart("b")) and m.to_dict()["content"] == "ab"
    assert ChatMessage.from_dict({"role": "user", "content": None}).to_dict() == {"role": "user", "content": ""}


def test_the_pipe_message_carries_every_field_of_the_request() -> None:
    request = ReplyRequest.chat(
        [{"role": "user", "content": "hi"}],
        sampling=Sampling(max_tokens=7, temperature=0.3, top_k=5, seed=9, logit_bias=((4, -1.5),)),
        conversation_id="c",
        stop=["\n"],
        grammar="root ::= x",
        tools=ToolOffer(({"type": "function", "function": {"name": "add"}},), choice="required", name="add", parallel=False),
        keep_all_turns=True,
        speculative="off",
        priority="window",
        reasoning="none",
    )
    msg = generate_message(request, "g1")
    assert isinstance(msg, protocol.Generate)
    assert (msg.request_id, msg.conversation_id, msg.messages) == ("g1", "c", [{"role": "user", "content": "hi"}])
    assert (msg.max_tokens, msg.temperature, msg.top_k, msg.seed, msg.logit_bias) == (7, 0.3, 5, 9, [[4, -1.5]])
    assert (msg.stop, msg.grammar, msg.keep_all_turns, msg.speculative, msg.priority, msg.reasoning) == (
        ["\n"],
        "root ::= x",
        True,
        "off",
        "window",
        "none",
    )
    assert (msg.tools, msg.tool_choice, msg.tool_name, msg.parallel_tool_calls) == (
        [{"type": "function", "function": {"name": "add"}}],
        "required",
        "add",
        False,
    )


def test_a_request_without_tools_sends_the_protocol_defaults() -> None:
    msg = generate_message(ReplyRequest(prompt_tokens=(1, 2)), "g2")
    default = protocol.Generate("g2", None, [])
    for f in fields(protocol.Generate):
        if f.name not in ("prompt_tokens",):
            assert getattr(msg, f.name) == getattr(default, f.name), f.name
    assert msg.prompt_tokens == [1, 2]


def test_the_settings_sampling_is_the_requests() -> None:
    params = SamplingParams(temperature=0.2, max_tokens=33, seed=4, presence_penalty=0.5, logit_bias=((1, 2.0),))
    s = params.sampling()
    assert (s.temperature, s.max_tokens, s.seed, s.presence_penalty, s.logit_bias) == (0.2, 33, 4, 0.5, ((1, 2.0),))


def test_a_request_is_frozen_and_changed_by_copy() -> None:
    request = ReplyRequest.chat([{"role": "user", "content": "a"}])
    later = request.but(messages=[{"role": "user", "content": "b"}], stop=["x"])
    assert request.messages[0].text == "a" and later.messages[0].text == "b" and later.stop == ("x",)
    with pytest.raises(AttributeError):
        request.grammar = "x"  # type: ignore[misc]
