"""Tool calls on the starter model through `cove serve` (issue 31): an agent loop's later steps
served from the KV cache, and generation speed under a tool grammar against plain decoding.

The starter (Gemma 3 270M, a base model without a chat template) knows no tools, so its tools go
through the generic format (described in the system message, calls and results as text): fine
for what is measured here. One `cove serve` per round, driven by the official openai client.

1. Agent loop: 10 function tools with realistic schemas; `--steps` steps (5), each forcing a call
   (tool_choice names a tool, or `required`, so the grammar guarantees one), the call and a fake
   tool result appended before the next step. Per step: TTFT (the engine's `timings.ttft_ms`, and
   the client's clock to the stream's first chunk, which goes out with the first token), prompt
   tokens, cached (`usage.prompt_tokens_details.cached_tokens`), evaluated (prompt - cached), the
   step's new tokens (its prompt minus the last step's prompt and reply, the reply's
   end-of-generation token aside: what the cache cannot hold) and evaluated / new, and whether
   the last reply (the model's raw output, read from the record) re-renders byte for byte in the
   next prompt. Step 1 evaluates the tools block; steps 2.. should not.
2. Generation speed: the same prompt (1034 tokens on the starter: the tools described in the system
   message) with a tool grammar active (a forced call to write_file, parallel_tool_calls false,
   whose `content` string has a fixed length) against plain decoding of the same number of tokens
   (/v1/completions given the very prompt text the chat path renders, so no stop string ends it;
   on the starter a logit_bias keeps it from ending), and `response_format` json_schema of the
   same call as a comparison, alternating request by request; tokens per second from the engine's
   own `timings.tokens_per_second`.

Run: .venv/bin/python bench/tools.py [--rounds 3] [--steps 5] [--pairs 3] [--content-chars 360] [--model PATH] [--json]
Goals: later steps evaluate <= 1.2x their new tokens; tg with the tool grammar >= 0.95x plain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from bench.serve_process import serving  # noqa: E402

GOAL_EVAL_RATIO, GOAL_TG_RATIO = 1.2, 0.95
STARTER_NO_EOS = {"1": -100, "106": -100}  # Gemma's <eos> and <end_of_turn>: plain decoding runs its full length
CONTENT_CHARS = 360  # the forced call's string argument, in characters (~100+ tokens)


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": False},
        },
    }


STR, INT, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
TOOLS = [
    _fn(
        "get_weather",
        "Current weather and a short forecast for a city.",
        {"city": STR, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "enum": [1, 2, 3]}},
        ["city", "unit"],
    ),
    _fn(
        "search_web",
        "Search the web; returns titles, links and snippets.",
        {"query": STR, "max_results": {"type": "integer", "enum": [3, 5, 10]}, "site": STR},
        ["query"],
    ),
    _fn("read_file", "Read a text file of the project.", {"path": STR, "start_line": INT, "end_line": INT}, ["path"]),
    _fn(
        "write_file",
        "Write a text file of the project, replacing what it held.",
        {
            "path": {"type": "string", "maxLength": 40},
            "content": {"type": "string", "minLength": CONTENT_CHARS, "maxLength": CONTENT_CHARS},
        },
        ["path", "content"],
    ),
    _fn("list_directory", "List a folder's files.", {"path": STR, "recursive": BOOL}, ["path"]),
    _fn(
        "run_shell",
        "Run a shell command in the project folder.",
        {"command": STR, "timeout_s": {"type": "integer", "enum": [10, 60, 300]}},
        ["command"],
    ),
    _fn(
        "send_email",
        "Send an email.",
        {"to": {"type": "array", "items": STR, "maxItems": 3}, "subject": STR, "body": STR},
        ["to", "subject", "body"],
    ),
    _fn(
        "create_calendar_event",
        "Add an event to the calendar.",
        {
            "title": STR,
            "start": {"type": "string", "description": "ISO 8601"},
            "duration_minutes": INT,
            "attendees": {"type": "array", "items": STR, "maxItems": 4},
        },
        ["title", "start"],
    ),
    _fn("query_database", "Run a read-only SQL query on the sales database.", {"sql": STR, "limit": INT}, ["sql"]),
    _fn(
        "get_stock_price",
        "The latest price of a stock.",
        {"symbol": STR, "exchange": {"type": "string", "enum": ["NASDAQ", "NYSE", "LSE"]}},
        ["symbol"],
    ),
]
LOOP = [  # (tool_choice, fake result) per step
    ({"type": "function", "function": {"name": "list_directory"}}, '["README.md", "src/", "tests/", "setup.cfg"]'),
    ({"type": "function", "function": {"name": "read_file"}}, "# Lighthouse\nA tool that counts ships passing the bay."),
    ("required", '{"results": [{"title": "Ship counting", "link": "https://example.org/ships"}]}'),
    ({"type": "function", "function": {"name": "run_shell"}}, "3 passed in 0.41s"),
    ({"type": "function", "function": {"name": "get_weather"}}, '{"city": "Oslo", "temp_c": 4, "sky": "rain"}'),
    ({"type": "function", "function": {"name": "send_email"}}, '{"sent": true}'),
]
TASK = "Look at the project, check that its tests pass, and email the team a summary with the weather in Oslo."
SPEED_TASK = "Write the project's README.md: what the tool does, how to install it and how to run it, at length."


def cove(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True
    )


def model_env(model_path: str | None) -> tuple[dict[str, str], str]:
    home = Path(tempfile.mkdtemp(prefix="cove-tools-bench-"))
    env = {**os.environ, "COVE_HOME": str(home), "HOME": str(home)}
    if model_path is None:
        from bench.starter_file import default_model

        model_path = default_model()  # assembled once under the temporary directory
    cove(env, "models", "import", model_path)
    return env, json.loads(cove(env, "models", "list", "--json").stdout)[0]["name"]


def _timings(obj: Any) -> dict[str, Any]:
    return (obj.model_extra or {}).get("timings") or {}


class NoCall(RuntimeError):
    """The model's call ran past max_tokens (an unbounded string or number) and did not close."""


