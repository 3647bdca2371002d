"""Each family's real template renders tools and tool turns; each family's parser reads outputs
of that family (several calls, a call inside free text) and leaves free text alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.host.templates import GgufTemplate
from app.tools.families import FAMILIES, family_of
from app.tools.parsers import parse_calls

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = {"id": "abc123def", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
TURNS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "abc123def", "name": "get_weather", "content": "sunny"},
]


@pytest.mark.parametrize(
    ("file", "family"),
    [("qwen2.5-instruct.jinja", "hermes"), ("llama-3.2-instruct.jinja", "llama3"), ("mistral-nemo-instruct-2407.jinja", "mistral")],
)
def test_real_templates_render_tools_and_results(file: str, family: str) -> None:
    source = (TEMPLATES / file).read_text()
    assert family_of(source).name == family
    turns = TURNS if family != "mistral" else TURNS[1:]
    text = GgufTemplate(source, bos_token="<s>", eos_token="</s>").render(turns, TOOLS)
    assert "get_weather" in text and "sunny" in text and "Oslo" in text


def args(parsed: object) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in parsed.calls]  # type: ignore[attr-defined]


def test_hermes_several_calls_and_a_call_in_free_text() -> None:
    text = (
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'
    )
    parsed = parse_calls(FAMILIES["hermes"], text)
    assert args(parsed) == [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lima"})]
    assert parsed.content == "Let me check."
    assert parse_calls(FAMILIES["hermes"], "Just text {not a call}").calls == ()


def test_llama3_json_calls() -> None:
    parsed = parse_calls(FAMILIES["llama3"], '{"name": "get_weather", "parameters": {"city": "Oslo"}}')
    assert args(parsed) == [("get_weather", {"city": "Oslo"})]
    two = parse_calls(FAMILIES["llama3"], 'Sure: {"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}')
    assert args(two) == [("a", {}), ("b", {"x": 1})] and two.content == "Sure:"
    assert parse_calls(FAMILIES["llama3"], 'The JSON {"a": 1} is data.').calls == ()


def test_mistral_tool_calls() -> None:
    text = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "t", "arguments": {}}]'
    assert args(parse_calls(FAMILIES["mistral"], text)) == [("get_weather", {"city": "Oslo"}), ("t", {})]
    hidden = parse_calls(FAMILIES["mistral"], '[{"name": "t", "arguments": {"k": "v"}}]')  # the marker is a control token
    assert args(hidden) == [("t", {"k": "v"})]
    assert parse_calls(FAMILIES["mistral"], "[1, 2] are numbers").calls == ()


def test_broken_calls_stay_content() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>'
    parsed = parse_calls(FAMILIES["hermes"], text)
    assert parsed.calls == () and parsed.content == text


def test_a_closing_tag_inside_an_argument_does_not_end_the_call() -> None:
    text = '<tool_call>\n{"name": "write", "arguments": {"text": "an example: <tool_call>x</tool_call> done"}}\n</tool_call>\nafter'
    parsed = parse_calls(FAMILIES["hermes"], text)
    assert args(parsed) == [("write", {"text": "an example: <tool_call>x</tool_call> done"})]
    assert parsed.content == "after"
    # Text after the object that is not the closing tag: not a call of this format.
    loose = '<tool_call>{"name": "write", "arguments": {}} and more</tool_call>'
    assert parse_calls(FAMILIES["hermes"], loose).calls == ()
