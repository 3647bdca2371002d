"""The tool loop of `cove chat` and the window keeps its earlier calls in OpenAI's shape (arguments
as JSON text), and the engine host gives them to the template as objects, so a template's `| tojson`
writes each call once (encoded twice, `"arguments": "{\\"timezone\\": ...}"`, the model copied that
form and the prompt cache re-read its own call); and `cove chat` shows a tool's whole result."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.turn_lines import RESULT_LINES, folded_result
from app.engine.host.templates import GgufTemplate
from app.tools.parsers import Call
from app.turn.tools import assistant_with_calls, tool_message

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_time",
            "description": "Time in a zone",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
        },
    }
]
CALL = Call("call_1", "get_current_time", '{"timezone": "Asia/Tokyo"}')


def _loop_messages() -> list[dict]:
    return [
        {"role": "user", "content": "What time is it in Tokyo?"},
        assistant_with_calls("", [CALL]),
        tool_message(CALL, '{"datetime": "2026-12-06T07:22:22+09:00"}'),
    ]


def test_the_loops_calls_render_once_in_the_template() -> None:
    messages = _loop_messages()
    assert isinstance(messages[1]["tool_calls"][0]["function"]["arguments"], str)  # OpenAI's wire shape, kept
    source = (TEMPLATES / "qwen2.5-instruct.jinja").read_text()
    text = GgufTemplate(source, bos_token="", eos_token="<|im_end|>").render(messages, TOOLS)
    assert '<tool_call>\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>' in text
    assert '\\"timezone\\"' not in text
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"timezone": "Asia/Tokyo"}'  # not changed in place


def test_arguments_that_are_no_json_object_reach_the_template_as_written() -> None:
    source = (TEMPLATES / "qwen2.5-instruct.jinja").read_text()
    for arguments in ("not json", "[1, 2]"):
        odd = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}],
            },
        ]
        text = GgufTemplate(source, bos_token="", eos_token="<|im_end|>").render(odd, TOOLS)
        assert json.dumps(arguments) in text


def test_cove_chat_shows_a_tools_whole_result_folded_past_a_few_lines() -> None:
    assert folded_result("12:00") == " 12:00"
    pretty = json.dumps({"timezone": "Asia/Tokyo", "datetime": "2026-12-06T07:22:22+09:00", "is_dst": False}, indent=2)
    shown = folded_result(pretty)
    assert '"datetime": "2026-12-06T07:22:22+09:00"' in shown and shown.count("\n") == pretty.count("\n") + 2
    long = "\n".join(f"line {i}" for i in range(30))
    folded = folded_result(long)
    assert f"line {RESULT_LINES - 1}" in folded and f"line {RESULT_LINES}" not in folded
    assert f"{30 - RESULT_LINES} more lines" in folded


def _qwen_with_tools():
    from app.engine.host.templates import build_chat_format
    from app.tools.constraint import tools_of

    source = (TEMPLATES / "qwen2.5-instruct.jinja").read_text()
    fmt = build_chat_format(source, architecture="qwen2", has_token=lambda _: True, bos_token="", eos_token="<|im_end|>")
    return fmt.for_tools(tools_of(TOOLS))


def test_a_call_the_model_wrote_fenced_is_rendered_as_it_wrote_it_in_the_loops_next_step() -> None:
    """The loop's next prompt holds the reply's very text (whose tokens the engine kept) where the
    model wrote its call in another form than the template's tag; the API's messages, which carry no
    such text, and a call written in the tag's form render the template's way."""
    fenced = '```json\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n```'
    messages = _loop_messages()
    messages[1] = {**messages[1], "as_written": fenced}
    text = _qwen_with_tools().render(messages).text
    assert f"<|im_start|>assistant\n{fenced}<|im_end|>" in text and '<tool_call>\n{"name": "get_current_time"' not in text
    assert '<tool_response>\n{"datetime"' in text  # the result follows it as before
    plain = _qwen_with_tools().render(_loop_messages()).text
    assert '<tool_call>\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>' in plain
    tagged = {**_loop_messages()[1], "as_written": '<tool_call>\n{"name": "get_current_time"}\n</tool_call>'}
    assert _qwen_with_tools().render([_loop_messages()[0], tagged, _loop_messages()[2]]).text == plain