def loop_step(client: openai.OpenAI, model: str, messages: list[dict], choice: Any, seed: int) -> dict[str, Any]:
    """One forced call, streamed: the call, and the step's tokens and clocks."""
    sent = time.perf_counter()
    stream = client.chat.completions.create(
        model=model,
        messages=messages,
        tools=TOOLS,
        tool_choice=choice,
        parallel_tool_calls=False,
        max_tokens=256,
        temperature=0.7,
        seed=seed,
        stream=True,
        stream_options={"include_usage": True},
    )
    first, calls, usage, timings = None, {}, None, {}
    for chunk in stream:
        first = first or time.perf_counter()  # the first chunk goes out with the first token
        for c in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(c.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            call["id"] = c.id or call["id"]
            if c.function and c.function.name:
                call["function"]["name"] = c.function.name
            if c.function and c.function.arguments:
                call["function"]["arguments"] += c.function.arguments
        if chunk.usage is not None:
            usage, timings = chunk.usage, _timings(chunk)
    if not calls or usage is None:
        raise NoCall(f"step without a call: {calls!r} {usage!r}")
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    return {
        "calls": [calls[i] for i in sorted(calls)],
        "prompt": usage.prompt_tokens,
        "reply": usage.completion_tokens,
        "cached": cached or 0,
        "evaluated": usage.prompt_tokens - (cached or 0),
        "ttft_ms_engine": timings.get("ttft_ms"),
        "ttft_ms_client": (first - sent) * 1000,
        "prompt_ms": timings.get("prompt_ms"),
    }


def agent_loop(client: openai.OpenAI, model: str, steps: int, round_no: int) -> list[dict[str, Any]]:
    """The loop, begun again (a new system prompt, new seeds) when a call does not close."""
    for attempt in range(1, 4):
        try:
            return _agent_loop(client, model, steps, round_no, attempt)
        except NoCall as exc:
            print(f"round {round_no}, attempt {attempt}: {exc}; the loop starts again", file=sys.stderr)
    raise RuntimeError("three loops in a row had a call that did not close")


def _agent_loop(client: openai.OpenAI, model: str, steps: int, round_no: int, attempt: int) -> list[dict[str, Any]]:
    messages: list[dict] = [
        {"role": "system", "content": f"You are a careful coding agent (run {round_no}.{attempt})."},
        {"role": "user", "content": TASK},
    ]
    out: list[dict[str, Any]] = []
    for k in range(steps):
        choice, result = LOOP[k % len(LOOP)]
        step = loop_step(client, model, messages, choice, seed=1000 * round_no + 100 * attempt + k)
        if out:  # what the cache cannot hold: the prompt past the last step's prompt and reply
            # (the reply's count includes its end-of-generation token, which no prompt holds)
            step["new"] = step["prompt"] - out[-1]["prompt"] - (out[-1]["reply"] - 1)
            step["eval_per_new"] = step["evaluated"] / max(step["new"], 1)
            step["last_reply_reevaluated"] = step["evaluated"] - step["new"]  # == last reply: none of it reused
        else:
            step["new"], step["eval_per_new"] = step["prompt"], step["evaluated"] / max(step["prompt"], 1)
        step["tool"], step["attempt"] = step["calls"][0]["function"]["name"], attempt
        step["call"] = step["calls"][0]
        out.append(step)
        messages.append({"role": "assistant", "content": None, "tool_calls": step.pop("calls")})
        messages.append({"role": "tool", "tool_call_id": messages[-1]["tool_calls"][0]["id"], "content": result})
    return out


def speed_pairs(client: openai.OpenAI, model: str, pairs: int, round_no: int, no_eos: dict[str, int]) -> list[dict[str, Any]]:
    """Alternating: a forced write_file call (tool grammar), json_schema of the same call, and
    plain decoding of as many tokens on the same prompt text: /v1/completions given the prompt the
    chat path renders (the Q:/A: transcript with the tools in the system message), so no stop
    string ends it early, and `no_eos` keeps the model from ending it."""
    from app.engine.host.fallback_formats import FALLBACKS
    from app.tools.generic import generic_messages, tools_text
    from app.tools.spec import read_openai_tools

    tools = read_openai_tools({"tools": TOOLS, "tool_choice": "auto"}).tools
    head = f"You are a careful coding agent (speed {round_no})."
    tool_messages = [{"role": "system", "content": head}, {"role": "user", "content": SPEED_TASK}]
    schema_messages = [{"role": "system", "content": head + "\n\n" + tools_text(tools)}, {"role": "user", "content": SPEED_TASK}]
    rendered = FALLBACKS["qa"].render(generic_messages(tool_messages, tools), "", "")
    write = TOOLS[3]["function"]
    call_schema = {
        "type": "object",
        "properties": {"name": {"const": "write_file"}, "arguments": write["parameters"]},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    out = []
    for i in range(pairs):
        seed = 1000 * round_no + i
        common = dict(model=model, temperature=0.8, seed=seed)
        tool = client.chat.completions.create(
            messages=tool_messages,
            tools=TOOLS,
            max_tokens=400,
            parallel_tool_calls=False,
            tool_choice={"type": "function", "function": {"name": "write_file"}},
            **common,
        )
        n = tool.usage.completion_tokens
        schema = client.chat.completions.create(
            messages=schema_messages,
            max_tokens=400,
            response_format={"type": "json_schema", "json_schema": {"name": "call", "schema": call_schema, "strict": True}},
            **common,
        )
        plain = client.completions.create(prompt=rendered, max_tokens=n, logit_bias=no_eos, **common)
        out.append(
            {
                "tokens": {"tool": n, "json_schema": schema.usage.completion_tokens, "plain": plain.usage.completion_tokens},
                "prompt_tokens": {
                    "tool": tool.usage.prompt_tokens,
                    "json_schema": schema.usage.prompt_tokens,
                    "plain": plain.usage.prompt_tokens,
                },
                "tg": {
                    "tool": _timings(tool).get("tokens_per_second"),
                    "json_schema": _timings(schema).get("tokens_per_second"),
                    "plain": _timings(plain).get("tokens_per_second"),
                },
            }
        )
    return out


def check_rerender(env: dict[str, str], loop: list[dict[str, Any]]) -> None:
    """Per step: the model's raw reply (from the record) and whether the next prompt re-renders
    it byte for byte (the generic format's `call_text` after the transcript's lead), which
    the KV cache needs to hold the reply."""
    from app.tools.generic import call_text

    raw: dict[str, str] = {}
    for line in cove(env, "record", "export").stdout.splitlines():
        entry = json.loads(line)
        for call in json.loads(entry.get("params") or "{}").get("tool_calls") or []:
            raw[call["id"]] = entry.get("reply") or ""
    for step in loop:
        call = step.pop("call")
        text = raw.get(call["id"])
        again = call_text(call)
        step["raw_reply"] = text
        step["rerenders"] = text is not None and text.endswith(again) and not text[: -len(again)].strip()


def one_round(env: dict[str, str], model: str, steps: int, pairs: int, round_no: int, no_eos: dict[str, int]) -> dict[str, Any]:
    with serving(env) as (base, _server):
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=600)
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)  # load
        loop = agent_loop(client, model, steps, round_no)
        speed = speed_pairs(client, model, pairs, round_no, no_eos)
    check_rerender(env, loop)
    later = loop[1:]
    ratios = [p["tg"]["tool"] / p["tg"]["plain"] for p in speed if p["tg"]["tool"] and p["tg"]["plain"]]
    schema_ratios = [p["tg"]["json_schema"] / p["tg"]["plain"] for p in speed if p["tg"]["json_schema"] and p["tg"]["plain"]]
    return {
        "loop": loop,
        "speed": speed,
        "later_ttft_ms_engine": statistics.median(s["ttft_ms_engine"] for s in later),
        "later_ttft_ms_client": statistics.median(s["ttft_ms_client"] for s in later),
        "first_ttft_ms_engine": loop[0]["ttft_ms_engine"],
        "later_eval_per_new_max": max(s["eval_per_new"] for s in later),
        "later_eval_per_new_median": statistics.median(s["eval_per_new"] for s in later),
        "tg_tool": statistics.median(p["tg"]["tool"] for p in speed),
        "tg_json_schema": statistics.median(p["tg"]["json_schema"] for p in speed),
        "tg_plain": statistics.median(p["tg"]["plain"] for p in speed),
        "tg_ratio_tool": statistics.median(ratios),
        "tg_ratio_json_schema": statistics.median(schema_ratios),
    }


