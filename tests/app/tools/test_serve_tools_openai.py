"""Tool calls through cove serve with the official openai client: the tiny random-weight model
with a Qwen 2.5 chat template (Hermes-style calls), calls forced by tool_choice (required or a
named tool) and so made under the tools' grammar, checked against their schemas with jsonschema;
streamed calls reassembled equal the whole ones; tool results accepted; bad input refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import CLI, Served, cove_serve
from tests.support.tiny_model import write_tiny_gguf

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]}, "days": {"type": "integer", "enum": [1, 2, 3]}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "The time", "parameters": {"type": "object", "properties": {}}}},
]


def add_model(served: Served, name: str, template: str) -> str:
    path = write_tiny_gguf(served.home / f"{name}.gguf", chat_template=template, n_ctx_train=4096)
    subprocess.run([*CLI, "models", "import", str(path)], cwd=REPO_ROOT, env=served.env, check=True, capture_output=True, timeout=120)
    models = httpx.get(f"{served.url}/v1/models").json()["data"]
    return next(m["id"] for m in models if name in m["id"].lower())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    with cove_serve(tmp_path_factory.mktemp("tools")) as s:
        yield s, add_model(s, "qwentools", (TEMPLATES / "qwen2.5-instruct.jinja").read_text())


def client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0)


def test_a_loop_of_three_forced_calls_valid_against_the_schema(served: tuple[Served, str]) -> None:
    s, model = served
    messages: list[dict] = [{"role": "user", "content": "What is the weather?"}]
    for step in range(3):
        choice = "required" if step != 1 else {"type": "function", "function": {"name": "get_weather"}}
        reply = client(s).chat.completions.create(
            model=model, messages=messages, tools=TOOLS, tool_choice=choice, parallel_tool_calls=False, max_tokens=200, seed=step
        )
        out = reply.choices[0]
        assert out.finish_reason == "tool_calls"
        calls = out.message.tool_calls
        assert calls and len(calls) == 1 and calls[0].id
        call = calls[0]
        if step == 1:
            assert call.function.name == "get_weather"
        schema = WEATHER if call.function.name == "get_weather" else TOOLS[1]["function"]["parameters"]
        jsonschema.validate(json.loads(call.function.arguments), schema)
        messages.append({"role": "assistant", "content": None, "tool_calls": [call.model_dump()]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
    final = client(s).chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="none", max_tokens=5)
    assert final.choices[0].finish_reason in ("stop", "length")
    assert final.choices[0].message.tool_calls is None


def test_streamed_calls_reassemble_into_the_whole_call(served: tuple[Served, str]) -> None:
    s, model = served
    args = dict(
        model=model,
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=200,
        seed=7,
        temperature=0,
    )
    whole = client(s).chat.completions.create(**args).choices[0].message.tool_calls
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client(s).chat.completions.create(**args, stream=True):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for d in choice.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = d.id or entry["id"]
                entry["name"] += (d.function.name or "") if d.function else ""
                entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        (w.function.name, json.loads(w.function.arguments)) for w in whole
    ]
    assert all(c["id"] for c in calls.values())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"type": "function", "function": {"parameters": {"type": "object"}}}]}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}, "tools"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]}, "tools"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "1"}]}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]}, "messages"),
    ],
)
def test_bad_tool_input_is_a_400_naming_the_field(served: tuple[Served, str], body: dict, param: str) -> None:
    s, model = served
    request = {"model": model, "messages": [{"role": "user", "content": "hi"}], **body}
    answer = httpx.post(f"{s.url}/v1/chat/completions", json=request, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
