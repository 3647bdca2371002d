"""Never a 500 for what a model wrote (issue 47, item 2): through `cove serve`, with the scripted
engine host replaying a reply that breaks its schema (it applies no grammar: a forced call's `hours`
is 632260094 where the schema says at most 48, as a grammar that does not bound integers let a model
write), the official `openai` and `anthropic` clients get status 200 and the call (or a
response_format reply's text) as the model wrote it, and the record's closing entry keeps the
problem. A keyword no grammar enforces, in a schema the request asks to be held to, is a 400."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.conftest import FAKE_HOST
from tests.support.paths import REPO_ROOT
from tests.support.processes import stop_process
from tests.support.serve_fixture import CLI, Served, free_port
from tests.support.tiny_model import write_tiny_gguf

# `cove serve` whose engines are the scripted host (FAKE_HOST_PIECES: the reply it streams).
FAKE_SERVE = f"""
import sys
import app.engine.client as client
real = client.EngineClient.__init__
def init(self, *args, **kwargs):
    kwargs["host_argv"] = [sys.executable, {str(FAKE_HOST)!r}]
    real(self, *args, **kwargs)
client.EngineClient.__init__ = init
from app.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
TIDE = {
    "type": "object",
    "properties": {"port": {"type": "string"}, "hours": {"type": "integer", "minimum": 1, "maximum": 48}},
    "required": ["port", "hours"],
    "additionalProperties": False,
}
ARGUMENTS = '{"port": "Brest", "hours": 632260094}'
CALL = f'<tool_call>\n{{"name": "tide_table", "arguments": {ARGUMENTS}}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "tide_table", "description": "Tides of a port", "parameters": TIDE}}]
FORCED = {"type": "function", "function": {"name": "tide_table"}}
ASK = [{"role": "user", "content": "Tides at Brest?"}]


def pieces_of(text: str) -> list[str]:
    return [text[i : i + 7] for i in range(0, len(text), 7)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str, Path]]:
    home = tmp_path_factory.mktemp("breaks")
    pieces = home / "pieces.json"
    pieces.write_text(json.dumps(pieces_of(CALL)))
    env = {
        **os.environ,
        "COVE_HOME": str(home / "cove"),
        "HOME": str(home),
        "PYTHONPATH": str(REPO_ROOT),
        "FAKE_HOST_PIECES": str(pieces),
        "FAKE_HOST_TPS": "2000",
    }
    model = write_tiny_gguf(home / "tiny.gguf", n_ctx_train=4096)
    subprocess.run([*CLI, "models", "import", str(model)], cwd=REPO_ROOT, env=env, check=True, capture_output=True, timeout=120)
    port = free_port()
    with (home / "serve.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_SERVE, "serve", "--port", str(port)], cwd=REPO_ROOT, env=env, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            listed = httpx.get(f"{url}/v1/models", timeout=2).raise_for_status().json()["data"]
            name = next(m["id"] for m in listed if m["id"] != "auto")  # the model itself, not Auto
            break
        except httpx.HTTPError:
            assert proc.poll() is None and time.monotonic() < deadline, (home / "serve.log").read_text()[-2000:]
            time.sleep(0.2)
    try:
        yield Served(url, home, env, proc), name, pieces
    finally:
        stop_process(proc, 30)


def closing_params(s: Served) -> dict:
    """The params of the last request's closing entry."""
    closing = s.requests()[-1]["closing"]
    assert closing is not None
    return json.loads(closing["params"])


def openai_client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0)


def assert_recorded(s: Served, key: str = "tool_call_problem") -> None:
    params = closing_params(s)
    assert "should be at most 48" in params[key], params


def test_a_forced_call_that_breaks_its_schema_comes_back_whole_as_written(served) -> None:
    s, model, pieces = served
    pieces.write_text(json.dumps(pieces_of(CALL)))
    reply = openai_client(s).chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice=FORCED, max_tokens=200)
    out = reply.choices[0]
    assert out.finish_reason == "tool_calls" and out.message.tool_calls
    call = out.message.tool_calls[0]
    assert call.function.name == "tide_table" and call.function.arguments == ARGUMENTS
    params = closing_params(s)
    assert "should be at most 48" in params["tool_call_problem"]
    assert params["tool_calls"] == [{"id": call.id, "name": "tide_table", "arguments": json.loads(ARGUMENTS)}]


def test_a_forced_call_that_breaks_its_schema_streams_as_written(served) -> None:
    s, model, pieces = served
    pieces.write_text(json.dumps(pieces_of(CALL)))
    stream = openai_client(s).chat.completions.create(
        model=model, messages=ASK, tools=TOOLS, tool_choice=FORCED, max_tokens=200, stream=True
    )
    arguments, names, finish, content = "", [], None, ""
    for chunk in stream:
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for part in choice.delta.tool_calls or ():
            names += [part.function.name] if part.function.name else []
            arguments += part.function.arguments or ""
        finish = choice.finish_reason or finish
    assert (names, arguments, finish, content) == (["tide_table"], ARGUMENTS, "tool_calls", "")
    assert_recorded(s)


