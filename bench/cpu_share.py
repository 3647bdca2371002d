"""What a millisecond of the window's CPU per token costs the engine, on this machine.

The goal is the starter's tg through the window >= 0.96x headless (0.98x with a core free).
When the engine has a thread on every core, the window's CPU is not spare: this measures how
much of it the engine loses. A headless engine client (the same host process the window uses) streams a
long greedy reply from the starter model. The reply is cut into blocks of BLOCK tokens;
in every other block, this process's main thread spins for BURN ms after each token, as a
frame of the window would. The gaps between tokens (stamped by the engine client's reader
thread as they arrive) in burned blocks against the blocks around them give the engine's
loss; the blocks alternate every few hundred ms, so the VM's drift, which moves whole
replies by +-5%, cancels out.

Read with bench/ui_cpu.py, which prints what the window's main thread spends per token.
--threads 1 on a 2-core machine shows the other case: an engine that leaves a core free.

Run: .venv/bin/python bench/cpu_share.py [--burn 0.4,0.8,1.6] [--tokens 1024] [--replies 2] [--threads N] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.client import EngineClient, EngineError, TokenEvent  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402

PROMPT = [{"role": "user", "content": "Write a long story about a lighthouse keeper and the sea."}]


def starter_path() -> str:
    """The starter model's file, assembled into a scratch Cove home if needed."""
    os.environ.setdefault("COVE_HOME", tempfile.mkdtemp(prefix="cove-cpu-share-"))
    from app.core import open_core
    from models.starter import ensure_starter

    core = open_core()
    try:
        return str(ensure_starter(core.library).path)
    finally:
        core.close()


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def burned_gaps(engine: EngineClient, burn_s: float, n_gen: int, block: int) -> tuple[list[float], list[float]]:
    """One greedy reply of `n_gen` tokens, burning `burn_s` after each token of every other
    block. Returns (gaps after unburned tokens, gaps after burned tokens), in ms."""
    generation = engine.generate(
        ReplyRequest.chat(
            PROMPT, sampling=Sampling(max_tokens=n_gen, temperature=0.0, seed=1, repeat_penalty=1.0), no_cache=True, ignore_eos=True
        )
    )
    times: list[float] = []
    for event in generation:
        if not isinstance(event, TokenEvent):
            break
        times.append(event.t)
        if (len(times) // block) % 2:
            spin(burn_s)
    plain, burned = [], []
    for i in range(block, len(times) - 1):  # the first block: prompt caches settling
        (burned if (i + 1) // block % 2 else plain).append((times[i + 1] - times[i]) * 1000.0)
    return plain, burned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burn", default="0.4,0.8,1.6", help="ms of CPU after each token, comma-separated")
    parser.add_argument("--tokens", type=int, default=1024, help="tokens per reply")
    parser.add_argument("--replies", type=int, default=2, help="replies per burn")
    parser.add_argument("--block", type=int, default=8, help="tokens per block")
    parser.add_argument("--model", help="a .gguf (default: the starter model)")
    parser.add_argument("--threads", type=int, help="engine threads (default: Cove's, one per physical core)")
    args = parser.parse_args()
    burns = [float(b) for b in args.burn.split(",") if b]

    engine = EngineClient()
    try:
        try:
            loaded = engine.load(args.model or starter_path(), n_threads=args.threads)
        except EngineError as exc:
            print(f"cpu_share: the model could not be loaded: {exc}", file=sys.stderr)
            return 1
        print(
            f"{Path(loaded.path).name}: {loaded.n_threads} engine threads; {args.replies} replies of {args.tokens} tokens "
            f"per burn, burned in every other block of {args.block}"
        )
        burned_gaps(engine, 0.0, 64, args.block)  # warm up
        for burn_ms in burns:
            plain: list[float] = []
            burned: list[float] = []
            for _ in range(args.replies):
                p, b = burned_gaps(engine, burn_ms / 1000.0, args.tokens, args.block)
                plain += p
                burned += b
            base, slow = statistics.fmean(plain), statistics.fmean(burned)
            print(
                f"burn {burn_ms:.2f} ms/token: {base:.2f} ms between tokens, {slow:.2f} with the burn: "
                f"tg ratio {base / slow:.3f}; engine time lost per ms of burn: {(slow - base) / burn_ms:.2f} ms",
                flush=True,
            )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
