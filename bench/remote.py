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
than Cove's (each on a connection opened before its clock starts, as Cove's own is kept open).

Third, the paired case (bench/remote_paired.py, issue 52): a second Cove pairs with the first
(`cove serve --host 127.0.0.2`, HTTPS with its machine certificate) and the same requests go
through that connection, pinned certificate and key, against the serving Cove's timings; plus the
time to pair (median of `--pairings`, default 3).

Run: .venv/bin/python bench/remote.py [--rounds 3] [--requests 5] [--cases llama-server,cove-serve,paired] [--json]
`--cases paired` alone: just the paired case; `--model FILE.gguf`: another model than the starter.
Goals: tg ratio >= 0.98; TTFT over <= 10 ms p50 (the paired case, over TLS: <= 15 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from app.remote.connections import Connection, host_of, normalise_url, pinned_file  # noqa: E402
from app.remote.engine import RemoteEngine  # noqa: E402
from app.remote.http_client import ssl_context  # noqa: E402
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
CASES = ("llama-server", "cove-serve", "paired")
KEYS = {"llama-server": "llama_server", "cove-serve": "cove_serve", "paired": "paired"}


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


def raw_ttft_over(engine: RemoteEngine, model: RemoteModel, seed: int) -> float:
    """The same request read with plain httpx (no Cove): its time to first content over the
    server's own first-token time, ms. What the server and the loopback add without Cove.
    It reaches the server as the engine does (the connection's certificate, pinned where it was
    paired, and its key) on a connection of its own, opened by a GET before the clock starts, as
    the engine's is kept open: no TCP or TLS handshake falls in the time. (A connection kept from
    one of these streamed requests to the next was now and then closed under the next one.)"""
    connection = engine.connection
    verify = ssl_context(connection.ca_file, pinned=pinned_file(connection.ca_file)) if connection.tls else True
    headers = {"Authorization": f"Bearer {engine.http.key}"} if engine.http.key else {}
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
    with httpx.Client(timeout=300, verify=verify, headers=headers, trust_env=False) as http:
        http.get(f"{connection.base_url}/models").raise_for_status()
        sent = time.perf_counter()
        with http.stream("POST", f"{connection.base_url}/chat/completions", json=body) as response:
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
        raise RuntimeError(f"the plain request to {connection.base_url} gave no first token or no timings")
    return (first - sent) * 1000 - float(reference)


def batch(engine: RemoteEngine, model: RemoteModel, seeds: range) -> dict[str, Any]:
    replies = [one_request(engine, model, s) for s in seeds]
    raw = [raw_ttft_over(engine, model, s) for s in seeds]
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
        # Beside the median: the replies that ran to max_tokens only. One that ends on its own
        # end-of-turn token after a few dozen tokens reads above 1 through cove serve (its
        # timings.tokens_per_second for such a reply is lower than the rate its tokens arrived at).
        "tg_ratio_full_replies": statistics.median(full) if (full := full_replies(rounds)) else None,
        "full_replies": len(full),
        "rounds": rounds,
    }


def full_replies(rounds: list[dict[str, Any]]) -> list[float]:
    """The tg ratios of the replies that ran to all N_GEN tokens."""
    return [reply["tg_ratio"] for r in rounds for reply in r["replies"] if reply["gen_tokens"] == N_GEN]


def starter_home(model: Path | None = None) -> tuple[dict[str, str], str, Path]:
    """A temporary COVE_HOME with the starter (or `model`) imported: its environment, the model's
    name, its file."""
    home = Path(tempfile.mkdtemp(prefix="cove-remote-bench-"))
    env = {**os.environ, "COVE_HOME": str(home), "HOME": str(home)}
    if model is None:
        from models.starter import prepare_starter_file

        model = prepare_starter_file(home / "models")

    def cove(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True
        ).stdout

    cove("models", "import", str(model))
    return env, json.loads(cove("models", "list", "--json"))[0]["name"], model


def log_round(r: int, rounds: int, per_server: dict[str, list[dict[str, Any]]], log: Any) -> None:
    log(
        f"round {r + 1}/{rounds}: "
        + "; ".join(
            f"{name} tg ratio {b[-1]['tg_ratio']:.3f}, TTFT over {b[-1]['ttft_over_ms_p50']:.1f} ms" for name, b in per_server.items()
        )
    )


def run_local(
    env: dict[str, str], cove_model: str, model_file: Path, cases: tuple[str, ...], rounds: int, requests: int, threads: int, log: Any
) -> dict[str, Any]:
    """The llama-server and cove serve cases (those of `cases`), round by round side by side."""
    gate = NetworkGate()
    work = Path(env["COVE_HOME"])
    engines: dict[str, tuple[RemoteEngine, RemoteModel, str]] = {}
    per_server: dict[str, list[dict[str, Any]]] = {KEYS[c]: [] for c in cases}
    with ExitStack() as stack:
        if "llama-server" in cases:
            log("building llama-server (once; cached in Cove's tools folder)")
            binary = llama_server_binary(log=log)
            ls = stack.enter_context(llama_server(model_file, work, alias="starter", n_ctx=4096, threads=threads, binary=binary))
            log(f"llama-server on {ls.url} ({threads} threads)")
            engines["llama_server"] = connect("llama", ls.base_url, gate)
        if "cove-serve" in cases:
            cove_base, _proc = stack.enter_context(serving(env))
            log(f"cove serve on {cove_base}")
            cs_engine, cs_model, cs_kind = connect("cove", cove_base, gate)
            if cs_model.model_id != cove_model:
                cs_model = RemoteModel(connection="cove", model_id=cove_model, host=cs_model.host, kind=cs_kind)
            engines["cove_serve"] = (cs_engine, cs_model, cs_kind)
        for engine, model, _kind in engines.values():
            one_request(engine, model, 0)  # warm-up: caches, and cove serve loads its engine here
        for r in range(rounds):
            seeds = range(1 + r * requests, 1 + (r + 1) * requests)
            for key, (engine, model, _kind) in engines.items():
                per_server[key].append(batch(engine, model, seeds))
            log_round(r, rounds, per_server, log)
        for engine, _model, _kind in engines.values():
            engine.close()
    return {key: summary(per_server[key], kind) for key, (_e, _m, kind) in engines.items()}


