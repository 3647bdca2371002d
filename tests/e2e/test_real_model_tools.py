"""Tool calls on a real model, end to end (issue 45 item 1): Qwen2.5-Coder-0.5B-Instruct, which
writes its calls as fenced or bare JSON rather than in <tool_call> tags, at temperature 0.

- The prompt Cove renders from the model's chat template is, token for token, the one
  llama-cpp-python's own chat handler (Jinja2ChatFormatter on the GGUF's template) renders, for a
  plain conversation and for one with tools and a call answered, on the three APIs' paths and
  the tool loop's.
- Through one `cove serve` (shared by the module): the official openai client's chat completions
  with tool_choice left out, "required" and a named tool, whole and streamed (no fence or call
  JSON leaks into the streamed text), its Responses API, and the anthropic client's Messages API,
  each returning a get_weather call for Paris; the same with "model": "auto", which chooses Qwen over
  SmolLM2 (whose template does not know tools); and a json_schema reply from SmolLM2-135M-Instruct.
- `cove chat --tools time` with mcp-server-time: the call allowed up front (--allow-tools) and
  asked on a real terminal (a pty), its result shown, stored, recorded and given to the next reply.
- The window: the same call asked in the approval dialog, shown as a row, recorded.

Once given the time, this model calls convert_time (with a date where the tool wants HH:MM), then
that call again; the call made again does not run and the model answers without tools
(app/turn/answer_step.py): one test lets every reply finish and asserts the answer gives the time;
the others assert the first call, its approval, its result and where that result goes, and keep the
replies after it short (max_tokens).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import jsonschema
import openai
import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.engine.host.session import ModelSession
from app.engine.protocol import Load
from app.serve.api.chat_request import read_chat_request
from app.serve.api.messages_request import read_messages_request
from app.serve.api.responses_request import read_responses_request
from app.tools.parsers import Call
from app.turn.tools import assistant_with_calls, tool_message
from models.wheel_models import QWEN_05B, SMOLLM2_135M
from tests.support.cli import cove
from tests.support.on_a_terminal import cove_on_a_terminal
from tests.support.serve_fixture import Served, cove_serve

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

QWEN = Path(QWEN_05B.filename).stem  # the fixture's file, registered in place under its own name
SMOLLM2 = Path(SMOLLM2_135M.filename).stem
TIME_SERVER = [str(Path(sys.executable).parent / "mcp-server-time"), "--local-timezone", "UTC"]
WEATHER_QUESTION = "What's the weather in Paris?"
TIME_QUESTION = "What time is it in Tokyo?"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current time in a time zone",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_web",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
PARIS = ("get_weather", {"city": "Paris"})
LEAKS = ("```", '"name"', "<tool_call>")  # what a call's text must never show as content


# ---- the prompt, against llama-cpp-python's own chat handler ------------------------------------


@pytest.fixture(scope="module")
def session(qwen05_gguf: Path) -> Iterator[ModelSession]:
    """The engine host's model session, in this process (one thread, a small context)."""
    loaded = ModelSession(Load("load", str(qwen05_gguf), n_ctx=1024, n_threads=1))
    yield loaded
    loaded.close()


def llama_cpp_python_tokens(session: ModelSession, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """The prompt's tokens as llama-cpp-python's handler for the GGUF's template makes them: the
    formatter Llama.__init__ builds from the metadata, tokenized as chat_formatter_to_chat_completion_handler does."""
    llm = session.llm
    eos, bos = llm.token_eos(), llm.token_bos()
    formatter = Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )
    result = formatter(messages=messages, tools=tools)
    return list(llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))


def cove_tokens(session: ModelSession, messages: list[dict[str, Any]], tools: tuple = ()) -> list[int]:
    chat_format = session.format.for_tools(tools) if tools else session.format
    rendered = chat_format.render(messages)
    assert rendered.source == "gguf"  # the model's own template, not a fallback
    return session.tokenize_prompt(rendered.text)


