"""The inference levers, measured on the starter in one run: reopening a long conversation with its
saved KV state, drafting from the conversation, a q8_0 KV cache against f16, and Cove's sampled
generation against llama.cpp's own.

Each part is its own module (bench/levers_reopen.py, levers_lookup.py, levers_kv.py,
levers_sampled.py: each says what it measures and how); this runs them one after the other,
never two at once, and prints the figures with each goal. Medians of --rounds.

Run: .venv/bin/python bench/levers.py [--model PATH] [--rounds 3] [--parts reopen,lookup,kv,sampled] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import levers_kv, levers_lookup, levers_reopen, levers_sampled  # noqa: E402
from bench.starter_file import default_model  # noqa: E402

PARTS = ("reopen", "lookup", "kv", "sampled")


def run(model: str, parts: list[str], rounds: int, quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else rounds
    out: dict[str, Any] = {"model": Path(model).name, "rounds": rounds}
    for part in parts:
        t0 = time.perf_counter()
        if part == "reopen":
            out[part] = levers_reopen.run(model, rounds=rounds, quick=quick)
        elif part == "lookup":
            out[part] = levers_lookup.run(model, rounds=rounds, quick=quick)
        elif part == "kv":
            out[part] = levers_kv.run(model, rounds=rounds, quick=quick)
        elif part == "sampled":
            out[part] = levers_sampled.run(model, rounds=rounds, quick=quick)
        out[part]["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def print_all(result: dict[str, Any]) -> None:
    if "reopen" in result:
        r = result["reopen"]
        print(
            f"Reopen a {r['conversation_tokens']}-token conversation after a restart: TTFT "
            f"{r['saved']['wall_ttft_ms']:.0f} ms with its saved state, {r['recompute']['wall_ttft_ms']:.0f} ms "
            f"recomputing: {r['ratio_wall_ttft']:.3f}x (goal <= {r['goal']}: {'met' if r['meets_goal'] else 'not met'})"
        )
        if r["discarded"]:
            print(f"  the saved state was not restored: {r['discarded']}")
    if "lookup" in result:
        levers_lookup.print_result(result["lookup"])
    if "kv" in result:
        levers_kv._print(result["kv"])
    if "sampled" in result:
        levers_sampled.print_result(result["sampled"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the starter)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--quick", action="store_true", help="one short round of each (checks they run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; use some of {', '.join(PARTS)}")
    result = run(args.model or default_model(), parts, args.rounds, args.quick)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_all(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
