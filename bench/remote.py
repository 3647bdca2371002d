"""What a connection to one of your own servers costs: the starter model behind llama.cpp's
`llama-server` on loopback, chatted with through Cove's RemoteEngine, against the server's own
clocks for the very same request; then the same through `cove serve`, with Cove's served
timings as the reference.

Every request is the same shape (a story prompt, max_tokens 128, temperature 0.8, a seed per
request) and gives both figures at once:
  tg ratio   Cove's gen_tps (tokens after the first over the time from the first TokenEvent to
             the last, on Cove's arrival clock) / the server's own rate for that reply:
             llama-server's timings.predicted_per_second ((n-1) over the time from its first
             sampled token to its last), cove serve's timings.tokens_per_second (its engine's
             gen_tps, the same definition);
  TTFT over  Cove's time to first token - the server's prompt time: llama-server's
             timings.prompt_ms (from taking the task to sampling the first token), cove serve's
             timings.ttft_ms (its engine client's, from starting the reply to the first token).
Both servers start once, answer one warm-up request, then each round sends `--requests` to
llama-server and the same to cove serve. Reported: each round's medians and the medians over
the rounds. Beside them, the same requests read with plain httpx (no Cove): how much of the
TTFT over is the server's and the loopback's own (template, tokenizing, queueing, HTTP) rather
than Cove's.

Run: .venv/bin/python bench/remote.py [--rounds 3] [--requests 5] [--json]
Goals: tg ratio >= 0.98; TTFT over <= 10 ms p50.
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

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from app.remote.connections import Connection, host_of, normalise_url  # noqa: E402
from app.remote.engine import RemoteEngine  # noqa: E402
from app.remote.probe import probe  # noqa: E402
from app.remote.remote_model import RemoteModel  # noqa: E402
from app.settings import SamplingParams  # noqa: E402
from app.speed import default_threads  # noqa: E402
from bench.serve_process import serving  # noqa: E402
from models.network import NetworkGate  # noqa: E402
from tests.support.llama_server import llama_server, llama_server_binary  # noqa: E402

N_GEN = 128
TEMPERATURE = 0.8
PROMPT = "Write a long story about a lighthouse keeper and a storm ({i})."
GOAL_TG_RATIO = 0.98
GOAL_TTFT_OVER_MS = 10.0


def connect(name: str, base_url: str, gate: NetworkGate) -> tuple[RemoteEngine, RemoteModel, str]:
    """A connection to `base_url` (no key: both servers listen on loopback only), its first model, the kind probed."""
    base = normalise_url(base_url)
    conn = Connection(name=name, base_url=base, ca_file=None, host=host_of(base))
    info = probe(conn, None, gate)
    if not info.models:
        raise RuntimeError(f"{base_url} lists no models")
    model = RemoteModel(connection=name, model_id=str(info.models[0]["id"]), host=conn.host, kind=info.kind)
    return RemoteEngine(conn, None, gate), model, info.kind


def one_request(engine: RemoteEngine, model: RemoteModel, seed: int) -> dict[str, Any]:
    """One streamed reply: Cove's clocks and the server's timings for it."""
    sp = SamplingParams()
    gen = engine.generate(
        ReplyRequest.chat(
            [{"role": "user", "content": PROMPT.format(i=seed)}],
            sampling=Sampling(
                max_tokens=N_GEN,
                temperature=TEMPERATURE,
                top_p=sp.top_p,
                top_k=sp.top_k,
                min_p=sp.min_p,
                repeat_penalty=sp.repeat_penalty,
                seed=seed,
            ),
        ),
        model=model,
    )
    for _event in gen:  # drain the TokenEvents as a window would; the metrics come with the FinishedEvent
        pass
    fin = gen.wait()
    if fin.status not in ("complete", "length"):
        raise RuntimeError(f"the reply ended {fin.status}: {fin.error}")
    metrics = fin.metrics
    server = (metrics.get("remote") or {}).get("server_timings") or {}
    if model.kind == "llama-server":
        server_tps, server_first_ms = server.get("predicted_per_second"), server.get("prompt_ms")
    else:  # cove serve: its engine's own clocks
        server_tps, server_first_ms = server.get("tokens_per_second"), server.get("ttft_ms")
    if not metrics.get("gen_tps") or not server_tps or server_first_ms is None or metrics.get("ttft_ms") is None:
        raise RuntimeError(f"a figure is missing from the reply's metrics: {json.dumps(metrics)[:600]}")
    return {
        "gen_tokens": metrics.get("gen_tokens"),
        "cove_tg_tps": float(metrics["gen_tps"]),
        "server_tg_tps": float(server_tps),
        "tg_ratio": float(metrics["gen_tps"]) / float(server_tps),
        "cove_ttft_ms": float(metrics["ttft_ms"]),
        "server_first_ms": float(server_first_ms),
        "ttft_over_ms": float(metrics["ttft_ms"]) - float(server_first_ms),
    }


def raw_ttft_over(base_url: str, model: RemoteModel, seed: int) -> float:
    """The same request read with plain httpx (no Cove): its time to first content over the
    server's own first-token time, ms. What the server and the loopback add without Cove."""
    sp = SamplingParams()
    # A prompt of its own (not the one Cove's request just sent, which the server would find whole in its cache).
    body = {
        "model": model.model_id,
        "messages": [{"role": "user", "content": PROMPT.format(i=-seed)}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": TEMPERATURE,
        "top_p": sp.top_p,
        "top_k": sp.top_k,
        "min_p": sp.min_p,
        "repeat_penalty": sp.repeat_penalty,
        "seed": seed,
    }
    first: float | None = None
    timings: dict[str, Any] = {}
    with httpx.Client(timeout=300) as http:
        sent = time.perf_counter()
        with http.stream("POST", f"{base_url}/chat/completions", json=body) as response:
            for line in response.iter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if first is None and chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                    first = time.perf_counter()
                if isinstance(chunk.get("timings"), dict):
                    timings = chunk["timings"]
    reference = timings.get("prompt_ms") if model.kind == "llama-server" else timings.get("ttft_ms")
    if first is None or reference is None:
        raise RuntimeError(f"the plain request to {base_url} gave no first token or no timings")
    return (first - sent) * 1000 - float(reference)


def batch(engine: RemoteEngine, model: RemoteModel, seeds: range) -> dict[str, Any]:
    replies = [one_request(engine, model, s) for s in seeds]
    raw = [raw_ttft_over(engine.connection.base_url, model, s) for s in seeds]
    return {
        "tg_ratio": statistics.median(r["tg_ratio"] for r in replies),
        "ttft_over_ms_p50": statistics.median(r["ttft_over_ms"] for r in replies),
        "raw_ttft_over_ms_p50": statistics.median(raw),
        "cove_tg_tps": statistics.median(r["cove_tg_tps"] for r in replies),
        "server_tg_tps": statistics.median(r["server_tg_tps"] for r in replies),
        "replies": replies,
    }


def summary(rounds: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "tg_ratio": statistics.median(r["tg_ratio"] for r in rounds),
        "ttft_over_ms_p50": statistics.median(r["ttft_over_ms_p50"] for r in rounds),
        "raw_ttft_over_ms_p50": statistics.median(r["raw_ttft_over_ms_p50"] for r in rounds),
        "cove_tg_tps": statistics.median(r["cove_tg_tps"] for r in rounds),
        "server_tg_tps": statistics.median(r["server_tg_tps"] for r in rounds),
        "rounds": rounds,
    }


def starter_home() -> tuple[dict[str, str], str, Path]:
    """A temporary COVE_HOME with the starter imported: its environment, the model's name, its file."""
    from models.starter import prepare_starter_file

    home = Path(tempfile.mkdtemp(prefix="cove-remote-bench-"))
    env = {**os.environ, "COVE_HOME": str(home), "HOME": str(home)}
    starter = prepare_starter_file(home / "models")

    def cove(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True
        ).stdout

    cove("models", "import", str(starter))
    return env, json.loads(cove("models", "list", "--json"))[0]["name"], starter


def run(rounds: int, requests: int, threads: int, log: Any) -> dict[str, Any]:
    log("building llama-server (once; cached in Cove's tools folder)")
    binary = llama_server_binary(log=log)
    env, cove_model, starter = starter_home()
    gate = NetworkGate()
    work = Path(env["COVE_HOME"])
    per_server: dict[str, list[dict[str, Any]]] = {"llama_server": [], "cove_serve": []}
    load_before = psutil.getloadavg()[0]
    with llama_server(starter, work, alias="starter", n_ctx=4096, threads=threads, binary=binary) as ls, serving(env) as (cove_base, _proc):
        log(f"llama-server on {ls.url} ({threads} threads), cove serve on {cove_base}")
        ls_engine, ls_model, ls_kind = connect("llama", ls.base_url, gate)
        cs_engine, cs_model, cs_kind = connect("cove", cove_base, gate)
        if cs_model.model_id != cove_model:
            cs_model = RemoteModel(connection="cove", model_id=cove_model, host=cs_model.host, kind=cs_kind)
        one_request(ls_engine, ls_model, 0)  # warm-up: caches, and cove serve loads its engine here
        one_request(cs_engine, cs_model, 0)
        for r in range(rounds):
            seeds = range(1 + r * requests, 1 + (r + 1) * requests)
            per_server["llama_server"].append(batch(ls_engine, ls_model, seeds))
            per_server["cove_serve"].append(batch(cs_engine, cs_model, seeds))
            log(
                f"round {r + 1}/{rounds}: "
                + "; ".join(
                    f"{name} tg ratio {b[-1]['tg_ratio']:.3f}, TTFT over {b[-1]['ttft_over_ms_p50']:.1f} ms"
                    for name, b in per_server.items()
                )
            )
    return {
        "model": starter.name,
        "threads": threads,
        "n_gen": N_GEN,
        "temperature": TEMPERATURE,
        "load_average_before": round(load_before, 2),
        "rounds": rounds,
        "requests_per_round": requests,
        "goals": {"tg_ratio": GOAL_TG_RATIO, "ttft_over_ms_p50": GOAL_TTFT_OVER_MS},
        "llama_server": summary(per_server["llama_server"], ls_kind),
        "cove_serve": summary(per_server["cove_serve"], cs_kind),
    }


def describe(result: dict[str, Any]) -> str:
    lines = [
        f"{result['model']}, {result['threads']} threads, {result['rounds']} rounds x "
        f"{result['requests_per_round']} requests of {result['n_gen']} tokens (medians)"
    ]
    for key, label, ref in (("llama_server", "llama-server", "its timings"), ("cove_serve", "cove serve", "its served timings")):
        s = result[key]
        tg_ok = "ok" if s["tg_ratio"] >= GOAL_TG_RATIO else "below the goal"
        ttft_ok = "ok" if s["ttft_over_ms_p50"] <= GOAL_TTFT_OVER_MS else "above the goal"
        per_round = ", ".join(f"{r['tg_ratio']:.3f}" for r in s["rounds"])
        over = ", ".join(f"{r['ttft_over_ms_p50']:.1f}" for r in s["rounds"])
        lines.append(
            f"{label} (probed as {s['kind']}): tg through the connection {s['cove_tg_tps']:.1f} tok/s, {ref} "
            f"{s['server_tg_tps']:.1f}: ratio {s['tg_ratio']:.3f} ({tg_ok}; rounds {per_round}); TTFT over "
            f"the server's {s['ttft_over_ms_p50']:.1f} ms p50 ({ttft_ok}; rounds {over}), plain httpx "
            f"{s['raw_ttft_over_ms_p50']:.1f} ms"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5, help="streamed requests to each server a round")
    parser.add_argument("--threads", type=int, default=None, help="llama-server's threads (default: physical cores, as cove serve)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    def log(message: str) -> None:
        print(f"bench/remote.py: {message}", file=sys.stderr, flush=True)

    load = psutil.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        log(f"warning: the CPU is already busy (load average {load:.1f}); the figures will be noisy")
    result = run(max(1, args.rounds), max(1, args.requests), args.threads or default_threads(), log)
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
