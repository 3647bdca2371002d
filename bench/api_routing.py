"""Slot reuse: 4 clients, each holding 5 multi-turn conversations one after another, against
`cove serve` on the starter model with one slot (`--parallel 1`: a conversation's next turn
finds its state in the engine's RAM cache, or is evaluated again) and with 4 slots (`--parallel
4`: the engine gives each turn the slot whose cache holds the longest prefix of it), each with
the engine's RAM cache of states (256 MB) and without it. (It measured routing between copies of
a model before one engine per model served several conversations in slots.)

Reported per run: prompt tokens sent and evaluated (sent minus those the engine reused from its
slots and caches), time to first token p50/p99 as the clients see it, failed requests, whether
every request is in the written record exactly once, and the engine process's memory (USS).

The workload's shape decides how much reuse can save: `--turns` sets the turns of each
conversation (4 by default), and `--shared-system` gives each client one long system prompt for
all its conversations (an editor's or an agent's instructions) instead of a short one each.

Run: .venv/bin/python bench/api_routing.py [--turns 4] [--shared-system] [--json]   (bench/api_load.py runs it too)
Goal: 4 slots evaluate no more prompt tokens than 1; no failure; no lost record.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.serve_process import serving  # noqa: E402

CLIENTS, CONVERSATIONS, N_GEN = 4, 5, 24
TURNS = 4  # --turns
SHARED_SYSTEM = False  # --shared-system
TOPICS = ("lighthouses", "tides", "owls", "bread", "glaciers", "violins", "bees", "maps", "comets", "gardens")


def cove(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True
    )


def _turn(http: httpx.Client, base: str, model: str, messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": N_GEN,
        "temperature": 0.8,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    first, text, usage = None, [], None
    with http.stream("POST", f"{base}/chat/completions", json=body) as response:
        if response.status_code != 200:
            return {"failed": f"HTTP {response.status_code}"}
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                return {"failed": chunk["error"].get("message")}
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                first = first or time.perf_counter()
                text.append(chunk["choices"][0]["delta"]["content"])
            if chunk.get("usage"):
                usage = chunk["usage"]
    if usage is None:
        return {"failed": "no usage"}
    return {
        "ttft_ms": ((first or time.perf_counter()) - sent) * 1000,
        "reply": "".join(text),
        "prompt": usage["prompt_tokens"],
        "cached": usage["prompt_tokens_details"]["cached_tokens"],
    }


def _client(base: str, model: str, index: int, results: list[dict[str, Any]]) -> None:
    with httpx.Client(timeout=600) as http:
        for c in range(CONVERSATIONS):
            topic = TOPICS[(index * CONVERSATIONS + c) % len(TOPICS)]
            system = (
                f"You are client {index}'s assistant. Answer briefly, cite nothing, keep to the topic the person"
                " names, and never repeat an earlier answer. " * 12
                if SHARED_SYSTEM
                else f"You are client {index}'s patient tutor on {topic}. " * 6
            )
            messages = [{"role": "system", "content": system}]
            for t in range(TURNS):
                messages.append({"role": "user", "content": f"Tell me something new about {topic} (part {t + 1})."})
                got = _turn(http, base, model, messages, seed=index * 1000 + c * 10 + t)
                results.append(got)
                if "failed" in got:
                    return
                messages.append({"role": "assistant", "content": got["reply"]})


def _engine_uss(server: subprocess.Popen) -> list[int]:
    import psutil

    children = psutil.Process(server.pid).children(recursive=True)
    return sorted(int(p.memory_full_info().uss) for p in children if "app.engine.host.main" in " ".join(p.cmdline()))


CACHE_SIZES = (("state_cache_256_mb", 256), ("no_state_cache", 0))
SLOTS = (1, 4)


def run_slots(env: dict[str, str], model: str, parallel: int, cache_ram_mb: int = 256) -> dict[str, Any]:
    before = len(cove(env, "record", "export", "--format", "jsonl").stdout.splitlines())
    with serving(env, "--parallel", str(parallel), "--cache-ram", str(cache_ram_mb)) as (base, server):
        results: list[dict[str, Any]] = []
        threads = [threading.Thread(target=_client, args=(base, model, i, results)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        uss = _engine_uss(server)
    done = [r for r in results if "failed" not in r]
    after = len(cove(env, "record", "export", "--format", "jsonl").stdout.splitlines())
    ttft = sorted(r["ttft_ms"] for r in done)
    sent, cached = sum(r["prompt"] for r in done), sum(r["cached"] for r in done)
    return {
        "parallel": parallel,
        "cache_ram_mb": cache_ram_mb,
        "requests": len(results),
        "failed": len(results) - len(done),
        "records_added": after - before,
        "prompt_tokens": sent,
        "evaluated_tokens": sent - cached,
        "ttft_ms_p50": statistics.median(ttft) if ttft else None,
        "ttft_ms_p99": ttft[min(len(ttft) - 1, round(0.99 * (len(ttft) - 1)))] if ttft else None,
        "engine_uss_mib": [round(u / 2**20, 1) for u in uss],
    }


def slot_reuse(env: dict[str, str], model: str) -> dict[str, Any]:
    """One slot against four, with the engine's RAM cache of states and without it."""
    out: dict[str, Any] = {"expected_requests": CLIENTS * CONVERSATIONS * TURNS, "turns": TURNS, "shared_system": SHARED_SYSTEM}
    for label, mb in CACHE_SIZES:
        runs = {f"slots_{n}": run_slots(env, model, n, mb) for n in SLOTS}
        one, four = runs["slots_1"], runs["slots_4"]
        out[label] = {**runs, "evaluated_ratio": one["evaluated_tokens"] / max(1, four["evaluated_tokens"])}
    return out


routing_comparison = slot_reuse  # the name bench/api_load.py imports


def starter_env() -> tuple[dict[str, str], str]:
    home = Path(tempfile.mkdtemp(prefix="cove-api-bench-"))
    env = {**os.environ, "COVE_HOME": str(home), "HOME": str(home)}
    from models.starter import prepare_starter_file

    cove(env, "models", "import", str(prepare_starter_file(home / "models")))
    return env, json.loads(cove(env, "models", "list", "--json").stdout)[0]["name"]


def describe(result: dict[str, Any]) -> str:
    lines = [
        f"{CLIENTS} clients x {CONVERSATIONS} conversations x {result['turns']} turns, "
        + ("one long system prompt per client" if result["shared_system"] else "a short system prompt per conversation")
    ]
    for label, _mb in CACHE_SIZES:
        lines.append(label.replace("_", " ") + ":")
        for n in SLOTS:
            r = result[label][f"slots_{n}"]
            lines.append(
                f"  --parallel {n}: {r['requests']} requests, {r['failed']} failed, {r['records_added']} recorded;"
                f" prompt tokens {r['prompt_tokens']:,} sent, {r['evaluated_tokens']:,} evaluated; TTFT p50 "
                f"{r['ttft_ms_p50']:.0f} ms, p99 {r['ttft_ms_p99']:.0f} ms; engine USS {r['engine_uss_mib']} MiB"
            )
        lines.append(f"  one slot evaluates {result[label]['evaluated_ratio']:.2f}x the prompt tokens of four")
    return "\n".join(lines)


def main() -> int:
    global TURNS, SHARED_SYSTEM
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=TURNS, help="turns of each conversation")
    parser.add_argument("--shared-system", action="store_true", help="one long system prompt per client")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    TURNS, SHARED_SYSTEM = args.turns, args.shared_system
    env, model = starter_env()
    result = slot_reuse(env, model)
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
