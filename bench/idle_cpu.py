"""What an open window costs while nobody uses it: CPU of the window and engine processes.

Opens the bench window (bench/ui_stream.py's open_bench_window), loads the real starter
model, waits 3 s, then reads both processes' CPU time over --seconds of doing nothing. The
performance panel is shown, as it is by default, so its memory readings are included.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/idle_cpu.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import psutil  # noqa: E402
from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import ui_stream  # noqa: E402


def idle(seconds: float) -> None:
    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()

    app = QApplication.instance() or QApplication([])
    app.setApplicationName("cove-idle-cpu")
    core, window = ui_stream.open_bench_window(Path(tempfile.mkdtemp(prefix="cove-idle-")), max_tokens=100)
    window.show()
    window.start()
    ui_stream.use_starter(window, core)
    window.controller.preload_model()
    if not ui_stream.wait_for(window.controller.model_loaded, 120000):
        print("the starter model did not load", file=sys.stderr)
        return 1
    idle(3.0)
    engine = psutil.Process(window.controller.engine.host_pid)
    ui0, engine0, t0 = time.process_time(), sum(engine.cpu_times()[:2]), time.perf_counter()
    idle(args.seconds)
    ui1, engine1, t1 = time.process_time(), sum(engine.cpu_times()[:2]), time.perf_counter()
    wall = t1 - t0
    print(
        f"idle {wall:.1f} s with the starter loaded: window process {100 * (ui1 - ui0) / wall:.2f}% of a core, "
        f"engine process {100 * (engine1 - engine0) / wall:.2f}%"
    )
    window.close()
    core.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