def with_object_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each call's arguments as an object, as chat templates take them (Hugging
    Face's convention, and what llama.cpp's server turns OpenAI's JSON text into)."""
    out = json.loads(json.dumps(messages))
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def test_a_plain_conversation_renders_to_llama_cpp_python_s_tokens(session: ModelSession) -> None:
    body = {
        "model": QWEN,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello. How can I help?"},
            {"role": "user", "content": "What is 2+2?"},
        ],
    }
    request = read_chat_request(body)
    tokens = cove_tokens(session, request.messages)
    assert tokens == llama_cpp_python_tokens(session, body["messages"], None)
    assert session.llm.detokenize(tokens[-3:], special=True) == b"<|im_start|>assistant\n"


def test_a_conversation_with_tools_and_an_answered_call_renders_to_llama_cpp_python_s_tokens(session: ModelSession) -> None:
    """On the APIs' paths (OpenAI chat completions, Anthropic Messages and Responses requests, read as
    `cove serve` reads them) and on the tool loop's (the turn's own messages for a call and its
    result, as the local backend sends them)."""
    wire = [
        {"role": "user", "content": WEATHER_QUESTION},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    request = read_chat_request({"model": QWEN, "messages": wire, "tools": TOOLS})
    assert request.tools is not None
    tools = request.tools.tools
    expected_first = llama_cpp_python_tokens(session, wire[:1], TOOLS)
    assert cove_tokens(session, request.messages[:1], tools) == expected_first
    expected = llama_cpp_python_tokens(session, with_object_arguments(wire), TOOLS)
    assert cove_tokens(session, request.messages, tools) == expected
    shown = session.llm.detokenize(expected, special=True).decode()
    assert '"arguments": {"city": "Paris"}' in shown and "<tools>" in shown  # what the comparison is about

    anthropic_request = read_messages_request(
        {
            "model": QWEN,
            "max_tokens": 8,
            "tools": ANTHROPIC_TOOLS,
            "messages": [
                {"role": "user", "content": WEATHER_QUESTION},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 21 C"}]},
            ],
        }
    )
    assert anthropic_request.tools is not None
    assert cove_tokens(session, anthropic_request.messages, anthropic_request.tools.tools) == expected
    responses_request = read_responses_request(
        {
            "model": QWEN,
            "tools": RESPONSES_TOOLS,
            "input": [
                {"role": "user", "content": WEATHER_QUESTION},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
            ],
        }
    )
    assert responses_request.tools is not None
    assert cove_tokens(session, responses_request.messages, responses_request.tools.tools) == expected

    call = Call("call_1", "get_weather", '{"city": "Paris"}')
    turn = [{"role": "user", "content": WEATHER_QUESTION}, assistant_with_calls("", [call]), tool_message(call, "sunny, 21 C")]
    assert cove_tokens(session, turn, tools) == expected  # arguments as JSON text: the host gives the template objects


# ---- the APIs, on one cove serve -----------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, qwen05_gguf: Path, smollm2_gguf: Path) -> Iterator[Served]:
    with cove_serve(tmp_path_factory.mktemp("real-serve"), args=("--parallel", "1")) as s:
        for model in (qwen05_gguf, smollm2_gguf):
            done = s.cove("models", "import", str(model))
            assert done.returncode == 0, done.stderr
        served_ids = {m["id"] for m in httpx.get(f"{s.url}/v1/models").json()["data"]}
        assert {QWEN, SMOLLM2} <= served_ids
        yield s


def openai_client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0, timeout=300)


CHOICES = {"auto": None, "required": "required", "named": {"type": "function", "function": {"name": "get_weather"}}}


