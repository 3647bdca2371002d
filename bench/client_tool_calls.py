"""Which real clients get a tool call back from `cove serve` with `tool_choice` left as each client
leaves it (auto): the official `openai` and `anthropic` packages, Simon Willison's `llm`,
LangChain's `ChatOpenAI.bind_tools` and LiteLLM. A client that is not installed is reported as such.

    .venv/bin/cove serve --port 8642 &       # with the model imported (cove models import / cove setup)
    python bench/client_tool_calls.py --base http://127.0.0.1:8642 --model qwen2.5-coder-0.5b-instruct-q4_k_m [--json]

Run it with a Python that has the clients (they are not Cove's dependencies):
`python3.11 -m venv /tmp/clients && /tmp/clients/bin/pip install openai anthropic llm langchain-openai litellm`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

QUESTION = "What's the weather in Paris?"
PARAMS = {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]}
DESCRIPTION = "Get the current weather in a city"


def _openai(base: str, model: str) -> tuple[str, dict] | None:
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    reply = client.chat.completions.create(
        model=model,
        temperature=0,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS}}],
    )
    calls = reply.choices[0].message.tool_calls or []
    return (calls[0].function.name, json.loads(calls[0].function.arguments)) if calls else None


def _anthropic(base: str, model: str) -> tuple[str, dict] | None:
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="unused")
    reply = client.messages.create(
        model=model,
        max_tokens=200,
        extra_body={"temperature": 0},
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"name": "get_weather", "description": DESCRIPTION, "input_schema": PARAMS}],
    )
    uses = [b for b in reply.content if b.type == "tool_use"]
    return (uses[0].name, dict(uses[0].input)) if uses else None


def _llm(base: str, model: str) -> tuple[str, dict] | None:
    import llm
    from llm.default_plugins.openai_models import Chat

    def get_weather(city: str) -> str:
        """Get the current weather in a city"""
        return "sunny"

    chat = Chat("cove", key="unused", model_name=model, api_base=f"{base}/v1", supports_tools=True)
    response = chat.prompt(QUESTION, tools=[llm.Tool.function(get_weather)], temperature=0)
    calls = response.tool_calls()
    return (calls[0].name, dict(calls[0].arguments)) if calls else None


def _langchain(base: str, model: str) -> tuple[str, dict] | None:
    from langchain_openai import ChatOpenAI

    def get_weather(city: str) -> str:
        """Get the current weather in a city"""
        return "sunny"

    chat = ChatOpenAI(model=model, base_url=f"{base}/v1", api_key="unused", temperature=0).bind_tools([get_weather])
    message = chat.invoke(QUESTION)
    calls = message.tool_calls
    return (calls[0]["name"], dict(calls[0]["args"])) if calls else None


def _litellm(base: str, model: str) -> tuple[str, dict] | None:
    import litellm

    reply = litellm.completion(
        model=f"openai/{model}",
        api_base=f"{base}/v1",
        api_key="unused",
        temperature=0,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": PARAMS}}],
    )
    calls = reply.choices[0].message.tool_calls or []
    return (calls[0].function.name, json.loads(calls[0].function.arguments)) if calls else None


CLIENTS: dict[str, Callable[[str, str], tuple[str, dict] | None]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "llm": _llm,
    "langchain": _langchain,
    "litellm": _litellm,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="http://127.0.0.1:8642")
    parser.add_argument("--model", required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for name, run in CLIENTS.items():
        try:
            call = run(args.base, args.model)
        except ImportError as exc:
            results[name] = {"installed": False, "why": str(exc)}
            continue
        except Exception as exc:  # a client's own error is what this measures
            results[name] = {"installed": True, "call": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        results[name] = {"installed": True, "call": {"name": call[0], "arguments": call[1]} if call else None}
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, result in results.items():
            if not result["installed"]:
                print(f"{name:10} not installed")
            elif result.get("call"):
                print(f"{name:10} tool call: {result['call']['name']} {json.dumps(result['call']['arguments'])}")
            else:
                print(f"{name:10} NO tool call {result.get('error', '')}")
    got = [r for r in results.values() if r.get("call")]
    return 0 if got and len(got) == sum(1 for r in results.values() if r["installed"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
