"""Drafting from the conversation (prompt lookup): generation speed with drafting on and off, on a
copy task and on open-ended prompts, greedy, on the starter.

Through EngineClient, as a turn runs: the copy task asks the model to repeat a paragraph with one
word changed (a one-shot example first, since the starter is a base model), and stops at the end of
the line; the open-ended prompts ask for new text. Each round runs every prompt with drafting off
and on, in alternating order. Per prompt: tg (the engine's gen_tps) medians, their ratio, the
drafted and accepted tokens, and whether the two replies were the same text (llama.cpp's batched
kernels round differently from single-token decoding, so a near-tie can go the other way).

Run: .venv/bin/python bench/levers_lookup.py [--model PATH] [--rounds 3] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.client import EngineClient  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from bench.starter_file import default_model  # noqa: E402

PARAGRAPH = (
    "The old lighthouse stood at the edge of the cliff, its white paint peeling in long strips. Every "
    "evening the keeper climbed the spiral stairs, counted the one hundred and twelve steps, and lit the "
    "great lamp that had guided ships through the narrow channel for more than a century. Nobody in the "
    "village remembered a night when the light had failed, and the children said the keeper never slept."
)
# Two worked examples: with one, the starter's greedy reply depends on the processor's kernels (on an
# AVX2-only machine it sums the paragraph up in a sentence instead of copying it).
COPY = (
    "Original: The cat sat on the mat and looked out of the window at the rain.\n"
    "With 'cat' changed to 'dog': The dog sat on the mat and looked out of the window at the rain.\n\n"
    "Original: The old bridge crossed the river below the mill, and the farmers drove their carts over it every market day.\n"
    "With 'old' changed to 'new': The new bridge crossed the river below the mill, and the farmers drove their carts over it "
    "every market day.\n\n"
    f"Original: {PARAGRAPH}\nWith 'white' changed to 'red':"
)
OPEN_ENDED = {
    "story": "Write a short story about a dragon who learns to bake bread.\n\nOnce upon a time,",
    "explain": "Question: Why is the sky blue? Explain it to a ten-year-old.\nAnswer:",
    "letter": "Dear Maria,\n\nThank you for the lovely weekend in the mountains. I wanted to tell you",
}
GOAL_COPY = 1.3
GOAL_OPEN = 0.98


def one(engine: EngineClient, prompt: str, speculative: str, max_tokens: int, stop: list[str]) -> dict[str, Any]:
    fin = engine.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=max_tokens, temperature=0.0, seed=1),
            raw_prompt=prompt,
            no_cache=True,
            stop=stop,
            speculative=speculative,
        )
    ).wait()
    if fin.error:
        raise RuntimeError(fin.error)
    m = fin.metrics
    return {"tg": m["gen_tps"], "tokens": m["gen_tokens"], "draft": m["draft"], "text": fin.text}


def run(model_path: str, rounds: int = 3, quick: bool = False, threads: int | None = None) -> dict[str, Any]:
    if quick:
        rounds = 1
    tasks = {"copy": (COPY, 120, ["\n"])} | {name: (p, 128, []) for name, p in OPEN_ENDED.items()}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"off": [], "auto": []} for name in tasks}
    with EngineClient() as engine:
        engine.load(model_path, n_ctx=4096, n_threads=threads)
        one(engine, COPY, "off", 16, [])  # warm: the first reply after a load pages the weights in
        for r in range(rounds):
            for name, (prompt, max_tokens, stop) in tasks.items():
                for mode in ("off", "auto") if r % 2 == 0 else ("auto", "off"):
                    runs[name][mode].append(one(engine, prompt, mode, max_tokens, stop))
    result: dict[str, Any] = {"model": Path(model_path).name, "rounds": rounds, "tasks": {}}
    for name, by_mode in runs.items():
        off = statistics.median(x["tg"] for x in by_mode["off"])
        on = statistics.median(x["tg"] for x in by_mode["auto"])
        drafted = sum(x["draft"]["drafted"] for x in by_mode["auto"])
        accepted = sum(x["draft"]["accepted"] for x in by_mode["auto"])
        result["tasks"][name] = {
            "tg_off": round(off, 2),
            "tg_auto": round(on, 2),
            "ratio": round(on / off, 3),
            "tokens": statistics.median(x["tokens"] for x in by_mode["auto"]),
            "drafted": drafted,
            "accepted": accepted,
            "acceptance": round(accepted / drafted, 3) if drafted else None,
            "stopped": [x["draft"]["stopped"] for x in by_mode["auto"]],
            "same_text": [a["text"] == b["text"] for a, b in zip(by_mode["off"], by_mode["auto"], strict=True)],
            "runs_off": [x["tg"] for x in by_mode["off"]],
            "runs_auto": [x["tg"] for x in by_mode["auto"]],
        }
    tasks_out = result["tasks"]
    # Open-ended prompts pooled: the median of each round's on/off ratio (runs a few seconds apart
    # share the machine's state, so a pair's ratio is less noisy than a ratio of medians).
    pairs = [on["tg"] / off["tg"] for n in OPEN_ENDED for off, on in zip(runs[n]["off"], runs[n]["auto"], strict=True)]
    result["open_pair_ratio"] = round(statistics.median(pairs), 3)
    result["open_pairs"] = len(pairs)
    result["goal_copy"], result["goal_open"] = GOAL_COPY, GOAL_OPEN
    result["meets_copy"] = tasks_out["copy"]["ratio"] >= GOAL_COPY
    result["meets_open"] = result["open_pair_ratio"] >= GOAL_OPEN
    return result


def print_result(result: dict[str, Any]) -> None:
    print(f"{result['model']}: prompt lookup, greedy, medians of {result['rounds']}")
    for name, t in result["tasks"].items():
        acc = f"{t['accepted']}/{t['drafted']} accepted" if t["drafted"] else "nothing drafted"
        print(
            f"  {name:8} tg off {t['tg_off']:6.1f}  on {t['tg_auto']:6.1f} tok/s  ratio {t['ratio']:.3f}  "
            f"{acc}  same text {sum(t['same_text'])}/{len(t['same_text'])}"
        )
    print(f"  open-ended, the median of {result['open_pairs']} paired ratios: {result['open_pair_ratio']:.3f}")
    print(
        f"  goals: copy >= {GOAL_COPY}x: {'met' if result['meets_copy'] else 'not met'}; open-ended >= {GOAL_OPEN}x: "
        f"{'met' if result['meets_open'] else 'not met'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the starter)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="one round (checks it runs)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.model or default_model(), rounds=args.rounds, quick=args.quick, threads=args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
