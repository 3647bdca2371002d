"""Tool use on Anthropic's /v1/messages with the official anthropic client: the tiny random-weight
model with a Qwen 2.5 chat template, calls forced by tool_choice (any, or a named tool) and so made
under the tools' grammar, checked against their schemas with jsonschema; tool_result turns (text,
a list of text blocks, is_error) answered; a stream reassembled equals the whole reply; the record
keeps the parsed calls beside the raw output (here and on /v1/chat/completions); count_tokens
counts the tools; a prompt over the context in Anthropic's words; bad input refused naming the field."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import anthropic
import httpx
import jsonschema
import openai
import pytest

from app.serve.api.anthropic_api import too_long
from app.serve.api.job import chat_job
from app.serve.api.messages_request import read_messages_request
from app.serve.api.service import refuse_what_cannot_fit
from app.serve.http.errors import ApiError
from app.tools.anthropic import BlockStream, content_blocks
from app.tools.reply import ContentGate, family_named, reply_of
from models.library import InstalledModel
from tests.app.tools.test_serve_tools_openai import TEMPLATES, WEATHER, add_model
from tests.support.serve_fixture import Served, cove_serve

TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER},
    {"name": "get_time", "description": "The time in a zone", "input_schema": TIME},
]
SCHEMAS = {t["name"]: t["input_schema"] for t in TOOLS}
GREEDY = {"temperature": 0}
TOO_LONG = re.compile(r"^prompt is too long: (\d+) tokens > (\d+) maximum")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    with cove_serve(tmp_path_factory.mktemp("tools-anthropic")) as s:
        yield s, add_model(s, "qwentools", (TEMPLATES / "qwen2.5-instruct.jinja").read_text())


def client(s: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0, timeout=120)


def tool_uses(message: anthropic.types.Message) -> list[Any]:
    return [b for b in message.content if b.type == "tool_use"]


def test_a_loop_of_three_forced_calls_with_tool_results_valid_against_the_schemas(served: tuple[Served, str]) -> None:
    s, model = served
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather, and the time?"}]
    choices: list[dict[str, Any]] = [
        {"type": "any", "disable_parallel_tool_use": True},
        {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
        {"type": "any", "disable_parallel_tool_use": True},
    ]
    results: list[dict[str, Any]] = [
        {"content": "sunny, 21 C"},  # text, an error, a list of text blocks
        {"content": "the clock is broken", "is_error": True},
        {"content": [{"type": "text", "text": "12:00 "}, {"type": "text", "text": "UTC"}]},
    ]
    for step in range(3):
        reply = client(s).messages.create(
            model=model, max_tokens=200, messages=messages, tools=TOOLS, tool_choice=choices[step], extra_body=GREEDY
        )  # type: ignore[arg-type]
        assert reply.stop_reason == "tool_use", reply.content
        calls = tool_uses(reply)
        assert len(calls) == 1 and calls[0].id.startswith("toolu_")  # parallel calls off: one
        call = calls[0]
        if step == 1:
            assert call.name == "get_time"  # the named tool, not just any
        jsonschema.validate(call.input, SCHEMAS[call.name])
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, **results[step]}]})
    final = client(s).messages.create(
        model=model, max_tokens=5, messages=messages, tools=TOOLS, tool_choice={"type": "none"}, extra_body=GREEDY
    )
    assert final.stop_reason in ("end_turn", "max_tokens") and [b.type for b in final.content] == ["text"]
    # With "auto" the grammar waits for the family's opener; the random model writes text: never nothing.
    auto = client(s).messages.create(
        model=model, max_tokens=8, tools=TOOLS, extra_body=GREEDY, messages=[*messages, {"role": "user", "content": "Thanks"}]
    )
    assert auto.content and all(b.type in ("text", "tool_use") for b in auto.content)
    assert auto.content[0].type == "tool_use" or auto.content[0].text  # type: ignore[union-attr]


def test_a_streamed_call_reassembles_into_the_whole_one(served: tuple[Served, str]) -> None:
    s, model = served
    args: dict[str, Any] = dict(
        model=model,
        max_tokens=200,
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body=GREEDY,
    )
    whole = client(s).messages.create(**args)
    kinds: list[str] = []
    with client(s).messages.stream(**args) as stream:
        for event in stream:
            kinds.append(event.type if event.type != "content_block_delta" else event.delta.type)
        final = stream.get_final_message()
    assert "input_json_delta" in kinds and "text_delta" not in kinds
    assert final.stop_reason == whole.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in tool_uses(final)] == [(b.name, b.input) for b in tool_uses(whole)]
    assert [b.type for b in final.content] == [b.type for b in whole.content]
    assert all(b.id.startswith("toolu_") for b in tool_uses(final))
    jsonschema.validate(tool_uses(final)[0].input, WEATHER)


def test_the_record_keeps_the_parsed_calls_beside_the_raw_output_on_both_endpoints(served: tuple[Served, str]) -> None:
    s, model = served
    reply = client(s).messages.create(
        model=model,
        max_tokens=200,
        messages=[{"role": "user", "content": "Time?"}],
        tools=TOOLS,
        tool_choice={"type": "any"},
        extra_body=GREEDY,
    )
    entry = s.requests()[-1]
    assert entry["endpoint"] == "/v1/messages" and "<tool_call>" in entry["reply"]  # the model's raw output
    kept = json.loads(entry["closing"]["params"])["tool_calls"]
    assert kept == [{"id": b.id, "name": b.name, "arguments": b.input} for b in tool_uses(reply)]
    assert json.loads(entry["params"])["tool_choice"]["mode"] == "required"

    oa = openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0)
    done = oa.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Weather?"}],
        max_tokens=200,
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
        tool_choice="required",
        temperature=0,
    )
    calls = done.choices[0].message.tool_calls or []
    entry = s.requests()[-1]
    assert entry["endpoint"] == "/v1/chat/completions" and "<tool_call>" in entry["reply"]
    assert json.loads(entry["closing"]["params"])["tool_calls"] == [
        {"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)} for c in calls
    ]
    assert calls


def test_count_tokens_counts_the_tools(served: tuple[Served, str]) -> None:
    s, model = served
    ask: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "What is the weather?"}]}
    plain = client(s).messages.count_tokens(**ask).input_tokens
    with_tools = client(s).messages.count_tokens(**ask, tools=TOOLS).input_tokens  # type: ignore[arg-type]
    assert with_tools > plain > 0


def test_a_prompt_over_the_context_says_prompt_is_too_long_whole_or_streamed(served: tuple[Served, str]) -> None:
    s, model = served
    long = [{"role": "user", "content": "hello world " * 5000}]  # about 10,000 tokens; the context holds 4,096
    with pytest.raises(anthropic.BadRequestError) as caught:
        client(s).messages.create(model=model, max_tokens=5, messages=long, tools=TOOLS)
    with (
        pytest.raises(anthropic.BadRequestError) as streamed,
        client(s).messages.stream(model=model, max_tokens=5, messages=long) as stream,
    ):
        list(stream.text_stream)
    for error in (caught.value, streamed.value):
        assert error.body["type"] == "error" and error.body["error"]["type"] == "invalid_request_error"
        found = TOO_LONG.match(error.body["error"]["message"])
        assert found and int(found.group(2)) == 4096 and int(found.group(1)) > 4096, error.body


def test_a_prompt_refused_before_it_is_counted_says_so_in_anthropics_words_too() -> None:
    req = read_messages_request({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 300_000}]})
    job = chat_job("/v1/messages", _model(), req, format_field="output_format")
    with pytest.raises(ApiError) as caught:
        refuse_what_cannot_fit(job, 1024)
    found = TOO_LONG.match(too_long(caught.value.message))
    assert found and int(found.group(2)) == 1024 and int(found.group(1)) > 1024


def _model() -> InstalledModel:
    return cast(InstalledModel, SimpleNamespace(name="m", context_length=1024))


HI = [{"role": "user", "content": "hi"}]
CALLED = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "get_time", "input": {"zone": "UTC"}}]},
]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tools": [{"description": "no name", "input_schema": {"type": "object"}}]}, "tools.0.name"),
        ({"tools": [{"name": "f", "input_schema": {"type": "string"}}]}, "tools.0"),
        ({"tools": [{"name": "f", "input_schema": "object"}]}, "tools.0"),
        ({"tools": TOOLS, "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
        ({"tools": [{"name": f"f{i}", "input_schema": {"type": "object"}} for i in range(129)]}, "tools"),
        (
            {
                "tools": TOOLS,
                "messages": [
                    *CALLED,
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "12:00"}]},
                ],
            },
            "messages.2.content.0.tool_use_id",
        ),
        (
            {
                "messages": [
                    *HI,
                    {
                        "role": "assistant",
                        "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}],
                    },
                    *HI,
                ]
            },
            "messages.1.content.0",
        ),
        (
            {
                "tools": TOOLS,
                "messages": [
                    *CALLED,
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "image", "source": {}}]}],
                    },
                ],
            },
            "messages.2.content.0.content.0",
        ),
    ],
)
def test_bad_tool_input_is_a_400_in_anthropics_shape_naming_the_field(served: tuple[Served, str], body: dict, field: str) -> None:
    s, model = served
    answer = httpx.post(f"{s.url}/v1/messages", json={"model": model, "max_tokens": 5, "messages": HI, **body}, timeout=60)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(field + ":"), error


def test_tool_turns_become_the_chat_templates_messages() -> None:
    req = read_messages_request(
        {
            "model": "m",
            "max_tokens": 5,
            "system": "Be brief.",
            "tools": TOOLS,
            "tool_choice": {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
            "messages": [
                *CALLED[:1],
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "toolu_a", "name": "get_time", "input": {"zone": "UTC"}},
                        {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Lima", "days": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "12:00"}]},
                        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "down", "is_error": True},
                        {"type": "text", "text": "And tomorrow?"},
                    ],
                },
            ],
        }
    )
    assert req.tools is not None and req.tools.choice.mode == "required" and req.tools.choice.name == "get_time"
    assert not req.tools.choice.parallel
    assert req.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "toolu_a", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}},
                {"id": "toolu_b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lima", "days": 1}}},
            ],
        },
        {"role": "tool", "content": "12:00", "tool_call_id": "toolu_a", "name": "get_time"},
        {"role": "tool", "content": "Error: down", "tool_call_id": "toolu_b", "name": "get_weather"},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_a_streamed_call_is_anthropics_sequence_of_events(served: tuple[Served, str]) -> None:
    s, model = served
    body = {
        "model": model,
        "max_tokens": 200,
        "stream": True,
        "messages": [{"role": "user", "content": "Time?"}],
        "tools": TOOLS,
        "tool_choice": {"type": "tool", "name": "get_time"},
        **GREEDY,
    }
    response = httpx.post(f"{s.url}/v1/messages", json=body, timeout=120)
    assert response.status_code == 200
    events = [block.split("\n", 1) for block in response.text.strip().split("\n\n")]
    names = [name.removeprefix("event: ") for name, _ in events]
    data = [json.loads(line.removeprefix("data: ")) for _, line in events]
    pieces = names.count("content_block_delta")
    assert (
        names
        == [
            "message_start",
            "ping",
            "content_block_start",
            *["content_block_delta"] * pieces,
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        and pieces >= 1
    )
    block = data[2]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "get_time" and block["id"].startswith("toolu_")
    assert block["input"] == {} and data[2]["index"] == 0
    assert all(d["delta"]["type"] == "input_json_delta" and d["index"] == 0 for d in data[3 : 3 + pieces])
    jsonschema.validate(json.loads("".join(d["delta"]["partial_json"] for d in data[3 : 3 + pieces])), TIME)
    assert data[-2]["delta"]["stop_reason"] == "tool_use"


def test_a_call_that_breaks_its_schema_is_a_tool_use_as_written() -> None:
    tools = read_messages_request({"model": "m", "max_tokens": 5, "messages": HI, "tools": TOOLS}).tools
    assert tools is not None
    raw = 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "Mars"}}\n</tool_call>'
    bad = reply_of(tools, {"tool_format": "hermes"}, raw, "toolu_")
    assert bad.problem and content_blocks(bad, raw) == [
        {"type": "text", "text": "Sure."},
        {"type": "tool_use", "id": bad.calls[0].id, "name": "get_time", "input": {"zone": "Mars"}},
    ]
    good_raw = raw.replace("Mars", "CET")
    good = reply_of(tools, {"tool_format": "hermes"}, good_raw, "toolu_")
    assert content_blocks(good, good_raw) == [
        {"type": "text", "text": "Sure."},
        {"type": "tool_use", "id": good.calls[0].id, "name": "get_time", "input": {"zone": "CET"}},
    ]
    assert good.calls[0].id.startswith("toolu_")
    events = list(BlockStream(ContentGate(family_named("hermes"))).end(None, raw))  # no call that parsed
    assert [n for n, _ in events] == ["content_block_start", "content_block_delta", "content_block_stop"]
    assert events[1][1]["delta"] == {"type": "text_delta", "text": raw}
    nothing = list(BlockStream(ContentGate(family_named("hermes"))).end(None, ""))
    assert [n for n, _ in nothing] == ["content_block_start", "content_block_stop"]  # never no content