def test_responses_give_the_call_as_written_whole_and_streamed(served) -> None:
    s, model, pieces = served
    pieces.write_text(json.dumps(pieces_of(CALL)))
    tools = [{"type": "function", "name": "tide_table", "description": "Tides of a port", "parameters": TIDE}]
    client = openai_client(s)
    whole = client.responses.create(
        model=model, input="Tides at Brest?", tools=tools, tool_choice={"type": "function", "name": "tide_table"}, max_output_tokens=200
    )
    calls = [item for item in whole.output if item.type == "function_call"]
    assert whole.status == "completed" and [(c.name, c.arguments) for c in calls] == [("tide_table", ARGUMENTS)]
    assert_recorded(s)
    events = list(
        client.responses.create(
            model=model, input="Tides at Brest?", tools=tools, tool_choice="required", max_output_tokens=200, stream=True
        )
    )
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert events[-1].type == "response.completed" and [(e.name, e.arguments) for e in done] == [("tide_table", ARGUMENTS)]
    assert_recorded(s)


def test_anthropic_messages_give_the_tool_use_as_written_whole_and_streamed(served) -> None:
    s, model, pieces = served
    pieces.write_text(json.dumps(pieces_of(CALL)))
    client = anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0)
    tools = [{"name": "tide_table", "description": "Tides of a port", "input_schema": TIDE}]
    forced = {"type": "tool", "name": "tide_table"}
    whole = client.messages.create(model=model, max_tokens=200, messages=ASK, tools=tools, tool_choice=forced)
    assert whole.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in whole.content] == [("tool_use", "tide_table", json.loads(ARGUMENTS))]
    assert_recorded(s)
    with client.messages.stream(model=model, max_tokens=200, messages=ASK, tools=tools, tool_choice=forced) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in final.content] == [("tool_use", "tide_table", json.loads(ARGUMENTS))]
    assert_recorded(s)


def test_a_json_schema_reply_that_breaks_its_schema_is_its_text_and_the_record_says_why(served) -> None:
    s, model, pieces = served
    text = '{"port": "Brest", "hours": 632260094}'
    pieces.write_text(json.dumps(pieces_of(text)))
    fmt = {"type": "json_schema", "json_schema": {"name": "tides", "strict": True, "schema": TIDE}}
    reply = openai_client(s).chat.completions.create(model=model, messages=ASK, response_format=fmt, max_tokens=200)
    assert reply.choices[0].message.content == text and reply.choices[0].finish_reason == "stop"
    assert_recorded(s, "response_format_problem")
    pieces.write_text(json.dumps(pieces_of('{"port": "Brest", "hours": 12}')))
    openai_client(s).chat.completions.create(model=model, messages=ASK, response_format=fmt, max_tokens=200)
    assert "response_format_problem" not in closing_params(s)  # a reply that keeps its schema has none


def test_a_keyword_the_grammar_cannot_hold_is_a_400_naming_it_before_generation(served) -> None:
    s, model, pieces = served
    pieces.write_text(json.dumps(pieces_of(CALL)))
    thirds = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}, "required": ["n"]}
    client = openai_client(s)
    before = len(s.requests())
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": thirds}}
    with pytest.raises(openai.BadRequestError, match="'multipleOf' \\(at properties.n\\)"):
        client.chat.completions.create(model=model, messages=ASK, response_format=fmt, max_tokens=20)
    strict = [{"type": "function", "function": {"name": "n", "parameters": thirds, "strict": True}}]
    with pytest.raises(openai.BadRequestError, match="tools\\[0\\].function.parameters: the keyword 'multipleOf'"):
        client.chat.completions.create(model=model, messages=ASK, tools=strict, tool_choice="required", max_tokens=20)
    with pytest.raises(openai.BadRequestError, match="text.format.schema: the keyword 'multipleOf'"):
        client.responses.create(
            model=model, input="n?", max_output_tokens=20, text={"format": {"type": "json_schema", "name": "n", "schema": thirds}}
        )
    answer = httpx.post(
        f"{s.url}/v1/messages",
        json={"model": model, "max_tokens": 20, "messages": ASK, "output_config": {"format": {"type": "json_schema", "schema": thirds}}},
        timeout=60,
    )
    assert answer.status_code == 400 and "'multipleOf'" in answer.json()["error"]["message"]
    assert len(s.requests()) == before  # refused before anything was recorded or generated
    loose = [{"type": "function", "function": {"name": "tide_table", "parameters": {**TIDE, "multipleOf": 2}}}]
    reply = client.chat.completions.create(model=model, messages=ASK, tools=loose, tool_choice=FORCED, max_tokens=200)
    assert reply.choices[0].finish_reason == "tool_calls"  # not strict: dropped, as llama-server does
