"""Diagnosis: the starter's tg ratio (window / headless) with each streaming text path.

Runs bench/ui_stream.py's starter_ratio (15 adjacent window/headless pairs, median of their
ratios) for each mode of bench/text_paths.py, the modes alternating, each in a fresh window
process (a new Python process per run, so one mode's leftovers never slow the next).
It tells how much of the shortfall from 0.98 is the view's text path and how much is the
rest of the window (engine client, frame clock, performance panel).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/ratio_diag.py [--modes full,unpainted,minimal,none] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(mode: str, pairs: int) -> dict:
    """In this process: a bench window with `mode`'s text path; the starter ratio as a dict."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from PySide6.QtWidgets import QApplication

    import text_paths
    import ui_stream

    app = QApplication.instance() or QApplication([])
    app.setApplicationName("cove-ratio-diag")
    core, window = ui_stream.open_bench_window(Path(tempfile.mkdtemp(prefix="cove-ratio-diag-")), max_tokens=1000)
    ui_stream.seed_conversation(core, 1000, "a 1,000-message chat")
    text_paths.use_text_path(window, mode)
    window.show()
    window.start()
    try:
        return ui_stream.starter_ratio(window, core, repeats=pairs)
    finally:
        window.close()
        core.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="full,minimal,none")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one mode, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one, args.pairs)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            try:  # a run is 1-3 minutes; one stuck far longer is reported, not waited on forever
                out = subprocess.run(
                    [sys.executable, __file__, "--one", mode, "--pairs", str(args.pairs)],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=60 * (5 + args.pairs),
                )
            except subprocess.TimeoutExpired:
                print(f"{mode}: the run did not finish within {5 + args.pairs} minutes", file=sys.stderr)
                return 1
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode != 0 or not lines:
                print(f"{mode}: the run failed\n{out.stderr[-2000:]}", file=sys.stderr)
                return 1
            result = json.loads(lines[-1])
            ratios[mode].append(result["ratio"])
            low, high = result["ratio_quartiles"]
            print(
                f"{mode:8s} ratio {result['ratio']:.3f} (quartiles {low:.3f}-{high:.3f}); window "
                f"{result['window_tg_tps']:.1f} vs headless {result['headless_tg_tps']:.1f} tok/s",
                flush=True,
            )
    for mode in modes:
        print(f"{mode:8s} median of {len(ratios[mode])} runs: {statistics.median(ratios[mode]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
