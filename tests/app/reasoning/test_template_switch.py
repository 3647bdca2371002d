"""The reasoning switch rendered by the real templates in the engine host's sandbox
(app/engine/host/templates.py): Qwen3's `enable_thinking`, gpt-oss's `Reasoning: low|medium|high`,
the DeepSeek-R1 distill's opened `<think>`; a switch the template cannot honour is refused with a
sentence; a reply's reasoning reaches the prompt only where the template puts it."""

from __future__ import annotations

import pytest

from app.engine.host.templates import build_chat_format
from app.reasoning.style import MODE_HARMONY, MODE_NONE, MODE_THINK, MODE_THINK_OPEN
from app.reasoning.switch import ReasoningRefused
from app.tools.spec import Tool

ASK = [{"role": "user", "content": "What is the capital of France?"}]


def chat_format(source: str):
    return build_chat_format(source, architecture="llama", has_token=lambda _: False, bos_token="", eos_token="")


def test_qwen3_with_thinking_off_renders_an_empty_think_block(chat_templates) -> None:
    fmt = chat_format(chat_templates("qwen3.jinja"))
    on, off = fmt.for_reasoning("").render(ASK), fmt.for_reasoning("none").render(ASK)
    assert on.text.endswith("<|im_start|>assistant\n")
    assert off.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert fmt.for_reasoning("high").render(ASK).text == on.text  # Qwen3 thinks or not; it has no effort
    assert fmt.reasoning_mode(on) == MODE_THINK and fmt.reasoning_mode(off) == MODE_THINK


def test_gpt_oss_renders_the_effort_asked_in_its_system_message(chat_templates) -> None:
    fmt = chat_format(chat_templates("openai-gpt-oss-120b.jinja"))
    assert "Reasoning: medium" in fmt.render(ASK).text  # the template's own default
    low = fmt.for_reasoning("low").render(ASK)
    assert "Reasoning: low" in low.text and "Reasoning: medium" not in low.text
    assert "Reasoning: high" in fmt.for_reasoning("high").render(ASK).text
    assert fmt.reasoning_mode(low) == MODE_HARMONY
    with pytest.raises(ReasoningRefused, match="always reasons"):
        fmt.for_reasoning("none")


def test_the_deepseek_r1_distill_opens_its_thinking_in_the_prompt(chat_templates) -> None:
    fmt = chat_format(chat_templates("deepseek-r1-distill.jinja"))
    opened = fmt.render(ASK)
    assert opened.text.endswith("<｜Assistant｜><think>\n") and fmt.reasoning_mode(opened) == MODE_THINK_OPEN
    closed = fmt.for_reasoning("none").render(ASK)  # llama.cpp's copy closes it when enable_thinking is false
    assert closed.text.endswith("<think>\n</think>") and fmt.reasoning_mode(closed) == MODE_THINK


def test_a_template_without_reasoning_refuses_an_effort_and_takes_none(chat_templates) -> None:
    fmt = chat_format(chat_templates("qwen2.5-instruct.jinja"))
    assert fmt.for_reasoning("none").render(ASK).text == fmt.render(ASK).text
    assert fmt.reasoning_mode(fmt.render(ASK)) == MODE_NONE
    with pytest.raises(ReasoningRefused, match="does not reason"):
        fmt.for_reasoning("low")
    fallback = build_chat_format(None, architecture="llama", has_token=lambda _: False, bos_token="", eos_token="")
    with pytest.raises(ReasoningRefused):
        fallback.for_reasoning("high")


def test_a_replys_reasoning_reaches_the_prompt_only_where_the_template_puts_it(chat_templates) -> None:
    turns = [
        *ASK,
        {"role": "assistant", "content": "Paris.", "reasoning": "The user asks; Paris."},
        {"role": "user", "content": "And of Italy?"},
    ]
    qwen3 = chat_format(chat_templates("qwen3.jinja")).render(turns).text
    assert "The user asks; Paris." not in qwen3 and "Paris." in qwen3  # Qwen3 drops the reasoning of earlier turns
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    step = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning": "Need the weather."},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
    ]

    tool = Tool("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}})
    oss = chat_format(chat_templates("openai-gpt-oss-120b.jinja")).for_tools((tool,)).render(step).text
    assert "<|channel|>analysis<|message|>Need the weather.<|end|>" in oss  # gpt-oss keeps a call's analysis
    qwen3_step = chat_format(chat_templates("qwen3.jinja")).for_tools((tool,)).render(step).text
    assert "<think>\nNeed the weather.\n</think>" in qwen3_step  # and Qwen3 the reasoning after the last question
