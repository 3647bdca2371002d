"""`cove bench`: prompt and generation speed through Cove's engine host, optionally against llama-bench."""

from __future__ import annotations

import argparse

from app.core import Core


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure prompt (512 tokens) and generation (128 tokens) speed")
    p.add_argument("--model", "-m", help="model name or path (default: the last used, else the starter)")
    p.add_argument("--threads", "-t", type=int, default=None, help="threads (default: physical cores)")
    p.add_argument("--reps", "-r", type=int, default=5, help="repetitions; medians are reported (default 5)")
    p.add_argument("--compare-llama-bench", action="store_true", help="also build and run llama.cpp's llama-bench and print ratios")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(core: Core, args: argparse.Namespace) -> int:
    from app.speed import bench_main  # imported late: only `cove bench` needs it

    model = core.resolve_model(args.model)
    return bench_main(
        model.path,
        threads=args.threads,
        reps=args.reps,
        compare=args.compare_llama_bench,
        as_json=args.json,
    )
