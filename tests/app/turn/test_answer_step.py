"""The last reply of a tool loop that cannot go on (app/turn/answer_step.py): the prompt it is
given (the calls that worked, without those that failed), and the grammar that keeps its first
character from opening a call, applied by the real engine to the tiny model pushed towards '{'."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine.client import EngineClient
from app.engine.request import ReplyRequest, Sampling
from app.turn.answer_step import NO_CALL_FIRST, answer_messages
from tests.support.tiny_model import tiny_vocab


def call(call_id: str, name: str = "get_time") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


USER = {"role": "user", "content": "What time is it in Tokyo?"}


def test_the_answer_is_given_the_calls_that_worked_and_not_those_that_failed() -> None:
    both = {
        "role": "assistant",
        "content": "",
        "tool_calls": [call("a"), call("b", "convert_time")],
        "as_written": "<tool_call>…</tool_call><tool_call>…</tool_call>",
    }
    failed_only = {"role": "assistant", "content": "", "tool_calls": [call("c", "convert_time")], "as_written": "{…}"}
    sent = [USER, both, result("a", "10:25"), result("b", "error"), failed_only, result("c", "error")]
    kept = answer_messages(sent, {"b", "c"})
    # The reply that made both keeps the call that worked, rendered from its calls (its text held both).
    assert kept == [USER, {"role": "assistant", "content": "", "tool_calls": [call("a")]}, result("a", "10:25")]
    assert sent[1]["as_written"] and len(sent[1]["tool_calls"]) == 2  # the turn's own prompt is untouched


def test_a_reply_that_said_something_beside_a_failed_call_keeps_its_words() -> None:
    spoke = {"role": "assistant", "content": "Let me convert it.", "tool_calls": [call("b", "convert_time")]}
    sent = [USER, {"role": "assistant", "content": "", "tool_calls": [call("a")]}, result("a", "10:25"), spoke, result("b", "error")]
    assert answer_messages(sent, {"b"})[3:] == [{"role": "assistant", "content": "Let me convert it."}]


def test_when_no_call_worked_the_errors_are_what_the_answer_is_given() -> None:
    sent = [USER, {"role": "assistant", "content": "", "tool_calls": [call("a")]}, result("a", "the server is down")]
    assert answer_messages(sent, {"a"}) == sent


# ---- the grammar, on the real engine ------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=1)
        yield client


@pytest.mark.timeout(60)
def test_the_answer_cannot_open_a_call_and_is_free_after_its_first_character(engine: EngineClient) -> None:
    tokens = tiny_vocab()[0]
    openers = [(tokens.index(f"<0x{ord(c):02X}>"), 30.0) for c in "{[`"]  # each as its byte token
    messages = [{"role": "user", "content": "What time is it?"}]
    pushed = Sampling(max_tokens=8, temperature=0.0, logit_bias=tuple(openers))
    free = engine.generate(ReplyRequest.chat(messages, sampling=pushed)).wait()
    assert free.text.lstrip()[:1] in ("{", "[", "`"), free.text  # pushed, the model opens with one
    held = engine.generate(ReplyRequest.chat(messages, sampling=pushed, grammar=NO_CALL_FIRST)).wait()
    first = held.text.lstrip()[:1]
    assert first and first not in ("{", "[", "`"), held.text
    assert any(c in held.text for c in "{[`"), held.text  # after its first character the reply is free
