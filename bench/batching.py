"""Concurrent streaming clients against `cove serve --parallel N` and llama.cpp's own
`llama-server -np N` (built from the same pinned sources), on the starter model by default.

For each N in --clients, N threads each stream one completion at once over HTTP (httpx, OpenAI's
streaming /v1/completions: both servers read exactly the same prompt tokens; --chat sends chat
messages instead, which each server wraps in its own format): a distinct ~200-token prompt per
client (a tag at its start, so no two share a prefix; distinct per run too, so no server's prompt
cache helps), 128 tokens out, temperature 0.8, end-of-generation ignored (`ignore_eos` and a -100
logit_bias on every end-of-generation token, sent to both servers). Per run and server:

  aggregate tok/s   completion tokens of all streams / (last stream finished - first request sent)
  per-stream tok/s  median over streams of (tokens - 1) / (last content chunk - first content chunk)
  TTFT p50, p99     first content chunk - request sent, ms
  engine RSS        the peak (sampled every 0.25 s) of the summed RSS of Cove's engine host processes
                    (children of `cove serve`), or of the llama-server process

Systems (--systems): `cove` (cove serve --parallel N, or --cove-parallel P), `cove-1` (cove serve
--parallel 1: one sequence at a time, Cove before slots) and `llama-server` (-np N, -c ctx*N,
--no-kv-unified, -t --threads). Every server of one N is up at once and the runs alternate
between them. Cove runs as a person runs it (drafting as it decides); the per-slot context is
Cove's default for the model, and llama-server gets the same per slot.

Run: .venv/bin/python bench/batching.py [--clients 1,2,4,8] [--runs 3] [--systems cove,cove-1,llama-server]
     [--cove-parallel P] [--threads T] [--model PATH] [--prompt-tokens 200] [--gen 128] [--chat]
     [--cove-drafting auto|off] [--json]
Goals: Cove / llama-server aggregate >= 0.95 at every N and >= 0.98 from N = 4 on (drafting off); Cove / cove-1
>= 2 at N = 4; Cove's engine RSS <= 1.15x llama-server's at every N (the same per-slot context).
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psutil  # noqa: E402

from bench.serve_process import serving  # noqa: E402

TOPICS = ("lighthouse", "glacier", "orchard", "comet", "violin", "harbour", "desert", "library", "beehive", "canyon")
PASSAGE = (
    "The keeper climbed the stairs at dusk and lit the lamp, as she had done every night for thirty years. "
    "Below her the sea moved in long grey rows, and the wind carried the smell of salt and rain over the rocks. "
    "A ship's bell rang somewhere out in the fog, slow and uneven, and she counted the strokes without meaning to. "
)
# Aggregate tok/s against llama-server (issue 34; issue 48 from 4 clients on), against one
# sequence at a time (issue 34), and engine RSS against llama-server's (issue 48).
GOAL_SERVER, GOAL_SERVER_MANY, GOAL_TODAY, GOAL_RSS = 0.95, 0.98, 2.0, 1.15


@dataclass
class Target:
    """One running server: its API base URL, the model's id there, and its engine processes."""

    base: str
    model: str
    pids: Callable[[], list[int]]


@dataclass
class Stream:
    sent: float
    stamps: list[float]
    tokens: int
    error: str | None = None
    prompt: int = 0  # the prompt's tokens as the server counted them (template included)


def vocab_tools(model_path: str) -> tuple[Callable[[str, int], str], list[int]]:
    """(trim text to n of the model's tokens, the model's end-of-generation token ids)."""
    import llama_cpp

    vocab = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    v = llama_cpp.llama_model_get_vocab(vocab.model)
    eog = [t for t in range(vocab.n_vocab()) if llama_cpp.llama_vocab_is_eog(v, t)]

    def trim(text: str, n: int) -> str:
        tokens = vocab.tokenize(text.encode(), add_bos=False)[:n]
        return vocab.detokenize(tokens).decode("utf-8", errors="ignore")

    return trim, eog


