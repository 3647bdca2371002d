"""Cove's sampled generation against llama.cpp's own: the same prompt tokens and sampler settings
through Cove's engine host, through llama-server built from the pinned sources, and llama-bench's
tg (which does not sample), on the starter.

Each round runs Cove and llama-server in alternating order (one request of --tokens tokens each,
end-of-generation ignored, temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, the same seed; drafting
off, since llama-server has none here), then llama-bench `-n --tokens`. tg is each one's own clock:
Cove's gen_tps ((n - 1) over first to last token), llama-server's timings.predicted_per_second,
llama-bench's median samples_ts. Medians over rounds and the ratios (goals: Cove / llama-server
>= 1.0, Cove / llama-bench >= 0.95). llama-server and llama-bench are built the first time
(app/speed/llama_tools.py; minutes), then cached.

Run: .venv/bin/python bench/levers_sampled.py [--model PATH] [--rounds 3] [--tokens 128] [--threads N] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine import protocol  # noqa: E402
from app.engine.client import EngineClient  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from app.speed import default_threads  # noqa: E402
from app.speed.llama_bench import ensure_llama_bench, run_llama_bench  # noqa: E402
from bench.starter_file import default_model  # noqa: E402
from tests.support.llama_server import llama_server, tools_cache  # noqa: E402

PROMPT = "Write a short story about a lighthouse keeper who finds a strange bottle on the beach. It begins:"
SAMPLER = {"temperature": protocol.TEMPERATURE, "top_k": protocol.TOP_K, "top_p": protocol.TOP_P, "min_p": protocol.MIN_P}
GOAL_SERVER, GOAL_BENCH = 1.0, 0.95


def cove_tg(engine: EngineClient, prompt: list[int], n: int, seed: int) -> float:
    fin = engine.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=n, seed=seed, repeat_penalty=1.0, **SAMPLER),
            prompt_tokens=prompt,
            ignore_eos=True,
            no_cache=True,
            speculative="off",
        )
    ).wait()
    if fin.error or fin.metrics["gen_tokens"] != n:
        raise RuntimeError(fin.error or f"Cove generated {fin.metrics['gen_tokens']} tokens, not {n}")
    return float(fin.metrics["gen_tps"])


def server_tg(url: str, prompt: list[int], n: int, seed: int) -> float:
    body = {
        "prompt": prompt,
        "n_predict": n,
        "ignore_eos": True,
        "cache_prompt": False,
        "seed": seed,
        "stream": False,
        "repeat_penalty": 1.0,
        "samplers": ["top_k", "typ_p", "top_p", "min_p", "temperature"],
        **SAMPLER,
    }
    reply = httpx.post(f"{url}/completion", json=body, timeout=300).json()
    timings = reply["timings"]
    if timings["predicted_n"] != n:
        raise RuntimeError(f"llama-server generated {timings['predicted_n']} tokens, not {n}")
    return float(timings["predicted_per_second"])


def run(model_path: str, rounds: int = 3, quick: bool = False, tokens: int = 128, threads: int | None = None) -> dict[str, Any]:
    if quick:
        rounds, tokens = 1, min(tokens, 32)
    threads = threads or default_threads()
    bench_binary = ensure_llama_bench(tools_cache(), log=lambda msg: print(msg, file=sys.stderr))
    runs: dict[str, list[float]] = {"cove": [], "llama_server": [], "llama_bench": []}
    with tempfile.TemporaryDirectory(prefix="cove-sampled-") as logs, EngineClient() as engine:
        loaded = engine.load(model_path, n_ctx=2048, n_threads=threads)
        # The weights as Cove's engine holds them: repacked, or plain where it keeps them so (cpu_quirks.py).
        repack = bool(loaded.placement.get("extra_buffers", True))
        from llama_cpp import Llama  # the same tokens for both: Cove's own tokenizer is the model's

        vocab_only = Llama(model_path, vocab_only=True, verbose=False)
        prompt = vocab_only.tokenize(PROMPT.encode(), add_bos=True)
        vocab_only.close()
        with llama_server(
            Path(model_path), Path(logs), alias="starter", n_ctx=2048, threads=threads, extra_args=() if repack else ("--no-repack",)
        ) as server:
            cove_tg(engine, prompt, 16, 0)  # warm both: the first reply pages the weights in
            server_tg(server.url, prompt, 16, 0)
            for r in range(rounds):
                order = ("cove", "llama_server") if r % 2 == 0 else ("llama_server", "cove")
                for who in order:
                    tg = cove_tg(engine, prompt, tokens, 100 + r) if who == "cove" else server_tg(server.url, prompt, tokens, 100 + r)
                    runs[who].append(tg)
    for _ in range(rounds):  # llama-bench after both are gone, so it has the cores to itself as they did
        bench = run_llama_bench(
            bench_binary, model_path, threads, reps=1, n_prompt=0, n_gen=tokens, extra_args=("--repack", "1" if repack else "0")
        )
        runs["llama_bench"].append(float(bench["tg_tps"]))
    med = {k: round(statistics.median(v), 2) for k, v in runs.items()}
    return {
        "model": Path(model_path).name,
        "rounds": rounds,
        "tokens": tokens,
        "threads": threads,
        "prompt_tokens": len(prompt),
        "tg": med,
        "runs": runs,
        "ratio_server": round(med["cove"] / med["llama_server"], 3),
        "ratio_bench": round(med["cove"] / med["llama_bench"], 3),
        "goal_server": GOAL_SERVER,
        "goal_bench": GOAL_BENCH,
        "meets_server": med["cove"] / med["llama_server"] >= GOAL_SERVER,
        "meets_bench": med["cove"] / med["llama_bench"] >= GOAL_BENCH,
    }


def print_result(r: dict[str, Any]) -> None:
    tg = r["tg"]
    print(
        f"{r['model']}: {r['tokens']} sampled tokens after a {r['prompt_tokens']}-token prompt, {r['threads']} threads, "
        f"medians of {r['rounds']}"
    )
    print(f"  tg  Cove {tg['cove']:.1f}  llama-server {tg['llama_server']:.1f}  llama-bench {tg['llama_bench']:.1f} tok/s")
    print(
        f"  Cove / llama-server {r['ratio_server']:.3f} (goal >= {GOAL_SERVER}: {'met' if r['meets_server'] else 'not met'}); "
        f"Cove / llama-bench {r['ratio_bench']:.3f} (goal >= {GOAL_BENCH}: {'met' if r['meets_bench'] else 'not met'})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the starter)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="one short round (checks it runs)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.model or default_model(), rounds=args.rounds, quick=args.quick, tokens=args.tokens, threads=args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
