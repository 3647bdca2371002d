"""What the window process spends per streamed token, without the engine's noise.

On a 2-core machine every millisecond the window spends while a reply streams comes out of
the engine's threads (the goal: the starter's tg through the window >= 0.96x headless).
That ratio is noisy (+-5% between runs), so this measures its cause directly: a scripted
engine host (tests/support/fake_host.py) replays a recorded starter reply
(bench/data/starter_reply_pieces.json, 447 tokens) at a fixed rate into the real window, and
the process's CPU time from the first shown text to the end is divided by the tokens. It
includes the engine client's reader thread, which a headless run pays too; the main thread's
share is printed on its own (bench/cpu_share.py tells what each of its ms costs the engine).

--without switches parts off to see what each costs (diagnosis only, not a product mode):
  text   the conversation view ignores streamed text (no layout, no paint)
  paint  the conversation viewport never repaints (text is still laid out)
  perf   the performance panel is hidden
--text minimal swaps the view's text path for one drawText a frame (bench/text_paths.py).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/ui_cpu.py [--rate 55] [--runs 4] [--without text,paint,perf]
     [--text full|minimal|none]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from PySide6.QtWidgets import QApplication  # noqa: E402

import text_paths  # noqa: E402
import ui_stream  # noqa: E402  (open_bench_window, seed_conversation, wait_for)

PIECES = ROOT / "bench" / "data" / "starter_reply_pieces.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=55.0, help="tokens per second (the starter does about 55 here)")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--without", default="", help="comma-separated: text, paint, perf")
    parser.add_argument("--text", default="full", choices=text_paths.MODES, help="the view's text path (diagnosis)")
    args = parser.parse_args()
    without = {w for w in args.without.split(",") if w}

    os.environ.update({"FAKE_HOST_TPS": str(args.rate), "FAKE_HOST_PIECES": str(PIECES)})
    app = QApplication.instance() or QApplication([])
    core, window = ui_stream.open_bench_window(Path(tempfile.mkdtemp(prefix="cove-ui-cpu-")), max_tokens=2000)
    ui_stream.seed_conversation(core, 1000, "a 1,000-message chat")  # in the sidebar, as in real use
    text_paths.use_text_path(window, "none" if "text" in without else args.text)
    if "paint" in without:
        window.view.viewport().setUpdatesEnabled(False)
    if "perf" in without:
        window.perf.setVisible(False)
    window.show()
    app.processEvents()
    window.start()
    window.controller.preload_model()
    ui_stream.wait_for(window.controller.model_loaded, 30000)

    per_token: list[float] = []
    main_per_token: list[float] = []  # the UI thread alone: the engine client's reader thread is not in it
    for _ in range(args.runs):
        window.controller.new_conversation()
        mark: dict[str, float] = {}

        def first(*_args: object) -> None:
            mark.setdefault("cpu", time.process_time())
            mark.setdefault("main", time.thread_time())  # emitted on the main thread
            mark.setdefault("wall", time.perf_counter())

        window.controller.reply_text_received.connect(first)
        window.controller.send("tell me a story")
        done = ui_stream.wait_for(window.controller.reply_finished, 300000)
        cpu, main_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
        window.controller.reply_text_received.disconnect(first)
        tokens = done[0].metrics["gen_tokens"] if done else 0
        if not tokens or "cpu" not in mark:
            print("the reply did not stream", file=sys.stderr)
            return 1
        used = cpu - mark["cpu"]
        per_token.append(used * 1000.0 / tokens)
        main_per_token.append((main_cpu - mark["main"]) * 1000.0 / tokens)
        print(
            f"{tokens} tokens in {wall - mark['wall']:.2f} s: window process CPU {used * 1000:.0f} ms = "
            f"{per_token[-1]:.2f} ms/token = {used / (wall - mark['wall']) * 100:.1f}% of a core; "
            f"main thread {main_per_token[-1]:.2f} ms/token",
            flush=True,
        )
    window.close()
    core.close()
    label = f" without {', '.join(sorted(without))}" if without else ""
    label += f" ({args.text} text path)" if args.text != "full" else ""
    print(
        f"median{label}: {statistics.median(per_token):.2f} ms of window CPU per token at {args.rate:g} tok/s, "
        f"{statistics.median(main_per_token):.2f} ms of it on the main thread"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
