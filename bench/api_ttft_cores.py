"""Where the API's time-to-first-token overhead goes on a machine with few cores: the
overhead (the client's TTFT minus the engine's own, plain httpx) with the engine on every core
against `--parallel 2`, whose copies run on one thread each, so with one request at a time a
core stays free for the server's threads. Alternating, in one run.

Run: .venv/bin/python bench/api_ttft_cores.py [--rounds 2] [--requests 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api_load import raw_ttft_overheads  # noqa: E402
from bench.api_routing import starter_env  # noqa: E402
from bench.serve_process import serving  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    env, model = starter_env()
    for round_ in range(args.rounds):
        for label, serve_args in (("engine on every core", ()), ("one thread a copy (--parallel 2)", ("--parallel", "2"))):
            with serving(env, *serve_args) as (base, _server):
                raw_ttft_overheads(base, model, 2)  # loads the model
                overheads = raw_ttft_overheads(base, model, args.requests)
            print(
                f"round {round_ + 1}, {label}: TTFT overhead p50 {statistics.median(overheads):.1f} ms "
                f"({', '.join(f'{o:.1f}' for o in overheads)})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
