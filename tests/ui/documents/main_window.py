"""The main window the Documents tests open: on the test's core and engine, shown and started."""

from __future__ import annotations

from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow


def open_window(qtbot, core, engine) -> MainWindow:
    """The main window on `core` and `engine`, shown and started (its documents feature running)."""
    window = MainWindow(
        ChatController(core, engine), state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json"
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window
