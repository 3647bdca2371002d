"""Runs the real window (ui.main.run_window) with the scripted fake engine host and sends one
message, printing STREAMING <message id> once its reply is visibly streaming. Used by the
tests that stop the window process with SIGTERM or SIGKILL mid-reply."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QTimer  # noqa: E402

from ui.main import run_window  # noqa: E402

FAKE_HOST = str(Path(__file__).resolve().parent / "fake_host.py")


def drive(window) -> None:
    announced = []

    def on_text(message_id: str, _text: str, _n: int) -> None:
        if not announced:
            announced.append(message_id)
            print(f"STREAMING {message_id}", flush=True)

    window.controller.reply_text_received.connect(on_text)

    def send() -> None:
        window.composer.set_text(sys.argv[1] if len(sys.argv) > 1 else "tell me a long story")
        window._send(window.composer.text())

    QTimer.singleShot(300, send)


if __name__ == "__main__":
    code = run_window(engine_argv=[sys.executable, FAKE_HOST], on_started=drive)
    print(f"EXITED {code}", flush=True)
    sys.exit(code)