def prompts(trim: Callable[[str, int], str], tag: str, n: int, n_tokens: int) -> list[str]:
    """n distinct prompts of about n_tokens tokens; each starts with its own tag."""
    out = []
    for i in range(n):
        head = f"[{tag}-{i}] Continue this story about a {TOPICS[i % len(TOPICS)]} in your own words. "
        out.append(trim(head + PASSAGE * (1 + n_tokens // 40), n_tokens))
    return out


def stream_one(base: str, body: dict[str, Any]) -> Stream:
    """One streaming completion (a chat completion when `body` has messages); text chunks stamped
    as they arrive."""
    got = Stream(time.perf_counter(), [], 0)
    path = "chat/completions" if "messages" in body else "completions"
    with httpx.Client(timeout=900) as http, http.stream("POST", f"{base}/{path}", json=body) as response:
        if response.status_code != 200:
            response.read()
            got.error = f"HTTP {response.status_code}: {response.text[:200]}"
            return got
        usage = None
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                got.error = str(chunk["error"])[:200]
            choice = chunk["choices"][0] if chunk.get("choices") else {}
            if choice.get("delta", {}).get("content") or choice.get("text"):
                got.stamps.append(time.perf_counter())
            usage = chunk.get("usage") or usage
    got.tokens = int(usage["completion_tokens"]) if usage else len(got.stamps)
    got.prompt = int(usage.get("prompt_tokens", 0)) if usage else 0
    return got


def run_clients(target: Target, texts: list[str], gen: int, extra: dict[str, Any], chat: bool = False) -> dict[str, Any]:
    """Every text streamed at once, one thread each; the run's figures. `chat`: as chat messages
    (each server wraps them in its own chat format) rather than the same raw prompt for both."""
    streams: list[Stream] = [Stream(0.0, [], 0)] * len(texts)
    peak = PeakRss(target.pids)

    def client(i: int) -> None:
        text = {"messages": [{"role": "user", "content": texts[i]}]} if chat else {"prompt": texts[i]}
        body = {
            "model": target.model,
            **text,
            "max_tokens": gen,
            "temperature": 0.8,
            "seed": 1000 + i,
            "stream": True,
            "stream_options": {"include_usage": True},
            **extra,
        }
        try:
            streams[i] = stream_one(target.base, body)
        except httpx.HTTPError as exc:
            streams[i] = Stream(0.0, [], 0, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(texts))]
    with peak:
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return figures(streams, start, peak.mib)


def figures(streams: list[Stream], start: float, rss_mib: float) -> dict[str, Any]:
    errors = [s.error for s in streams if s.error]
    done = [s for s in streams if s.stamps]
    end = max((s.stamps[-1] for s in done), default=start)
    rates = [(s.tokens - 1) / (s.stamps[-1] - s.stamps[0]) for s in done if s.tokens > 1 and s.stamps[-1] > s.stamps[0]]
    ttft = sorted((s.stamps[0] - s.sent) * 1000 for s in done)
    return {
        "aggregate_tps": sum(s.tokens for s in done) / max(end - start, 1e-9),
        # None when every stream came as one chunk (the whole reply ready before its first chunk
        # went out): its rate is not measured, rather than measured as nought.
        "per_stream_tps": statistics.median(rates) if rates else None,
        "ttft_p50_ms": statistics.median(ttft) if ttft else None,
        "ttft_p99_ms": percentile(ttft, 0.99),
        "engine_rss_mib": round(rss_mib, 1),
        "tokens": [s.tokens for s in streams],
        "prompt_tokens": [s.prompt for s in streams],
        "errors": errors,
    }


def percentile(values: list[float], q: float) -> float | None:
    return values[min(len(values) - 1, round(q * (len(values) - 1)))] if values else None


class PeakRss:
    """The peak summed RSS (MiB) of `pids()`, sampled on a thread while the block runs."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids, self.mib, self._stop = pids, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            total = 0
            for pid in self.pids():
                try:
                    total += psutil.Process(pid).memory_info().rss
                except psutil.Error:
                    pass
            self.mib = max(self.mib, total / 2**20)
            if self._stop.wait(0.25):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cove_home(model_path: str, drafting: str = "auto", home: Path | None = None) -> tuple[dict[str, str], str]:
    """A scratch Cove home (`home`, or a new temporary folder) with the model registered (in place)
    and its drafting set (`cove models place --drafting`); (its environment, the model's name)."""
    home = home or Path(tempfile.mkdtemp(prefix="cove-batching-"))
    env = {**os.environ, "COVE_HOME": str(home)}
    cli = [sys.executable, "-m", "app.cli.main"]
    subprocess.run([*cli, "models", "import", model_path], cwd=ROOT, env=env, capture_output=True, check=True, timeout=300)
    listed = subprocess.run([*cli, "models", "list", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120)
    name = json.loads(listed.stdout)[0]["name"]
    subprocess.run([*cli, "models", "place", name, "--drafting", drafting], cwd=ROOT, env=env, capture_output=True, check=True, timeout=120)
    return env, name


@contextmanager
def cove_target(env: dict[str, str], model: str, parallel: int) -> Iterator[Target]:
    with serving(env, "--parallel", str(parallel)) as (base, server):

        def pids() -> list[int]:
            try:
                children = psutil.Process(server.pid).children(recursive=True)
                return [p.pid for p in children if "app.engine.host" in " ".join(p.cmdline())]
            except psutil.Error:
                return []

        yield Target(base, model, pids)


@contextmanager
def llama_target(model_path: str, n: int, ctx: int, threads: int, log_dir: Path) -> Iterator[Target]:
    from app.speed.llama_tools import ensure_tool
    from tests.support.llama_server import llama_server, tools_cache

    exe = ensure_tool(tools_cache(), "llama-server", log=lambda msg: print(msg, file=sys.stderr))
    with llama_server(
        Path(model_path),
        log_dir,
        alias="bench",
        n_ctx=ctx * n,
        threads=threads,
        slots=n,
        extra_args=("--no-kv-unified",),
        binary=exe,
        start_timeout_s=120.0,
    ) as server:
        yield Target(server.base_url, "bench", lambda: [server.pid])


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs of each figure, the runs themselves kept."""
    out: dict[str, Any] = {}
    for key in ("aggregate_tps", "per_stream_tps", "ttft_p50_ms", "ttft_p99_ms", "engine_rss_mib"):
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = round(statistics.median(values), 2) if values else None
    out["min_tokens"] = min((min(r["tokens"]) for r in runs), default=0)
    out["prompt_tokens"] = statistics.median(p for r in runs for p in r["prompt_tokens"]) if runs else 0
    out["errors"] = [e for r in runs for e in r["errors"]]
    out["runs"] = runs
    return out


def ratios(row: dict[str, Any]) -> dict[str, float]:
    """Cove's aggregate tok/s over llama-server's and cove-1's, and its engine RSS over llama-server's."""
    out = {}
    for other in ("llama-server", "cove-1"):
        if "cove" in row and other in row and row[other]["aggregate_tps"]:
            out[f"cove/{other}"] = round(row["cove"]["aggregate_tps"] / row[other]["aggregate_tps"], 3)
    if "cove" in row and "llama-server" in row and row["llama-server"]["engine_rss_mib"]:
        out["rss cove/llama-server"] = round(row["cove"]["engine_rss_mib"] / row["llama-server"]["engine_rss_mib"], 3)
    return out


def goal_of(name: str, n: int) -> tuple[str, float] | None:
    """The goal of one ratio at N clients: (">=" or "<=", the figure), or None."""
    if name == "rss cove/llama-server":
        return "<=", GOAL_RSS
    if name == "cove/llama-server":
        return ">=", GOAL_SERVER_MANY if n >= 4 else GOAL_SERVER
    if name == "cove/cove-1" and n == 4:
        return ">=", GOAL_TODAY
    return None


def run(
    model_path: str,
    clients: list[int],
    systems: list[str],
    runs: int,
    threads: int,
    prompt_tokens: int,
    gen: int,
    cove_parallel: int | None = None,
    chat: bool = False,
    drafting: str = "auto",
) -> dict[str, Any]:
    from models.context_size import cove_context
    from models.gguf_info import read_gguf_info

    ctx = cove_context(None, read_gguf_info(model_path).context_length)
    trim, eog = vocab_tools(model_path)
    extra = {"ignore_eos": True, "logit_bias": {str(t): -100 for t in eog[:300]}}
    env, cove_model = cove_home(model_path, drafting) if any(s.startswith("cove") for s in systems) else ({}, "")
    result: dict[str, Any] = {
        "model": Path(model_path).name,
        "threads": threads,
        "ctx_per_slot": ctx,
        "runs": runs,
        "prompt_tokens": prompt_tokens,
        "gen_tokens": gen,
        "temperature": 0.8,
        "clients": clients,
        "systems": systems,
        "cove_parallel": cove_parallel,
        "endpoint": "chat/completions" if chat else "completions",
        "cove_drafting": drafting,
        "by_n": {},
    }
    with tempfile.TemporaryDirectory(prefix="cove-batching-logs-") as logs:
        for n in clients:
            with ExitStack() as stack:
                targets = {
                    s: stack.enter_context(
                        cove_target(env, cove_model, cove_parallel or n)
                        if s == "cove"
                        else cove_target(env, cove_model, 1)
                        if s == "cove-1"
                        else llama_target(model_path, n, ctx, threads, Path(logs))
                    )
                    for s in systems
                }
                for s, target in targets.items():  # load the model and page it in; N at once starts every engine
                    run_clients(target, prompts(trim, f"warm-{s}-{n}", n, 16), 8, extra, chat)
                measured: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
                for r in range(runs):
                    order = systems[r % len(systems) :] + systems[: r % len(systems)]
                    for s in order:
                        texts = prompts(trim, f"{s}-n{n}-r{r}", n, prompt_tokens)
                        measured[s].append(run_clients(targets[s], texts, gen, extra, chat))
                        print(f"N={n} {s} run {r + 1}: {measured[s][-1]['aggregate_tps']:.1f} tok/s", file=sys.stderr)
            row: dict[str, Any] = {s: summarize(v) for s, v in measured.items()}
            row["ratios"] = ratios(row)
            result["by_n"][str(n)] = row
    return result


def print_table(r: dict[str, Any]) -> None:
    print(
        f"{r['model']}: {r['prompt_tokens']}-token prompts to /v1/{r['endpoint']}, {r['gen_tokens']} tokens out, "
        f"Cove's drafting {r['cove_drafting']}, temperature 0.8, "
        f"{r['threads']} threads, context {r['ctx_per_slot']} per slot, medians of {r['runs']}"
    )
    print(f"{'N':>3} {'system':<13} {'aggregate':>10} {'per-stream':>10} {'TTFT p50':>9} {'TTFT p99':>9} {'RSS MiB':>8} {'prompt':>6}")
    for n, row in r["by_n"].items():
        for s in r["systems"]:
            f = row[s]
            p50, p99 = (f"{v:.0f}" if v is not None else "-" for v in (f["ttft_p50_ms"], f["ttft_p99_ms"]))
            rate = f"{f['per_stream_tps']:.1f}" if f["per_stream_tps"] is not None else "-"
            print(
                f"{n:>3} {s:<13} {f['aggregate_tps']:>10.1f} {rate:>10} {p50:>9} {p99:>9} "
                f"{f['engine_rss_mib']:>8.0f} {f['prompt_tokens']:>6.0f}"
                + (f"  ({len(f['errors'])} errors)" if f["errors"] else "")
                + (f"  (a stream gave {f['min_tokens']} tokens)" if f["min_tokens"] < r["gen_tokens"] else "")
            )
        for name, value in row["ratios"].items():
            goal = goal_of(name, int(n))
            met = goal is not None and (value >= goal[1] if goal[0] == ">=" else value <= goal[1])
            verdict = "" if goal is None else f" (goal {goal[0]} {goal[1]}: {'met' if met else 'not met'})"
            label = "engine RSS cove/llama-server" if name.startswith("rss ") else f"{name} aggregate"
            print(f"    {label} {value:.3f}{verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the starter)")
    parser.add_argument("--clients", default="1,2,4,8", help="concurrent clients, comma-separated")
    parser.add_argument("--systems", default="cove,llama-server", help="of cove, cove-1, llama-server")
    parser.add_argument("--cove-parallel", type=int, help="cove serve --parallel for `cove` (default: N)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, help="llama-server's threads (default: Cove's, every physical core)")
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--gen", type=int, default=128)
    parser.add_argument(
        "--chat",
        action="store_true",
        help="send chat messages (each server applies its own chat format, and Cove's fallback format for "
        "a base model adds its own stop strings) instead of the same raw prompt to /v1/completions",
    )
    parser.add_argument(
        "--cove-drafting",
        choices=("auto", "off"),
        default="auto",
        help="Cove's drafting (auto: as a person runs it; off: decoding alone, as llama-server does)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    systems = args.systems.split(",")
    if unknown := set(systems) - {"cove", "cove-1", "llama-server"}:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    from app.speed import default_threads

    model = args.model
    if model is None:
        from bench.starter_file import default_model

        model = default_model()
    result = run(
        model,
        [int(n) for n in args.clients.split(",")],
        systems,
        args.runs,
        args.threads or default_threads(),
        args.prompt_tokens,
        args.gen,
        args.cove_parallel,
        args.chat,
        args.cove_drafting,
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
