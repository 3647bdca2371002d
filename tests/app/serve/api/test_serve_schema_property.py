"""Structured output holds through the API for any schema of the supported subset (issue 47 item
3): a real `cove serve` with the tiny random model, generated schemas (tests/support/json_schemas.py)
sent by the official clients at temperature 1 as a chat `response_format` (json_schema, strict), a
chat call forced by `tool_choice` (a strict function), a Responses `text.format` and a forced
Responses function call (openai), and a tool forced by Anthropic's `tool_choice: {"type": "tool"}`
and Anthropic's `output_config.format` (anthropic). Every request is answered (never a 4xx or 5xx:
each schema is one Cove supports), and every reply that ends validates against its schema with
jsonschema, formats included: not one invalid."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.json_schemas import check_schema, problems, schemas
from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import CLI, Served, cove_serve
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(600)

EXAMPLES = 10  # schemas per surface (each surface draws its own, derandomized)
MAX_TOKENS = 300
ASK = "Fill it in."
TEMPLATES = REPO_ROOT / "tests" / "data" / "chat_templates"

Outcome = tuple[bool, list[Any]]  # (the reply ended, the values it holds: one, or each call's arguments)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    """The server with the tiny base model ("tiny") and the tiny model with Qwen 2.5's template
    (which knows tools), whose name is given."""
    with cove_serve(tmp_path_factory.mktemp("schema-property"), n_ctx_train=4096) as s:
        path = write_tiny_gguf(
            s.home / "qwentools.gguf", n_ctx_train=4096, chat_template=(TEMPLATES / "qwen2.5-instruct.jinja").read_text()
        )
        subprocess.run([*CLI, "models", "import", str(path)], cwd=REPO_ROOT, env=s.env, check=True, capture_output=True, timeout=120)
        models = httpx.get(f"{s.url}/v1/models").json()["data"]
        yield s, next(m["id"] for m in models if "qwentools" in m["id"].lower())


def openai_client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="none", max_retries=0, timeout=120)


def anthropic_client(s: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0, timeout=120)


def each_schema_holds(surface: Callable[[dict[str, Any], int], Outcome]) -> None:
    """Run `surface` (schema, seed) -> Outcome over EXAMPLES generated schemas, two seeds each:
    every request answered, every ended reply valid, and most replies ended."""
    tally: Counter[bool] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(schemas())
    def one(schema: dict[str, Any]) -> None:
        check_schema(schema)
        for seed in (1, 2):
            try:
                ended, values = surface(schema, seed)
            except (openai.APIStatusError, anthropic.APIStatusError) as exc:
                pytest.fail(f"{exc.status_code} for a supported schema: {exc.message}\n{json.dumps(schema, ensure_ascii=False)}")
            tally[ended] += 1
            assert values if ended else not values
            for value in values:
                found = problems(value, schema)
                assert not found, (
                    f"invalid under its schema: {found}\nvalue: {json.dumps(value, ensure_ascii=False)}"
                    f"\nschema: {json.dumps(schema, ensure_ascii=False)}"
                )

    one()
    assert tally[True] + tally[False] == 2 * EXAMPLES
    assert tally[True] >= EXAMPLES, tally  # at least half ended within max_tokens, so were checked


def parsed(text: str, schema: dict[str, Any]) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AssertionError(f"not JSON ({exc}): {text!r}\nschema: {json.dumps(schema, ensure_ascii=False)}") from None


def test_chat_response_format_json_schema(served: tuple[Served, str]) -> None:
    s, _ = served
    client = openai_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        fmt = {"type": "json_schema", "json_schema": {"name": "form", "schema": schema, "strict": True}}
        reply = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": ASK}],
            response_format=fmt,
            max_tokens=MAX_TOKENS,
            temperature=1.0,
            seed=seed,
        )
        choice = reply.choices[0]
        assert choice.finish_reason in ("stop", "length"), choice
        return (True, [parsed(choice.message.content, schema)]) if choice.finish_reason == "stop" else (False, [])

    each_schema_holds(surface)


def test_chat_call_forced_by_tool_choice(served: tuple[Served, str]) -> None:
    s, model = served
    client = openai_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        tools = [
            {"type": "function", "function": {"name": "fill", "description": "Fill in the form", "parameters": schema, "strict": True}}
        ]
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": ASK}],
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "fill"}},
            max_tokens=MAX_TOKENS,
            temperature=1.0,
            seed=seed,
        )
        choice = reply.choices[0]
        assert choice.finish_reason in ("tool_calls", "length"), choice
        if choice.finish_reason == "length":
            return False, []
        calls = choice.message.tool_calls or []  # parallel calls allowed: each is held to the schema
        assert calls and {call.function.name for call in calls} == {"fill"}, calls
        return True, [parsed(call.function.arguments, schema) for call in calls]

    each_schema_holds(surface)


def test_responses_text_format_json_schema(served: tuple[Served, str]) -> None:
    s, _ = served
    client = openai_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        fmt = {"format": {"type": "json_schema", "name": "form", "schema": schema, "strict": True}}
        reply = client.responses.create(
            model="tiny", input=ASK, text=fmt, max_output_tokens=MAX_TOKENS, temperature=1.0, extra_body={"seed": seed}
        )
        assert reply.status in ("completed", "incomplete"), reply
        return (True, [parsed(reply.output_text, schema)]) if reply.status == "completed" else (False, [])

    each_schema_holds(surface)


def test_responses_function_call_forced_by_tool_choice(served: tuple[Served, str]) -> None:
    s, model = served
    client = openai_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        tools = [{"type": "function", "name": "fill", "description": "Fill in the form", "parameters": schema, "strict": True}]
        reply = client.responses.create(
            model=model,
            input=ASK,
            tools=tools,
            parallel_tool_calls=False,
            tool_choice={"type": "function", "name": "fill"},
            max_output_tokens=MAX_TOKENS,
            temperature=1.0,
            extra_body={"seed": seed},
        )
        assert reply.status in ("completed", "incomplete"), reply
        if reply.status == "incomplete":
            return False, []
        calls = [item for item in reply.output if item.type == "function_call"]
        assert [call.name for call in calls] == ["fill"], reply.output  # parallel_tool_calls=False: one
        return True, [parsed(calls[0].arguments, schema)]

    each_schema_holds(surface)


def test_anthropic_tool_forced_by_tool_choice(served: tuple[Served, str]) -> None:
    s, model = served
    client = anthropic_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        tools = [{"name": "fill", "description": "Fill in the form", "input_schema": schema}]
        message = client.messages.create(
            model=model,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": ASK}],
            tools=tools,
            tool_choice={"type": "tool", "name": "fill"},
            extra_body={"temperature": 1.0, "top_k": 0},
        )
        assert message.stop_reason in ("tool_use", "max_tokens"), message
        if message.stop_reason == "max_tokens":
            return False, []
        uses = [block for block in message.content if block.type == "tool_use"]  # parallel uses: each held
        assert uses and {use.name for use in uses} == {"fill"}, message.content
        return True, [use.input for use in uses]

    each_schema_holds(surface)


def test_anthropic_output_config_format(served: tuple[Served, str]) -> None:
    s, _ = served
    client = anthropic_client(s)

    def surface(schema: dict[str, Any], seed: int) -> Outcome:
        message = client.messages.create(
            model="tiny",
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": ASK}],
            extra_body={"temperature": 1.0, "top_k": 0, "output_config": {"format": {"type": "json_schema", "schema": schema}}},
        )
        assert message.stop_reason in ("end_turn", "max_tokens"), message
        if message.stop_reason == "max_tokens":
            return False, []
        text = "".join(block.text for block in message.content if block.type == "text")
        return True, [parsed(text, schema)]

    each_schema_holds(surface)