@pytest.mark.parametrize("choice", list(CHOICES))
def test_chat_completions_call_get_weather_whole_and_streamed(served: Served, choice: str) -> None:
    args: dict[str, Any] = dict(
        model=QWEN, messages=[{"role": "user", "content": WEATHER_QUESTION}], tools=TOOLS, temperature=0, max_tokens=48
    )
    if CHOICES[choice] is not None:
        args["tool_choice"] = CHOICES[choice]
    whole = openai_client(served).chat.completions.create(**args).choices[0]
    assert whole.finish_reason == "tool_calls", whole
    calls = whole.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [PARIS]
    assert calls[0].id and not whole.message.content  # the call's text is the call, not content

    streamed: dict[int, dict[str, Any]] = {}
    contents: list[str] = []
    finish = None
    for chunk in openai_client(served).chat.completions.create(**args, stream=True):
        for part in chunk.choices:
            finish = part.finish_reason or finish
            if part.delta.content:
                contents.append(part.delta.content)
            for d in part.delta.tool_calls or []:
                entry = streamed.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = d.id or entry["id"]
                entry["name"] += (d.function.name or "") if d.function else ""
                entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed.values()] == [PARIS]
    assert all(c["id"] for c in streamed.values())
    assert not [c for c in contents if any(leak in c for leak in LEAKS)], contents
    assert "".join(contents).strip() == ""


def test_auto_with_tools_gets_the_model_whose_template_knows_tools_and_its_call(served: Served) -> None:
    """ "model": "auto" with tools, among Qwen2.5-Coder-0.5B (its template knows tools) and
    SmolLM2-135M (its template does not): Qwen answers, with the call, and the cove object says why."""
    reply = openai_client(served).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": WEATHER_QUESTION}], tools=TOOLS, temperature=0, max_tokens=48
    )
    said = reply.model_extra["cove"]["auto"]
    assert reply.model == QWEN and said["chosen"] == QWEN
    assert {"model": SMOLLM2, "why": "its template does not know tools"} in said["passed_over"]
    calls = reply.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [PARIS]


