"""The reasoning switch end to end on the real engine host: the tiny random-weight model with real
templates (Qwen3, the DeepSeek-R1 distill, Qwen 2.5), through `cove serve` and the `openai` and
`anthropic` clients. What the template rendered shows in the prompt's token count (Qwen3 with
thinking off adds `<think>\\n\\n</think>\\n\\n`); the R1 prompt opens the thinking, so the host says
the reply starts in it and the whole reply (the tiny model never closes it) is reasoning; a switch
the template cannot honour is a 400 with the sentence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from app.serve.http.runner import ServerThread
from tests.support.serve_fixture import server_thread
from tests.support.tiny_model import write_tiny_gguf

TEMPLATES = Path(__file__).resolve().parents[3] / "data" / "chat_templates"
ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def server(cove_core, tmp_path: Path) -> Iterator[ServerThread]:
    for name, template in (("qwen3", "qwen3.jinja"), ("r1", "deepseek-r1-distill.jinja"), ("qwen25", "qwen2.5-instruct.jinja")):
        path = write_tiny_gguf(tmp_path / f"{name}.gguf", chat_template=(TEMPLATES / template).read_text(), n_ctx_train=1024)
        cove_core.library.import_file(path, name=name)
    with server_thread(cove_core.paths) as thread:
        yield thread


def test_reasoning_effort_none_renders_qwen3s_empty_think_block(server) -> None:
    client = openai.OpenAI(base_url=server.address, api_key="none", max_retries=0)
    on = client.chat.completions.create(model="qwen3", messages=ASK, max_tokens=1, temperature=0)
    off = client.chat.completions.create(model="qwen3", messages=ASK, max_tokens=1, temperature=0, reasoning_effort="none")
    thinking_off = client.chat.completions.create(
        model="qwen3", messages=ASK, max_tokens=1, temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}}
    )
    # "<think>\n\n</think>\n\n" is 19 characters; the tiny model's vocabulary spells them in at least 4 tokens
    assert off.usage.prompt_tokens - on.usage.prompt_tokens >= 4
    assert thinking_off.usage.prompt_tokens == off.usage.prompt_tokens


def test_a_deepseek_r1_reply_starts_in_its_reasoning(server) -> None:
    client = openai.OpenAI(base_url=server.address, api_key="none", max_retries=0)
    reply = client.chat.completions.create(model="r1", messages=ASK, max_tokens=12, temperature=0)
    message = reply.choices[0].message
    assert message.model_extra["reasoning_content"] and not message.content  # never closed: all reasoning
    streamed = [
        c.choices[0].delta
        for c in client.chat.completions.create(model="r1", messages=ASK, max_tokens=12, temperature=0, stream=True)
        if c.choices
    ]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in streamed) == message.model_extra["reasoning_content"]
    assert not "".join(d.content or "" for d in streamed)


def test_an_effort_the_template_cannot_honour_is_a_400_with_a_sentence(server) -> None:
    client = openai.OpenAI(base_url=server.address, api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="does not reason") as refused:
        client.chat.completions.create(model="qwen25", messages=ASK, max_tokens=2, reasoning_effort="high")
    assert refused.value.body["param"] == "reasoning_effort"
    with pytest.raises(openai.BadRequestError, match="'reasoning'"):
        client.responses.create(model="qwen25", input="hi", max_output_tokens=16, reasoning={"effort": "low"})
    claude = anthropic.Anthropic(base_url=server.address.removesuffix("/v1"), api_key="none", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        claude.messages.create(model="qwen25", max_tokens=4, messages=ASK, thinking={"type": "enabled", "budget_tokens": 1024})
    # "none" asks nothing a template without reasoning cannot do
    ok = client.chat.completions.create(model="qwen25", messages=ASK, max_tokens=2, temperature=0, reasoning_effort="none")
    assert ok.choices[0].finish_reason == "length"
