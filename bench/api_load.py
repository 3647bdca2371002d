"""What the API costs: the starter model's generation speed and time to first token through
`cove serve` (one streaming client, the official openai package) against the same engine
headless (`cove bench`), in one run, alternating.

Reported: tg through the API (tokens after the first over the time from the first content
chunk to the last, as the client sees them) against `cove bench`'s tg; the client's time to
first token minus the engine's own (`timings.ttft_ms`), p50 over the requests, with the openai
client and with plain httpx (what the server adds without the client's own parsing).

Then, unless --parts says otherwise, bench/api_routing.py (4 clients x 5 multi-turn
conversations against --parallel 2, cache-aware routing against round-robin) and
bench/api_errors.py (the openai client's error cases).

Run: .venv/bin/python bench/api_load.py [--rounds 3] [--parts speed,routing,errors] [--json]
Goals: API tg >= 0.97x headless; TTFT overhead <= 5 ms p50; cache-aware routing evaluates >= 2x
fewer prompt tokens, no failed request, no lost record; 100% of the error cases right.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from bench.serve_process import serving  # noqa: E402

N_GEN = 128
ENGINE_TG: list[float] = []  # the engine's own tg of each API request (its clock, not the client's)


def cove(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True
    )


def headless_tg(env: dict[str, str], model: str) -> float:
    done = cove(env, "bench", "--model", model, "--reps", "3", "--json")
    return float(json.loads(done.stdout)["cove"]["tg_tps"])


def api_round(base: str, model: str, requests: int) -> tuple[list[float], list[float]]:
    """(client-side tg per request, client TTFT minus the engine's, ms)."""
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=300)
    rates, overheads = [], []
    for i in range(requests):
        sent = time.perf_counter()
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Write a long story about a lighthouse ({i})."}],
            max_tokens=N_GEN,
            temperature=0.8,
            seed=i,
            stream=True,
            stream_options={"include_usage": True},
        )
        stamps: list[float] = []
        engine_ttft, n_tokens = None, 0
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                stamps.append(time.perf_counter())
            if chunk.usage is not None:
                engine_ttft = (chunk.model_extra or {}).get("timings", {}).get("ttft_ms")
                n_tokens = chunk.usage.completion_tokens
                ENGINE_TG.append((chunk.model_extra or {}).get("timings", {}).get("tokens_per_second"))
        if len(stamps) > 1:  # a chunk may hold several tokens (the server joins what arrives within 20 ms)
            rates.append((n_tokens - 1) / (stamps[-1] - stamps[0]))
        if engine_ttft is not None and stamps:
            overheads.append((stamps[0] - sent) * 1000 - engine_ttft)
    return rates, overheads


def raw_ttft_overheads(base: str, model: str, requests: int) -> list[float]:
    """Client TTFT minus the engine's, ms, read with plain httpx (no openai package parsing
    each chunk): what the server itself adds."""
    out = []
    with httpx.Client(timeout=300) as http:
        for i in range(requests):
            body = {
                "model": model,
                "messages": [{"role": "user", "content": f"Tell me about the sea ({i})."}],
                "max_tokens": 16,
                "seed": i,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            sent = time.perf_counter()
            first = None
            engine_ttft = None
            with http.stream("POST", f"{base}/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: {"):
                        continue
                    chunk = json.loads(line[6:])
                    if first is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                        first = time.perf_counter()
                    if chunk.get("usage"):
                        engine_ttft = chunk["timings"]["ttft_ms"]
            if first is not None and engine_ttft is not None:
                out.append((first - sent) * 1000 - engine_ttft)
    return out


def speed(env: dict[str, str], model: str, rounds: int, requests: int) -> dict:
    """tg and TTFT overhead through the API against cove bench headless, alternating."""
    headless, api, overhead, raw = [], [], [], []
    for _ in range(rounds):
        headless.append(headless_tg(env, model))
        with serving(env) as (base, _server):
            rates, extra = api_round(base, model, requests)
            api.append(statistics.median(rates[1:] or rates))  # the first request loads the model
            overhead += extra[1:]
            raw += raw_ttft_overheads(base, model, requests)
    return {
        "headless_tg_tps": headless,
        "api_tg_tps": api,
        "api_engine_tg_tps": list(ENGINE_TG),
        "ratio": statistics.median(a / h for a, h in zip(api, headless)),
        "ttft_overhead_ms_p50": statistics.median(overhead),
        "ttft_overhead_ms": overhead,
        "raw_ttft_overhead_ms_p50": statistics.median(raw),
        "raw_ttft_overhead_ms": raw,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5, help="streamed requests a round")
    parser.add_argument("--parts", default="speed,routing,errors", help="which parts to run, comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    from bench.api_errors import run_errors
    from bench.api_routing import describe, routing_comparison, starter_env

    env, model = starter_env()
    result: dict = {}
    if "speed" in parts:
        result["speed"] = speed(env, model, args.rounds, args.requests)
    if "routing" in parts:
        result["routing"] = routing_comparison(env, model)
    if "errors" in parts:
        result["errors"] = run_errors(env, model)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if "speed" in result:
        sp = result["speed"]
        print(
            f"tg through the API {statistics.median(sp['api_tg_tps']):.1f} tok/s, headless "
            f"{statistics.median(sp['headless_tg_tps']):.1f} tok/s: ratio {sp['ratio']:.3f}; TTFT overhead p50 "
            f"{sp['ttft_overhead_ms_p50']:.1f} ms with the openai client, {sp['raw_ttft_overhead_ms_p50']:.1f} ms read with httpx"
        )
    if "routing" in result:
        print(describe(result["routing"]))
    if "errors" in result:
        er = result["errors"]
        print(
            f"openai client error cases: {er['right']}/{er['total']} right ({er['share']:.0%}); "
            + ", ".join(f"{c['case']}: got {c['got']}" for c in er["cases"] if not c["right"])
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
