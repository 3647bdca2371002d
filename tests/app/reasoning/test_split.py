"""Replies split into reasoning and content, whole and streamed, on replayed real outputs of the
three ways templates think: Qwen3 (`<think>` written by the model), DeepSeek-R1 distills (the
prompt opened `<think>`, only `</think>` appears) and gpt-oss (Harmony's analysis channel). A
stream cut anywhere never lets a partial tag into either part, and joined it equals the whole split."""

from __future__ import annotations

import pytest

from app.reasoning.split import Splitter, split_reply
from app.reasoning.style import MODE_HARMONY, MODE_NONE, MODE_THINK, MODE_THINK_OPEN, mode_of, style_of
from app.tools import harmony

# Outputs as the models write them (Qwen3-0.6B, DeepSeek-R1-Distill-Qwen-1.5B, gpt-oss-20b without
# tools: llama.cpp shows <|channel|>, <|message|>, <|start|> as text and hides the control token <|end|>).
QWEN3 = "<think>\nThe user asks for the capital of France. That is Paris.\n</think>\n\nThe capital of France is Paris."
R1 = "Okay, the user asks for the capital of France.\nIt is Paris.\n</think>\n\nThe capital of France is **Paris**."
GPT_OSS = (
    "<|channel|>analysis<|message|>User asks: capital of France. Answer: Paris.<|start|>assistant"
    "<|channel|>final<|message|>The capital of France is Paris."
)
GPT_OSS_TOOL = (
    "<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'
)

CASES = [
    (MODE_THINK, QWEN3, "The user asks for the capital of France. That is Paris.", "The capital of France is Paris."),
    (MODE_THINK_OPEN, R1, "Okay, the user asks for the capital of France.\nIt is Paris.", "The capital of France is **Paris**."),
    (MODE_HARMONY, GPT_OSS, "User asks: capital of France. Answer: Paris.", "The capital of France is Paris."),
    (MODE_THINK, "Paris.", "", "Paris."),  # Qwen3 with thinking off writes no block at all
    (MODE_NONE, "<think>not a thinking model</think>x", "", "<think>not a thinking model</think>x"),
]


@pytest.mark.parametrize(("mode", "text", "reasoning", "content"), CASES)
def test_a_whole_reply_splits_into_its_reasoning_and_its_answer(mode: str, text: str, reasoning: str, content: str) -> None:
    assert split_reply(mode, text) == (reasoning, content)


@pytest.mark.parametrize(("mode", "text", "reasoning", "content"), CASES)
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_a_streamed_reply_gives_the_same_parts_and_never_a_partial_tag(
    mode: str, text: str, reasoning: str, content: str, size: int
) -> None:
    splitter = Splitter(mode)
    for i in range(0, len(text), size):
        r, c = splitter.more(text[i : i + size])
        for part in (r, c):
            if mode != MODE_NONE:
                assert "<think" not in part and "</thi" not in part and "<|" not in part, (i, part)
    assert (splitter.reasoning, splitter.rest) == (reasoning, content)


def test_a_reply_cut_inside_its_reasoning_is_all_reasoning_and_the_held_tag_settles_at_the_end() -> None:
    cut = "<think>\nLet me count: one, two</thi"
    splitter = Splitter(MODE_THINK)
    splitter.more(cut)
    assert (splitter.reasoning, splitter.rest) == ("Let me count: one, two", "")  # "</thi" held, not shown
    assert split_reply(MODE_THINK, cut) == ("Let me count: one, two</thi", "")


def test_a_tool_reply_of_gpt_oss_keeps_its_analysis_as_reasoning_and_its_markup_for_the_parser() -> None:
    reasoning, rest = split_reply(MODE_HARMONY, GPT_OSS_TOOL, markup=True)
    assert reasoning == "Need the weather tool." and rest == GPT_OSS_TOOL
    read = harmony.read(GPT_OSS_TOOL)
    assert read.calls == (("get_weather", '{"city": "Paris"}'),) and read.content == ""
    splitter = Splitter(MODE_HARMONY, markup=True)
    rests = [splitter.more(GPT_OSS_TOOL[i : i + 4])[1] for i in range(0, len(GPT_OSS_TOOL), 4)]
    assert "".join(rests) == GPT_OSS_TOOL and splitter.reasoning == "Need the weather tool."


def test_the_style_is_read_from_the_real_templates(chat_templates) -> None:
    qwen3, r1, oss, qwen25 = (
        style_of(chat_templates(n))
        for n in ("qwen3.jinja", "deepseek-r1-distill.jinja", "openai-gpt-oss-120b.jinja", "qwen2.5-instruct.jinja")
    )
    assert (qwen3.name, qwen3.switch) == ("think", "enable_thinking")
    assert (r1.name, r1.switch) == ("think", "enable_thinking")  # llama.cpp's copy of the R1 template has the switch
    assert (oss.name, oss.switch) == ("harmony", "reasoning_effort")
    assert not qwen25.thinks
    assert mode_of(r1, "<｜User｜>hi<｜Assistant｜><think>\n") == MODE_THINK_OPEN
    assert mode_of(qwen3, "<|im_start|>assistant\n<think>\n\n</think>\n\n") == MODE_THINK
