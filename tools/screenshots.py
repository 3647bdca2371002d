"""Screenshots of the real window for the README: the first-run welcome page, a short
conversation with the starter model, then the chat, the performance panel, the model picker,
search results and the Models panel as PNGs.

Run under Xvfb for real window decorations and popups, or offscreen:
    xvfb-run -s "-screen 0 1400x900x24" .venv/bin/python -m tools.screenshots assets/screenshots
    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tools.screenshots assets/screenshots
It uses a fresh temporary COVE_HOME, so it never touches your own history.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

PROMPTS = (
    "Write a short poem about a lighthouse by the sea.",
    "Now give me three facts about lighthouses as a list.",
)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "assets/screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="cove-shots-"))
    os.environ["COVE_HOME"] = str(home)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.core import open_core
    from app.engine.client import EngineClient
    from app.settings import SamplingParams
    from models.starter import ensure_starter
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    app = QApplication.instance() or QApplication(["cove"])
    app.setApplicationDisplayName("Cove")
    core = open_core()
    starter = ensure_starter(core.library)
    core.remember_model(starter)
    core.save_sampling_defaults(SamplingParams(temperature=0.7, repeat_penalty=1.15, max_tokens=120, seed=42))
    controller = ChatController(core, EngineClient())
    window = MainWindow(controller, state_file=home / "window.ini", presets_file=home / "presets.json")
    window.resize(1320, 820)
    window.show()
    window.start()
    pending = list(PROMPTS)
    shots: list[str] = []

    def save(widget, name: str) -> None:
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        shots.append(str(path))

    def next_prompt(_message=None) -> None:
        if pending:
            text = pending.pop(0)
            window.composer.set_text(text)
            QTimer.singleShot(400, lambda: window._send(text))
        else:
            controller.reply_finished.disconnect(next_prompt)
            QTimer.singleShot(800, finish)

    def finish() -> None:
        save(window, "chat")
        save(window.perf, "performance")
        window.picker._combo.showPopup()
        QTimer.singleShot(500, picker_shot)

    def picker_shot() -> None:
        popup = window.picker._combo.view().window()
        save(popup, "model-picker")
        window.picker._combo.hidePopup()
        window.sidebar.focus_search()
        window.sidebar._search.setText("lighthouse")
        QTimer.singleShot(1200, search_shot)

    def search_shot() -> None:
        save(window, "search")
        panel = window.open_models("Discover")
        panel.resize(1100, 720)
        QTimer.singleShot(1000, lambda: models_shot(panel))

    def models_shot(panel) -> None:
        save(panel, "models")
        panel.close()
        window.close()
        app.quit()

    def welcome_shot() -> None:
        save(window, "welcome")
        next_prompt()

    controller.reply_finished.connect(next_prompt)
    QTimer.singleShot(1500, welcome_shot)
    QTimer.singleShot(600_000, app.quit)  # never hang a build
    app.exec()
    core.close()
    for path in shots:
        print(path)
    return 0 if len(shots) == 6 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