def run(
    rounds: int, requests: int, threads: int, log: Any, cases: tuple[str, ...] = CASES, model: Path | None = None, pairings: int = 3
) -> dict[str, Any]:
    env, cove_model, model_file = starter_home(model)
    load_before = psutil.getloadavg()[0]
    result: dict[str, Any] = {
        "model": model_file.name,
        "threads": threads,
        "n_gen": N_GEN,
        "temperature": TEMPERATURE,
        "load_average_before": round(load_before, 2),
        "rounds": rounds,
        "requests_per_round": requests,
        "goals": {"tg_ratio": GOAL_TG_RATIO, "ttft_over_ms_p50": GOAL_TTFT_OVER_MS},
    }
    local = tuple(c for c in cases if c != "paired")
    try:
        if local:
            result.update(run_local(env, cove_model, model_file, local, rounds, requests, threads, log))
        if "paired" in cases:
            # After the others: it adds a `cove serve` key to the home (cove serve listens on an
            # address other than 127.0.0.1, localhost or ::1 only once one exists), which the
            # loopback case ran without.
            from bench.remote_paired import run_paired

            result["paired"] = run_paired(env, cove_model, rounds, requests, log, pairings)
    finally:
        shutil.rmtree(env["COVE_HOME"], ignore_errors=True)  # the servers are stopped by now
    return result


def case_line(s: dict[str, Any], label: str, ref: str, goal_ttft_ms: float) -> str:
    tg_ok = "ok" if s["tg_ratio"] >= GOAL_TG_RATIO else "below the goal"
    ttft_ok = "ok" if s["ttft_over_ms_p50"] <= goal_ttft_ms else "above the goal"
    per_round = ", ".join(f"{r['tg_ratio']:.3f}" for r in s["rounds"])
    over = ", ".join(f"{r['ttft_over_ms_p50']:.1f}" for r in s["rounds"])
    n_full = s["full_replies"]
    full = f"{n_full} replies of all {N_GEN} tokens: {s['tg_ratio_full_replies']:.3f}" if n_full else f"no reply ran to {N_GEN} tokens"
    return (
        f"{label} (probed as {s['kind']}): tg through the connection {s['cove_tg_tps']:.1f} tok/s, {ref} "
        f"{s['server_tg_tps']:.1f}: ratio {s['tg_ratio']:.3f} ({tg_ok}; rounds {per_round}; {full}); TTFT over "
        f"the server's {s['ttft_over_ms_p50']:.1f} ms p50 ({ttft_ok}, goal {goal_ttft_ms:g}; rounds {over}), plain httpx "
        f"{s['raw_ttft_over_ms_p50']:.1f} ms"
    )


def describe(result: dict[str, Any]) -> str:
    lines = [
        f"{result['model']}, {result['threads']} threads, {result['rounds']} rounds x "
        f"{result['requests_per_round']} requests of {result['n_gen']} tokens (medians)"
    ]
    for key, label, ref in (("llama_server", "llama-server", "its timings"), ("cove_serve", "cove serve", "its served timings")):
        if key in result:
            lines.append(case_line(result[key], label, ref, GOAL_TTFT_OVER_MS))
    if "paired" in result:
        from bench.remote_paired import describe_paired

        lines.extend(describe_paired(result["paired"]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5, help="streamed requests to each server a round")
    parser.add_argument("--threads", type=int, default=None, help="llama-server's threads (default: physical cores, as cove serve)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"which of {', '.join(CASES)} to run (comma-separated; default all)")
    parser.add_argument("--model", type=Path, default=None, help="a .gguf to serve instead of the starter")
    parser.add_argument("--pairings", type=int, default=3, help="the paired case: pairings timed (a code each)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = tuple(c for c in CASES if c in {x.strip() for x in args.cases.split(",")})
    unknown = {x.strip() for x in args.cases.split(",")} - set(CASES)
    if unknown or not cases:
        parser.error(f"--cases takes {', '.join(CASES)}; not {', '.join(sorted(unknown)) or 'nothing'}")

    def log(message: str) -> None:
        print(f"bench/remote.py: {message}", file=sys.stderr, flush=True)

    load = psutil.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        log(f"warning: the CPU is already busy (load average {load:.1f}); the figures will be noisy")
    result = run(
        max(1, args.rounds), max(1, args.requests), args.threads or default_threads(), log, cases, args.model, max(1, args.pairings)
    )
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
