"""A forced tool call in the generic format, as its grammar makes the model write it, re-renders
byte for byte in the next prompt (a base model's Q:/A: transcript), so an agent loop's earlier
replies come from the KV cache (found by bench/tools.py: each step evaluated its last reply again)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine.client import EngineClient
from app.engine.host.templates import build_chat_format
from app.engine.request import ReplyRequest, Sampling, ToolOffer
from app.tools.constraint import tools_of
from app.tools.families import FAMILIES
from app.tools.grammar import tool_call_grammar
from app.tools.parsers import parse_calls

BASE_META = {"general.name": "Gemma 3 270m", "general.basename": "gemma-3", "general.architecture": "gemma3"}
WEATHER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "days", "metric"],
    "properties": {
        "city": {"type": "string", "maxLength": 6},
        "days": {"type": "integer", "enum": [1, 2, 3]},
        "metric": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
    },
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": WEATHER}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def _qa():
    fmt = build_chat_format(
        None,
        architecture="gemma3",
        has_token=lambda t: False,
        bos_token="<bos>",
        eos_token="<eos>",
        metadata=BASE_META,
        file_name="gemma-3-270m-q4_k_m.gguf",
    )
    assert fmt.source == "fallback:qa"
    return fmt


def _after(reply: str, arguments_as_text: bool) -> list[dict[str, Any]]:
    """The conversation once `reply`'s calls are made and answered, as a client sends it back."""
    calls = parse_calls(FAMILIES["generic"], reply).calls
    assert calls
    wire = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments if arguments_as_text else json.loads(c.arguments)},
        }
        for c in calls
    ]
    return [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": wire},
        *({"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in calls),
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_a_base_transcripts_forced_call_starts_with_the_space_after_the_label_and_is_json_dumps_shaped() -> None:
    family = _qa().tool_family
    assert family.name == "generic" and family.lead == " "
    gbnf = tool_call_grammar(tools_of(TOOLS), family, name=None, parallel=True, after_opener=False)
    assert 'root ::= " " "<tool_call>" call-rest' in gbnf
    assert "space" not in gbnf and '"\\n"?' not in gbnf  # no free whitespace anywhere
    assert '"," " "' in gbnf and '":" " "' in gbnf  # json.dumps' separators
    assert "\\\\/" not in gbnf  # no escape json.dumps does not write
    lazy = tool_call_grammar(tools_of(TOOLS), family, name=None, parallel=True, after_opener=True)
    assert "root ::= call-rest" in lazy  # auto mode: the model writes what precedes the opener


def test_other_families_keep_their_grammar() -> None:
    hermes = tool_call_grammar(tools_of(TOOLS), FAMILIES["hermes"], name=None, parallel=True, after_opener=False)
    assert 'root ::= "<tool_call>" call-rest' in hermes and '"\\n"?' in hermes and "space ::=" in hermes
    assert FAMILIES["generic"].lead == ""
    chatml = build_chat_format(
        None,
        architecture="qwen2",
        has_token=lambda t: False,
        bos_token="",
        eos_token="",
        metadata={"general.name": "Qwen2.5 0.5B Instruct"},
        file_name="q.gguf",
    )
    assert chatml.source == "fallback:chatml" and chatml.tool_family.lead == ""  # its reply follows a line end


@pytest.mark.parametrize("arguments_as_text", [False, True])
@pytest.mark.parametrize(
    "args",
    [
        {"city": "Paris", "days": 2, "metric": True},
        {"city": "Zürich", "days": 1, "metric": False, "tags": ['a "b"', "c\\d\n"]},
        {"city": "", "days": 3, "metric": True, "tags": []},
    ],
)
def test_a_forced_call_as_the_grammar_writes_it_re_renders_byte_for_byte(args: dict[str, Any], arguments_as_text: bool) -> None:
    fmt = _qa().for_tools(tools_of(TOOLS))
    prompt = fmt.render(ASK).text
    assert prompt.endswith("\nA:")
    # What the grammar allows, and the only thing: the lead, the opener, a line end, the JSON with
    # json.dumps' spacing and escapes, a line end, the closing tag.
    reply = ' <tool_call>\n{"name": "get_weather", "arguments": ' + json.dumps(args, ensure_ascii=False) + "}\n</tool_call>"
    follow = fmt.render(_after(reply, arguments_as_text)).text
    assert follow.startswith(prompt + reply)


# ---- the real engine with the tiny test model (a base model: Q:/A:), forced to call ------------


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_what_the_engine_samples_under_the_forced_grammar_re_renders_byte_for_byte(
    engine: EngineClient, tiny_gguf: Path, seed: int
) -> None:
    """The grammar as llama.cpp's sampler applies it (the random model writes whatever it allows).
    The KV cache itself is not checked here: the tiny model's SentencePiece tokenizer splits the
    text after a reply differently alone than in the whole prompt, so its prompts are tokenized
    whole and the random model's token splits never match; bench/tools.py measures it on the starter."""
    assert engine.load(tiny_gguf, n_threads=1, n_ctx=2048).template_source == "fallback:qa"  # tools: ~600 tokens
    first = engine.generate(
        ReplyRequest.chat(
            ASK,
            sampling=Sampling(max_tokens=200, temperature=1.0, seed=seed),
            tools=ToolOffer(tuple(TOOLS), choice="required", parallel=False),
        )
    ).wait()
    assert first.metrics["stop_reason"] == "stop" and first.metrics["tool_format"] == "generic"
    assert first.text.startswith(' <tool_call>\n{"name": "get_weather", "arguments": {')
    fmt = _qa().for_tools(tools_of(TOOLS))
    for arguments_as_text in (False, True):
        assert fmt.render(_after(first.text, arguments_as_text)).text.startswith(fmt.render(ASK).text + first.text)
