"""The window's reply while API replies stream from the same engine: its generation rate (tg) with 3
API replies decoding beside it, against its rate alone, with the window first (Generate.priority
"window", the default) and with every reply treated equally. Also what the API replies got meanwhile.

    .venv/bin/python bench/window_share.py [--model PATH] [--api 3] [--runs 3] [--json]

One engine process with `api + 1` slots, the starter by default, 2 threads, drafting off (so that
alone and shared steps compare the same decoding), temperature 0.8, end-of-generation ignored. The
goal (issue 34): the window's tg with 3 API clients streaming >= 0.8x its tg alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.engine.client import EngineClient, FinishedEvent, Generation  # noqa: E402
from app.engine.request import ReplyRequest, Sampling

WINDOW_TOKENS = 128
PROMPT = "The keeper of the lighthouse at Harrow Point wrote in her log every night. " * 6


def _reply(engine: EngineClient, seed: int, priority: str, n: int) -> Generation:
    return engine.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=n, temperature=0.8, seed=seed),
            raw_prompt=f"{seed}. {PROMPT}",
            ignore_eos=True,
            no_cache=True,
            speculative="off",
            priority=priority,
        )
    )


def _tg(fin: FinishedEvent) -> float:
    return float(fin.metrics.get("gen_tps") or 0.0)


def one_run(engine: EngineClient, api: int, priority: str, seed: int) -> dict[str, float]:
    alone = _reply(engine, seed, priority, WINDOW_TOKENS).wait(600)
    streams = [_reply(engine, seed * 100 + i, "normal", 100_000) for i in range(api)]
    for g in streams:  # every API reply is decoding before the window's starts
        while not g.text:
            time.sleep(0.01)
    counted = [len(g.text) for g in streams]
    t0 = time.perf_counter()
    shared = _reply(engine, seed + 1, priority, WINDOW_TOKENS).wait(600)
    seconds = time.perf_counter() - t0
    api_chars = sum(len(g.text) - c for g, c in zip(streams, counted, strict=True))
    engine.cancel()
    for g in streams:
        g.wait(600)
    return {
        "alone_tg": _tg(alone),
        "shared_tg": _tg(shared),
        "ratio": _tg(shared) / _tg(alone) if _tg(alone) else 0.0,
        "mean_sequences": float(shared.metrics["batch"]["mean_sequences"]),
        "api_chars_per_s": api_chars / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF (default: the starter)")
    parser.add_argument("--api", type=int, default=3, help="API replies streaming beside the window's (default 3)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.model:
        model = args.model
    else:
        from bench.starter_file import default_model

        model = default_model()
    results: dict[str, list[dict[str, float]]] = {"window": [], "normal": []}
    with EngineClient() as engine:
        engine.load(model, n_threads=args.threads, parallel=args.api + 1, state_cache_mb=0)
        _reply(engine, 0, "normal", 8).wait(600)  # warm-up
        for run in range(args.runs):
            for priority in ("window", "normal"):
                results[priority].append(one_run(engine, args.api, priority, 10 * run + 1))
    medians = {p: {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]} for p, runs in results.items()}
    if args.json:
        print(json.dumps({"model": Path(model).name, "api": args.api, "runs": results, "medians": medians}, indent=2))
        return 0
    print(f"{Path(model).name}, {args.api} API replies streaming, medians of {args.runs}:")
    for p, label in (("window", "window first"), ("normal", "all equal")):
        m = medians[p]
        print(
            f"  {label:13} window tg alone {m['alone_tg']:6.1f}  shared {m['shared_tg']:6.1f}  ratio {m['ratio']:.2f}"
            f"  (mean sequences per step {m['mean_sequences']:.2f}; API text {m['api_chars_per_s']:.0f} chars/s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