def test_the_responses_api_returns_a_function_call_item(served: Served) -> None:
    reply = openai_client(served).responses.create(
        model=QWEN,
        input=WEATHER_QUESTION,
        tools=RESPONSES_TOOLS,  # type: ignore[arg-type]
        temperature=0,
        max_output_tokens=48,
    )
    calls = [item for item in reply.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [PARIS], reply.output
    assert calls[0].call_id and calls[0].status == "completed"
    texts = [part.text for item in reply.output if item.type == "message" for part in item.content if part.type == "output_text"]
    assert not [t for t in texts if any(leak in t for leak in LEAKS)], texts


def test_the_anthropic_messages_api_returns_a_tool_use_block(served: Served) -> None:
    client = anthropic.Anthropic(base_url=served.url, api_key="none", max_retries=0, timeout=300)
    reply = client.messages.create(
        model=QWEN,
        max_tokens=48,
        tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": WEATHER_QUESTION}],
        extra_body={"temperature": 0},
    )
    assert reply.stop_reason == "tool_use", reply.content
    uses = [b for b in reply.content if b.type == "tool_use"]
    assert [(b.name, b.input) for b in uses] == [PARIS] and uses[0].id.startswith("toolu_")
    texts = [b.text for b in reply.content if b.type == "text"]
    assert not [t for t in texts if any(leak in t for leak in LEAKS)], texts


CAPITAL = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


def test_a_json_schema_reply_parses_and_matches_the_schema(served: Served) -> None:
    """SmolLM2-135M-Instruct (ChatML, no tools), last in the module: it replaces Qwen in the server."""
    reply = openai_client(served).chat.completions.create(
        model=SMOLLM2,
        messages=[{"role": "user", "content": "Name the capital of France and its country, as JSON."}],
        temperature=0,
        max_tokens=48,
        response_format={"type": "json_schema", "json_schema": {"name": "capital", "strict": True, "schema": CAPITAL}},
    )
    out = reply.choices[0]
    assert out.finish_reason == "stop", out
    value = json.loads(out.message.content or "")
    jsonschema.validate(value, CAPITAL)
    assert value["city"] == "Paris"


# ---- cove chat --tools, with the real time server -------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, qwen05_gguf: Path) -> Path:
    """A COVE_HOME with the model imported (in place) and the time server added."""
    home = tmp_path / "home"
    for args in (("models", "import", str(qwen05_gguf)), ("tools", "add", "time", "--", *TIME_SERVER)):
        done = cove(home, *args)
        assert done.returncode == 0, done.stderr
    return home


# Short replies: the call takes about 30 tokens; the reply after the result (another call) is cut.
CHAT = ("chat", "--new", "--model", QWEN, "--temperature", "0", "--max-tokens", "40", "--tools", "time")


def records(home: Path) -> list[dict[str, Any]]:
    done = cove(home, "record", "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def stored(home: Path, conversation_id: str) -> list[dict[str, Any]]:
    done = cove(home, "history", "show", conversation_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["messages"]  # type: ignore[no-any-return]


def assert_the_tokyo_call_ran(home: Path, approved_by: str) -> dict[str, Any]:
    """The call's record entry, its result stored and given to the next reply; returns the result."""
    entries = records(home)
    assert [e["endpoint"] for e in entries[:3]] == ["chat", "tool:time/get_current_time", "chat"], entries
    first, tool, after = entries[:3]
    assert json.loads(first["params"])["tool_calls"][0]["arguments"] == {"timezone": "Asia/Tokyo"}
    params = json.loads(tool["params"])
    assert params["arguments"] == {"timezone": "Asia/Tokyo"} and params["approved_by"] == approved_by
    assert tool["status"] == "ok" and params["server_identity"] == " ".join(TIME_SERVER)
    result = json.loads(tool["reply"])
    assert result["timezone"] == "Asia/Tokyo" and result["datetime"].endswith("+09:00")
    sent = json.loads(after["messages"])  # the next reply's prompt carried the result as the tool's answer
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"] and sent[2]["content"] == tool["reply"]
    messages = stored(home, first["conversation_id"])
    assert [m["role"] for m in messages][:4] == ["user", "assistant", "tool_call", "tool"]
    assert messages[2]["content"].startswith("get_current_time ") and messages[3]["content"] == tool["reply"]
    assert not any(leak in messages[1]["content"] for leak in LEAKS)
    return result


def test_cove_chat_with_allow_tools_calls_and_answers_with_the_time(home: Path) -> None:
    """The issue's `cove chat --tools time "What time is it in Tokyo?"`, with room for every reply:
    the call runs, the model asks for convert_time (with a date where it wants HH:MM) and then for
    that call again, which does not run, and its answer without tools gives the time."""
    done = cove(home, *CHAT, "--max-tokens", "128", "--allow-tools", TIME_QUESTION, timeout=540)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    called = re.search(r"^\[tool call: time/get_current_time (\{.*\})\]$", done.stderr, re.M)
    assert called and json.loads(called.group(1)) == {"timezone": "Asia/Tokyo"}, done.stderr
    result = assert_the_tokyo_call_ran(home, "the person (--allow-tools) (allowed once)")
    assert "[tool result (ok):" in done.stderr and result["datetime"] in done.stderr  # shown
    assert cove(home, "record", "verify").returncode == 0
    rows = stored(home, records(home)[0]["conversation_id"])
    hh_mm = result["datetime"][11:16]
    assert rows[-1]["role"] == "assistant" and hh_mm in rows[-1]["content"], rows[-1]
    assert hh_mm in done.stdout and "answer from the results without tools" in done.stderr
    assert not any(leak in rows[-1]["content"] for leak in LEAKS)
    # The second step read only what was new: the first step's prompt and every token the model wrote
    # (its call, fenced, as it wrote it; all but the end-of-reply token) came from the cache.
    replies = [m for m in stored(home, records(home)[0]["conversation_id"]) if m["role"] == "assistant"]
    first, second = replies[0]["metrics"], replies[1]["metrics"]
    assert second["cached_tokens"] == first["prompt_tokens"] + first["gen_tokens"] - 1, (first, second)


def test_cove_chat_asks_on_the_terminal_before_the_call_runs(home: Path) -> None:
    answers: list[bytes] = []

    def answer(seen: bytes) -> bytes:
        answers.append(b"o" if not answers else b"d")  # the first call allowed once; any later one denied
        return answers[-1]

    code, seen = cove_on_a_terminal(home, *CHAT, TIME_QUESTION, answer=answer, timeout=540)
    shown = seen.decode(errors="replace").replace("\r\n", "\n")
    assert code == 0, shown
    assert answers and answers[0] == b"o", shown
    asked = shown.split("Allow once [o]", 1)[0]
    assert f"The tool server 'time' ({' '.join(TIME_SERVER)})\nwants to run the tool 'get_current_time'" in asked
    assert "Asia/Tokyo" in asked and "[tool result" not in asked  # asked before anything ran
    result = assert_the_tokyo_call_ran(home, "the person (allowed once)")
    assert "[tool result (ok):" in shown and result["datetime"] in shown


# ---- the window ---------------------------------------------------------------------------------


def test_a_window_turn_asks_runs_shows_and_records_the_call(qtbot, cove_core, qwen05_gguf: Path, tmp_path: Path) -> None:
    import shiboken6
    from PySide6.QtCore import Qt

    from app.engine.client import EngineClient
    from app.mcp.host import McpHost
    from app.mcp.results import ToolLimits
    from app.mcp.servers import stdio_server
    from app.mcp.store import ToolServerStore
    from app.settings import SamplingParams
    from tests.support.remote_window import make_window, send

    cove_core.remember_model(cove_core.library.import_file(qwen05_gguf))
    cove_core.save_sampling_defaults(SamplingParams(temperature=0.0, max_tokens=40))
    ToolServerStore(cove_core.db).add(stdio_server("time", TIME_SERVER))
    hosts: list[McpHost] = []

    def make_host() -> McpHost:
        hosts.append(McpHost(tmp_path / "tool-servers.log", ToolLimits(call_timeout_s=60, result_cap_chars=1000)))
        return hosts[-1]

    engine = EngineClient()
    window = make_window(qtbot, cove_core, engine)
    asked: list[Any] = []
    try:
        window.tools.mcp_factory = make_host
        window.tools.fill_menu()
        next(a for a in window.tools.menu.actions() if a.text() == "time").trigger()
        assert window.controller.tool_servers() == ["time"]
        send(qtbot, window, TIME_QUESTION)

        def question() -> Any:
            dialog = window.tools.approval  # deleted once answered
            return dialog if dialog is not None and shiboken6.isValid(dialog) and dialog.isVisible() else None

        while True:  # the first call allowed once; any later one denied
            qtbot.waitUntil(lambda: question() is not None or not window.controller.busy, timeout=480_000)
            dialog = question()
            if dialog is None:
                break
            if not asked:
                assert dialog.request.server.name == "time" and dialog.request.tool == "get_current_time"
                assert json.loads(dialog.arguments.toPlainText()) == {"timezone": "Asia/Tokyo"}
            asked.append(dialog.request.tool)
            qtbot.mouseClick(dialog.allow_button if len(asked) == 1 else dialog.deny_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: question() is None, timeout=10_000)
        assert asked and asked[0] == "get_current_time"

        history = cove_core.history.messages(window.controller.conversation_id)
        assert [m.role for m in history][:4] == ["user", "assistant", "tool_call", "tool"]
        result = history[3]
        assert result.params["status"] == "ok" and json.loads(result.content)["timezone"] == "Asia/Tokyo"
        assert result.params["approved_by"] == "the person (allowed once)"
        row = next(cove_core.db.query("SELECT * FROM record_entries WHERE seq = ?", [result.params["record_entry"]]))
        assert row["endpoint"] == "tool:time/get_current_time" and row["reply"] == result.content
        assert json.loads(row["params"])["arguments"] == {"timezone": "Asia/Tokyo"}
        shown = [r.content for r in window.view.conversation_model().items()]
        assert "Called time/get_current_time · done · decided by the person (allowed once)" in shown, shown
        assert not any(leak in text for text in shown for leak in LEAKS), shown
    finally:
        window.close()
        engine.close()
        for host in hosts:
            host.close()