SUMMARY_KEYS = (
    "first_ttft_ms_engine",
    "later_ttft_ms_engine",
    "later_ttft_ms_client",
    "later_eval_per_new_median",
    "later_eval_per_new_max",
    "tg_tool",
    "tg_json_schema",
    "tg_plain",
    "tg_ratio_tool",
    "tg_ratio_json_schema",
)


def describe(result: dict[str, Any]) -> str:
    lines = []
    for r, rnd in enumerate(result["rounds"], 1):
        lines.append(f"round {r}: agent loop")
        lines.append(
            "  step  tool                   prompt  cached  evaluated  new  eval/new  TTFT engine  TTFT client"
            "  reply  evaluated-new  re-renders"
        )
        for k, s in enumerate(rnd["loop"], 1):
            lines.append(
                f"  {k:>4}  {s['tool']:<21} {s['prompt']:>7} {s['cached']:>7} {s['evaluated']:>10} {s['new']:>4}"
                f" {s['eval_per_new']:>9.2f} {s['ttft_ms_engine']:>9.0f} ms {s['ttft_ms_client']:>9.0f} ms"
                f" {s['reply']:>6} {s.get('last_reply_reevaluated', ''):>14}  {s['rerenders']!s:>10}"
            )
        for k, s in enumerate(rnd["loop"], 1):
            if not s["rerenders"]:
                lines.append(f"  step {k}'s reply, not re-rendered byte for byte: {s['raw_reply']!r}")
        lines.append("  speed (tok/s, engine):   tool grammar  json_schema  plain   tokens (tool/schema/plain)")
        for p in rnd["speed"]:
            t, n = p["tg"], p["tokens"]
            lines.append(
                f"                           {t['tool']:>12.1f} {t['json_schema']:>12.1f} {t['plain']:>6.1f}"
                f"   {n['tool']}/{n['json_schema']}/{n['plain']}"
            )
    m = result["medians"]
    lines.append(f"medians of {len(result['rounds'])} rounds:")
    lines.append(
        f"  TTFT step 1 (tools block evaluated) {m['first_ttft_ms_engine']:.0f} ms; later steps "
        f"{m['later_ttft_ms_engine']:.0f} ms engine, {m['later_ttft_ms_client']:.0f} ms client"
    )
    lines.append(
        f"  later steps evaluated / new tokens: median {m['later_eval_per_new_median']:.2f}, worst "
        f"{m['later_eval_per_new_max']:.2f} (goal <= {GOAL_EVAL_RATIO}): "
        + ("met" if m["later_eval_per_new_max"] <= GOAL_EVAL_RATIO else "NOT met")
    )
    lines.append(
        f"  tg: tool grammar {m['tg_tool']:.1f}, json_schema {m['tg_json_schema']:.1f}, plain {m['tg_plain']:.1f}"
        f" tok/s; tool / plain {m['tg_ratio_tool']:.3f} (goal >= {GOAL_TG_RATIO}: "
        + ("met" if m["tg_ratio_tool"] >= GOAL_TG_RATIO else "NOT met")
        + f"), json_schema / plain {m['tg_ratio_json_schema']:.3f}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each with its own cove serve")
    parser.add_argument("--steps", type=int, default=5, help="steps of the agent loop")
    parser.add_argument("--pairs", type=int, default=3, help="alternations of tool grammar / json_schema / plain a round")
    parser.add_argument("--content-chars", type=int, default=CONTENT_CHARS, help="the forced call's string, in characters")
    parser.add_argument("--model", help="a .gguf instead of the starter")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    content = TOOLS[3]["function"]["parameters"]["properties"]["content"]
    content["minLength"] = content["maxLength"] = args.content_chars
    env, model = model_env(args.model)
    no_eos = {} if args.model else STARTER_NO_EOS
    rounds = [one_round(env, model, args.steps, args.pairs, r, no_eos) for r in range(1, args.rounds + 1)]
    result = {"model": model, "rounds": rounds, "medians": {k: statistics.median(r[k] for r in rounds) for k in SUMMARY_KEYS}}
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
