"""Which conversation format gives a base model (the starter, Gemma 3 270M) its most coherent
replies: each format of app/engine/host/templates.py renders the same simple questions, the model
answers greedily, and a reply counts as correct when it holds the expected word and ends by
itself (a stop string or end of text) before the token limit.

    .venv/bin/python bench/base_model_formats.py [--model PATH] [--max-tokens 48] [--threads 2] [--answers]

Results and the question set: docs/base-models.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.client import EngineClient  # noqa: E402
from app.engine.host.fallback_formats import FALLBACKS, Fallback  # noqa: E402
from app.engine.request import ReplyRequest, Sampling
from bench.starter_file import default_model  # noqa: E402

# (question, expected word: a regular expression matched as a whole word, case-insensitive)
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", r"paris"),
    ("How many days are in a week?", r"seven|7"),
    ("What color is the sky on a clear day?", r"blue"),
    ("What is 2 + 2?", r"four|4"),
    ("Which planet do we live on?", r"earth"),
    ("What is the opposite of hot?", r"cold"),
    ("What do bees make?", r"honey"),
    ("What is the largest ocean on Earth?", r"pacific"),
    ("How many legs does a spider have?", r"eight|8"),
    ("What language is spoken in Spain?", r"spanish"),
    ("What is frozen water called?", r"ice"),
    ("Who wrote Romeo and Juliet?", r"shakespeare"),
    ("What is the capital of Japan?", r"tokyo"),
    ("What animal says moo?", r"cows?"),
)
# The turn format Cove gave the starter before, the plain transcript without examples, and the
# two few-shot completion formats for base models.
FORMATS = ("gemma", "plain", "transcript", "qa")


def judge(reply: str, expected: str, ended: bool) -> bool:
    return ended and re.search(rf"\b(?:{expected})\b", reply, re.IGNORECASE) is not None


def answer(engine: EngineClient, fmt: Fallback, question: str, max_tokens: int) -> tuple[str, bool]:
    """The greedy reply to `question` rendered with `fmt` (as a raw prompt with the format's
    stop strings, through Cove's engine), and whether it ended by itself."""
    prompt = fmt.render([{"role": "user", "content": question}], "", "")  # the engine adds BOS
    done = engine.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=max_tokens, temperature=0.0, seed=0),
            raw_prompt=prompt,
            stop=fmt.stop,
            no_cache=True,
            speculative="off",
        )
    ).wait(300)
    return done.text.strip(), done.metrics.get("stop_reason") == "stop"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a GGUF base model (default: the starter)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--answers", action="store_true", help="print every reply")
    args = parser.parse_args(argv)

    path = args.model or default_model()
    t0 = time.perf_counter()
    rows: list[tuple[str, int, int]] = []
    replies: dict[str, list[tuple[str, bool, bool]]] = {}
    with EngineClient(load_timeout_s=300) as engine:
        engine.load(path, n_ctx=1024, n_threads=args.threads)
        for name in FORMATS:
            fmt = FALLBACKS[name]
            got = []
            for question, expected in QUESTIONS:
                reply, ended = answer(engine, fmt, question, args.max_tokens)
                got.append((reply, ended, judge(reply, expected, ended)))
            replies[name] = got
            rows.append((name, sum(1 for _, _, c in got if c), sum(1 for _, e, _ in got if e)))
    n = len(QUESTIONS)
    print(f"model: {Path(path).name}; {n} questions, greedy, at most {args.max_tokens} tokens a reply\n")
    print("| format | correct | ended by itself |")
    print("|---|---|---|")
    for name, n_correct, n_ended in rows:
        print(f"| {name} | {n_correct}/{n} | {n_ended}/{n} |")
    if args.answers:
        for name in FORMATS:
            print(f"\n### {name}\n")
            for (question, _), (reply, ended, ok) in zip(QUESTIONS, replies[name]):
                mark = "ok" if ok else ("--" if ended else "..")
                print(f"- [{mark}] {question} -> {reply[:120]!r}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
