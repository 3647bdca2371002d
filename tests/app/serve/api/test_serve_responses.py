"""OpenAI's Responses API (POST /v1/responses) on a real `cove serve`, with the official `openai`
client: text input and instructions, whole and streamed (every event checked against the
package's own types), text.format json_schema, function tools forced by tool_choice (arguments
valid against their schema) and the follow-up with the call's output, each bad input a 400
naming its field, and the request in the record and the history like a chat."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from app.serve.api.responses_request import read_responses_request
from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import CLI, Served, cove_serve
from tests.support.tiny_model import write_tiny_gguf

TEMPLATES = REPO_ROOT / "tests" / "data" / "chat_templates"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]}, "days": {"type": "integer", "enum": [1, 2, 3]}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather for a city", "parameters": WEATHER, "strict": True},
    {
        "type": "function",
        "name": "get_time",
        "description": "The time",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    },
]
MOOD = {
    "type": "object",
    "properties": {"mood": {"enum": ["calm", "busy"]}, "n": {"enum": [1, 2, 3]}},
    "required": ["mood", "n"],
    "additionalProperties": False,
}
MOOD_FORMAT = {"format": {"type": "json_schema", "name": "mood", "schema": MOOD, "strict": True}}
EVENTS: TypeAdapter = TypeAdapter(ResponseStreamEvent)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    """The server with the tiny base model ("tiny") and the tiny model with Qwen 2.5's template
    (which knows tools), whose name is given."""
    with cove_serve(tmp_path_factory.mktemp("responses")) as s:
        path = write_tiny_gguf(
            s.home / "qwentools.gguf", chat_template=(TEMPLATES / "qwen2.5-instruct.jinja").read_text(), n_ctx_train=4096
        )
        subprocess.run([*CLI, "models", "import", str(path)], cwd=REPO_ROOT, env=s.env, check=True, capture_output=True, timeout=120)
        models = httpx.get(f"{s.url}/v1/models").json()["data"]
        yield s, next(m["id"] for m in models if "qwentools" in m["id"].lower())


def client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0, timeout=120)


def raw_events(s: Served, body: dict) -> list[dict]:
    """A streamed response's events as sent, each checked against the openai package's types."""
    events = []
    with httpx.stream("POST", f"{s.url}/v1/responses", json={**body, "stream": True}, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in answer.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["type"] == name
                EVENTS.validate_python(data)
                events.append(data)
    return events


def test_text_input_and_instructions_give_a_response_with_output_text_and_usage(served: tuple[Served, str]) -> None:
    s, _ = served
    reply = client(s).responses.create(model="tiny", instructions="Be brief.", input="zebra crossings", max_output_tokens=8, temperature=0)
    assert reply.object == "response" and reply.id.startswith("resp_") and reply.model == "tiny"
    assert [item.type for item in reply.output] == ["message"]
    message = reply.output[0]
    assert message.role == "assistant" and message.id.startswith("msg_") and message.content[0].type == "output_text"
    assert reply.output_text == message.content[0].text and reply.output_text
    assert reply.usage is not None and reply.usage.input_tokens > 0 and 1 <= reply.usage.output_tokens <= 8
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens
    if reply.usage.output_tokens == 8:  # cut by max_output_tokens (the random model rarely ends by itself)
        assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"
        assert message.status == "incomplete"
    else:
        assert reply.status == "completed" and reply.incomplete_details is None
    assert reply.instructions == "Be brief." and reply.max_output_tokens == 8 and reply.store is False

    same = httpx.post(
        f"{s.url}/responses",
        json={"model": "tiny", "instructions": "Be brief.", "input": "zebra crossings", "max_output_tokens": 8, "temperature": 0},
        timeout=120,
    )
    assert same.status_code == 200
    parsed = Response.model_validate(same.json())  # the whole shape, checked by the package's types
    assert parsed.output_text == reply.output_text  # greedy: the same reply, also without /v1

    entry = s.requests()[-1]
    assert entry["endpoint"] == "/responses" and entry["status"] in ("complete", "length")
    assert json.loads(entry["messages"]) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "zebra crossings"}]
    assert entry["reply"] == reply.output_text
    listed = s.cove("history", "list")
    assert listed.returncode == 0 and any("zebra crossings" in line and "local API" in line for line in listed.stdout.splitlines())


def test_input_items_stream_in_numbered_events_that_add_up_to_the_response(served: tuple[Served, str]) -> None:
    s, _ = served
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Answer briefly."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
        {"role": "user", "content": "tell me more"},
    ]
    body = {"model": "tiny", "input": items, "max_output_tokens": 12, "temperature": 0}
    events = raw_events(s, body)
    kinds = [e["type"] for e in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = Response.model_validate(events[-1]["response"])
    joined = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert joined and final.output_text == joined == events[-4]["text"]
    assert final.id == events[0]["response"]["id"] and final.usage is not None and final.usage.output_tokens <= 12
    assert s.requests()[-1]["messages"] and json.loads(s.requests()[-1]["messages"])[0] == {"role": "system", "content": "Answer briefly."}

    typed = list(client(s).responses.create(**body, stream=True))  # the official client reads the same stream
    assert typed[0].type == "response.created" and typed[-1].type == kinds[-1]  # deltas may be joined differently
    assert "".join(e.delta for e in typed if e.type == "response.output_text.delta") == joined  # greedy


def test_the_clients_stream_helper_ends_with_the_deltas_joined_as_json_of_the_schema(served: tuple[Served, str]) -> None:
    s, _ = served
    deltas = []
    with client(s).responses.stream(model="tiny", input="how are you?", text=MOOD_FORMAT, max_output_tokens=200, temperature=0.7) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text == "".join(deltas)
    jsonschema.validate(json.loads(final.output_text), MOOD)
    whole = client(s).responses.create(model="tiny", input="and now?", text=MOOD_FORMAT, max_output_tokens=200)
    jsonschema.validate(json.loads(whole.output_text), MOOD)
    assert json.loads(s.requests()[-1]["params"])["text_format"]["name"] == "mood"


def test_a_forced_function_call_is_valid_and_its_output_is_accepted(served: tuple[Served, str]) -> None:
    s, model = served
    first = client(s).responses.create(
        model=model,
        input="What is the weather?",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        max_output_tokens=200,
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and first.status == "completed"
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and call.id and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    kept = json.loads(s.requests()[-1]["closing"]["params"])["tool_calls"]  # the record has the same call
    assert kept == [{"id": call.call_id, "name": "get_weather", "arguments": json.loads(call.arguments)}]

    follow = [
        {"role": "user", "content": "What is the weather?"},
        *[item.model_dump() for item in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
    ]
    second = client(s).responses.create(model=model, input=follow, tools=TOOLS, tool_choice="none", max_output_tokens=5)
    assert [item.type for item in second.output] == ["message"] and second.usage is not None
    sent = json.loads(s.requests()[-1]["messages"])
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": json.loads(call.arguments)}
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "name": "get_weather", "content": "sunny, 21 C"}


def test_a_streamed_call_arrives_as_argument_deltas_of_the_final_call(served: tuple[Served, str]) -> None:
    s, model = served
    body = {
        "model": model,
        "input": "Weather in Oslo?",
        "tools": TOOLS,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": 200,
    }
    events = raw_events(s, body)
    assert events[-1]["type"] == "response.completed"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0]["arguments"] == deltas
    final = Response.model_validate(events[-1]["response"])
    call = next(item for item in final.output if item.type == "function_call")
    assert call.arguments == deltas and call.id == done[0]["item_id"]
    schema = WEATHER if call.name == "get_weather" else TOOLS[1]["parameters"]
    jsonschema.validate(json.loads(call.arguments), schema)

    with client(s).responses.stream(**body) as stream:  # the client's helper assembles the same call
        helped = stream.get_final_response()
    assert [item.type for item in helped.output if item.type == "function_call"] == ["function_call"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"store": True}, "store"),
        ({"previous_response_id": "resp_123"}, "previous_response_id"),
        ({"input": None}, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]}, "input"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input"),
        ({"input": [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_x", "output": "1"}]}, "input"),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"}]}, "input"),
        ({"tools": [{"type": "web_search"}]}, "tools"),
        ({"tools": [{"type": "function", "parameters": {"type": "object"}}]}, "tools"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "string"}}]}, "tools"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": TOOLS, "text": MOOD_FORMAT}, "text.format"),
        ({"text": {"format": {"type": "xml"}}}, "text.format"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"instructions": ["not", "text"]}, "instructions"),
        ({"reasoning": {"effort": "high"}}, "reasoning"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(served: tuple[Served, str], body: dict, param: str) -> None:
    s, _ = served
    answer = httpx.post(f"{s.url}/v1/responses", json={"model": "tiny", "input": "hi", **body}, timeout=60)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    assert "Traceback" not in answer.text
    if param in ("store", "previous_response_id"):
        assert "statelessly" in error["message"]


def test_the_official_client_raises_its_bad_request_error_for_a_stored_response(served: tuple[Served, str]) -> None:
    s, _ = served
    before = len(s.record())
    with pytest.raises(openai.BadRequestError) as caught:
        client(s).responses.create(model="tiny", input="hi", previous_response_id="resp_abc")
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        client(s).responses.create(model="no-such-model", input="hi")
    assert len(s.record()) == before  # refused before anything was entered


def test_a_reply_with_text_and_two_calls_sent_back_is_one_assistant_turn_then_the_tool_results() -> None:
    calls = [
        {
            "type": "function_call",
            "call_id": f"call_{i}",
            "name": "get_weather",
            "id": f"fc_{i}",
            "arguments": json.dumps({"city": city, "days": 1}),
            "status": "completed",
        }
        for i, city in enumerate(("Oslo", "Lima"))
    ]
    read = read_responses_request(
        {
            "model": "m",
            "instructions": "Use tools.",
            "tools": TOOLS,
            "input": [
                {"role": "user", "content": "Oslo and Lima?"},
                {
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
                },
                *calls,
                {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
                {"type": "function_call_output", "call_id": "call_0", "output": [{"type": "input_text", "text": "snow"}]},
            ],
        }
    )
    assert [m["role"] for m in read.messages] == ["system", "user", "assistant", "tool", "tool"]
    turn = read.messages[2]
    assert turn["content"] == "Looking." and [c["id"] for c in turn["tool_calls"]] == ["call_0", "call_1"]
    assert turn["tool_calls"][1]["function"] == {"name": "get_weather", "arguments": {"city": "Lima", "days": 1}}
    assert read.messages[3:] == [
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "snow"},
    ]
    assert read.tools is not None and read.tools.choice.mode == "auto" and read.tools.names() == {"get_weather", "get_time"}
