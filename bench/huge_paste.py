"""What one huge refused paste costs the turns after it.

Headless, as `cove chat` runs a turn: app.turn.service.ChatService over a real EngineClient, the
starter model (Gemma 3 270M Q4_K_M) at a context of 8192, the history in a fresh COVE_HOME
under /tmp. Each of --repeat new conversations (one engine, loaded once) runs:
  normal  --turns short turns, each timed from send() to the first streamed character
  paste   one message of --size bytes (default 2.7 MB): committed, then refused by the
          context policy (its reply row becomes an error); timed from send() to the refusal
  after   --turns more short turns in the same conversation, timed as the normal ones
Prints each turn (with the engine's own time to first token and its prompt preparation
time), then per conversation the medians and the ratio after / normal, and the median of
those ratios (goal: at most 2). Short blocks, repeated, so a shared machine's drift mostly
cancels within each ratio.

Run: .venv/bin/python bench/huge_paste.py [--size 2700000] [--turns 7] [--repeat 3] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core import open_core  # noqa: E402
from app.engine.client import EngineClient  # noqa: E402
from app.paths import resolve_paths  # noqa: E402
from app.settings import SamplingParams  # noqa: E402
from app.turn.service import ChatService  # noqa: E402
from models.starter import ensure_starter  # noqa: E402

N_CTX = 8192
GOAL = 2.0
QUESTIONS = [
    "Name a colour.",
    "What is 2 + 2?",
    "Say hello.",
    "Name a fruit.",
    "Name an animal.",
    "Say yes.",
    "Name a city.",
    "Name a number.",
    "Say goodbye.",
    "Name a tree.",
]


def paste_text(size: int) -> str:
    """`size` bytes of log-like ASCII text (every line different, so nothing repeats exactly)."""
    lines: list[str] = []
    total, i = 0, 0
    while total < size:
        line = f"2025-06-{1 + i % 28:02d} 12:{i % 60:02d}:{(i * 7) % 60:02d} worker-{i % 17} request {i} finished in {i % 997} ms\n"
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)[:size]


def timed_turn(service: ChatService, conversation_id: str, text: str, **kw: Any) -> dict[str, Any]:
    first: list[float] = []

    def on_text(chunk: str) -> None:
        if chunk and not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    result = service.send(conversation_id, text, on_text=on_text, **kw)
    t_end = time.perf_counter()
    m = result.metrics or {}
    return {
        "status": result.status,
        "first_ms": round(((first[0] if first else t_end) - t0) * 1000, 1),
        "engine_ttft_ms": m.get("ttft_ms"),
        "prepare_ms": m.get("prepare_ms"),
        "prompt_tokens": m.get("prompt_tokens"),
        "dropped_turns": m.get("dropped_turns"),
        "error": result.error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2_700_000, help="bytes in the pasted message")
    parser.add_argument("--turns", type=int, default=7, help="short turns before and after the paste")
    parser.add_argument("--repeat", type=int, default=3, help="conversations, each: normal turns, paste, turns after")
    parser.add_argument("--threads", type=int, default=None, help="engine threads (default: physical cores)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="cove-huge-paste-", dir="/tmp"))
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    model = ensure_starter(core.library)
    params = SamplingParams(n_ctx=N_CTX, max_tokens=8, temperature=0.0, seed=1)
    paste = paste_text(args.size)
    runs: list[dict[str, list[dict[str, Any]]]] = []
    with EngineClient() as engine:
        engine.load(model.path, n_ctx=N_CTX, n_threads=args.threads)
        service = ChatService(core.history, engine)
        for _ in range(args.repeat):
            conversation = core.history.create_conversation(model=model.name, system_prompt="Answer in one word.")
            kw = {"model": model, "params": params, "system_prompt": conversation.system_prompt}
            questions = iter(QUESTIONS * 10)
            rows: dict[str, list[dict[str, Any]]] = {"warm-up": [], "normal": [], "paste": [], "after": []}
            rows["warm-up"].append(timed_turn(service, conversation.id, next(questions), **kw))
            for _ in range(args.turns):
                rows["normal"].append(timed_turn(service, conversation.id, next(questions), **kw))
            rows["paste"].append(timed_turn(service, conversation.id, paste, **kw))
            for _ in range(args.turns):
                rows["after"].append(timed_turn(service, conversation.id, next(questions), **kw))
            runs.append(rows)
    core.close()

    summaries = []
    for rows in runs:
        normal = statistics.median(r["first_ms"] for r in rows["normal"])
        after = statistics.median(r["first_ms"] for r in rows["after"])
        summaries.append(
            {
                "normal_median_ms": normal,
                "after_median_ms": after,
                "paste_ms": rows["paste"][0]["first_ms"],
                "ratio": round(after / normal, 2) if normal else None,
            }
        )
    ratio = statistics.median(x["ratio"] for x in summaries if x["ratio"] is not None)
    if args.json:
        print(
            json.dumps(
                {"size_bytes": args.size, "n_ctx": N_CTX, "ratio": ratio, "goal": GOAL, "conversations": summaries, "runs": runs}, indent=2
            )
        )
        return 0
    for i, rows in enumerate(runs, 1):
        for phase, items in rows.items():
            for r in items:
                print(
                    f"{i} {phase:8} {r['status']:9} first {r['first_ms']:8.1f} ms  engine ttft {r['engine_ttft_ms']}  "
                    f"prepare {r['prepare_ms']} ms  prompt {r['prompt_tokens']} tok  dropped {r['dropped_turns']}"
                )
    print(f"the paste ({args.size} bytes): {runs[0]['paste'][0]['status']}: {runs[0]['paste'][0]['error']}")
    for i, x in enumerate(summaries, 1):
        print(
            f"conversation {i}: time to first character, median of {args.turns}: normal {x['normal_median_ms']:.1f} ms, "
            f"after the paste {x['after_median_ms']:.1f} ms, ratio {x['ratio']:.2f}; the paste refused after {x['paste_ms']:.0f} ms"
        )
    print(f"median ratio after / normal over {len(summaries)} conversations: {ratio:.2f} (goal <= {GOAL:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
