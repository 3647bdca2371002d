"""Reasoning through `cove serve` with the official clients, on replayed real outputs: the engine's
reply is a recorded Qwen3 / DeepSeek-R1 / gpt-oss output (a scripted Generation behind the real
LocalBackend interface), so the API, the history and the record see the split the Turn makes:
`reasoning_content` (whole and streamed), Responses' reasoning items, Anthropic's thinking blocks;
the switch each API takes reaches the engine as the template's ask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from app.engine.generation import Generation, StartedInfo
from app.engine.request import ReplyRequest
from app.reasoning.style import MODE_HARMONY, MODE_THINK, MODE_THINK_OPEN
from app.serve.http.runner import ServerThread
from app.statuses import MessageStatus
from app.store.request_log import RequestLog
from app.turn.local_backend import LocalBackend
from tests.app.reasoning.test_split import GPT_OSS, QWEN3, R1
from tests.support.serve_fixture import requests_of, server_thread
from tests.support.tool_turns import split_text


class Script:
    """What the scripted engine writes next, and the reasoning switch each reply was started with."""

    def __init__(self) -> None:
        self.mode, self.text = MODE_THINK, QWEN3
        self.asked: list[str] = []


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Script:
    out = Script()

    def start(self: LocalBackend, request: ReplyRequest, **kwargs: Any) -> Generation:
        out.asked.append(request.reasoning)
        gen = Generation("scripted", lambda g: None)
        gen.set_started(StartedInfo(12, 0, 0, 1.0, "gguf", "", out.mode))
        pieces = split_text(out.text, 3)
        for piece in pieces:
            gen.add_token(piece)
        gen.end(out.text, MessageStatus.COMPLETE, {"prompt_tokens": 12, "gen_tokens": len(pieces)}, None)
        return gen

    monkeypatch.setattr(LocalBackend, "start", start)
    return out


@pytest.fixture
def server(cove_core, script) -> Iterator[ServerThread]:
    with server_thread(cove_core.paths) as thread:
        yield thread


def oai(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.address, api_key="none", max_retries=0)


def test_chat_completions_give_reasoning_content_whole_and_streamed(server, script, cove_core) -> None:
    asked = [{"role": "user", "content": "What is the capital of France?"}]
    whole = oai(server).chat.completions.create(model="tiny-llama", messages=asked, reasoning_effort="high")
    message = whole.choices[0].message
    assert message.content == "The capital of France is Paris."
    assert message.model_extra["reasoning_content"] == "The user asks for the capital of France. That is Paris."
    assert whole.usage.completion_tokens_details.reasoning_tokens > 0
    assert script.asked[-1] == "high"
    parts: dict[str, list[str]] = {"reasoning_content": [], "content": []}
    for chunk in oai(server).chat.completions.create(model="tiny-llama", messages=asked, stream=True):
        delta = chunk.choices[0].delta if chunk.choices else None
        for key in parts:
            value = (
                (delta.model_extra or {}).get(key)
                if delta is not None and key != "content"
                else (delta.content if delta is not None else None)
            )
            if value:
                parts[key].append(value)
    assert "".join(parts["reasoning_content"]) == message.model_extra["reasoning_content"]
    assert "".join(parts["content"]) == message.content
    assert not any("think>" in p for p in parts["content"] + parts["reasoning_content"])
    # The history keeps the reasoning apart from the reply's text, and the record beside it.
    conversation = cove_core.history.list_conversations()[0]
    reply = [m for m in cove_core.history.messages(conversation.id) if m.role == "assistant"][-1]
    assert (reply.content, reply.reasoning) == (message.content, message.model_extra["reasoning_content"])
    assert reply.metrics["reasoning_ms"] >= 0
    entry = requests_of(RequestLog(cove_core.db).entries())[0]
    assert entry["reply"] == message.content
    assert json.loads(entry["closing"]["params"])["reasoning"] == message.model_extra["reasoning_content"]


def test_a_deepseek_r1_reply_opened_by_its_prompt_is_split_at_its_close(server, script) -> None:
    script.mode, script.text = MODE_THINK_OPEN, R1
    reply = oai(server).chat.completions.create(model="tiny-llama", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "The capital of France is **Paris**."
    assert reply.choices[0].message.model_extra["reasoning_content"].startswith("Okay, the user asks")


def test_gpt_oss_without_tools_shows_its_final_channel_never_markup(server, script) -> None:
    script.mode, script.text = MODE_HARMONY, GPT_OSS
    reply = oai(server).chat.completions.create(model="tiny-llama", messages=[{"role": "user", "content": "hi"}], reasoning_effort="low")
    message = reply.choices[0].message
    assert message.content == "The capital of France is Paris."
    assert message.model_extra["reasoning_content"] == "User asks: capital of France. Answer: Paris."
    assert script.asked[-1] == "low"


def test_responses_give_a_reasoning_item_before_the_message(server, script) -> None:
    client = oai(server)
    response = client.responses.create(model="tiny-llama", input="What is the capital of France?", reasoning={"effort": "medium"})
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"]
    assert response.output[0].content[0].text == "The user asks for the capital of France. That is Paris."
    assert response.output_text == "The capital of France is Paris."
    assert response.reasoning.effort == "medium" and script.asked[-1] == "medium"
    deltas, texts = [], []
    with client.responses.stream(model="tiny-llama", input="Again?") as stream:
        for event in stream:
            if event.type == "response.reasoning_text.delta":
                deltas.append(event.delta)
            elif event.type == "response.output_text.delta":
                texts.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == response.output[0].content[0].text and "".join(texts) == response.output_text
    assert [item.type for item in final.output] == ["reasoning", "message"]
    # A reasoning item sent back is read as the assistant's reasoning (the template decides its fate).
    again = client.responses.create(
        model="tiny-llama",
        input=[
            {"role": "user", "content": "hi"},
            response.output[0].model_dump(exclude_none=True),
            {"role": "assistant", "content": "The capital of France is Paris."},
            {"role": "user", "content": "And Italy?"},
        ],
    )
    assert again.status == "completed"


def test_anthropic_messages_give_a_thinking_block_before_the_text(server, script) -> None:
    client = anthropic.Anthropic(base_url=server.address.removesuffix("/v1"), api_key="none", max_retries=0)
    asked = [{"role": "user", "content": "What is the capital of France?"}]
    message = client.messages.create(
        model="tiny-llama", max_tokens=200, messages=asked, thinking={"type": "enabled", "budget_tokens": 2048}
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "The user asks for the capital of France. That is Paris."
    assert message.content[1].text == "The capital of France is Paris."
    assert script.asked[-1] == "low"  # a budget under 4,096 tokens is the low effort
    with client.messages.stream(model="tiny-llama", max_tokens=200, messages=asked) as stream:
        streamed = stream.get_final_message()
    assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in streamed.content] == [
        (b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in message.content
    ]
    # thinking blocks sent back are taken, as the reasoning of that turn
    back = client.messages.create(
        model="tiny-llama",
        max_tokens=50,
        messages=[
            *asked,
            {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {"role": "user", "content": "And Italy?"},
        ],
        thinking={"type": "disabled"},
    )
    assert back.stop_reason == "end_turn" and script.asked[-1] == "none"


def test_a_bad_switch_is_a_400_naming_its_field(server) -> None:
    with pytest.raises(openai.BadRequestError, match="reasoning_effort"):
        oai(server).chat.completions.create(model="tiny-llama", messages=[{"role": "user", "content": "hi"}], reasoning_effort="extreme")  # type: ignore[arg-type]
