"""Notices in the window: what start-up found (a damaged history moved aside, unreadable
settings) stays on screen, with the path and a way to open its folder, until the person
dismisses it; the controller's passing notes come and go below it without removing it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from tests.support.paths import SUPPORT_DIR
from tests.support.starter_stand_in import first_start_with_starter
from ui.main import run_window
from ui.shell.notice_area import NoticeArea

FAKE_HOST = SUPPORT_DIR / "fake_host.py"


def _shown_texts(window: QWidget) -> list[str]:
    return [label.text() for label in window.findChildren(QLabel) if label.isVisible() and label.text()]


def _buttons(window: QWidget, text: str) -> list[QPushButton]:
    return [b for b in window.findChildren(QPushButton) if b.isVisible() and b.text() == text]


def test_damaged_files_are_said_until_dismissed_through_the_starter_notes(qapp, tmp_path, tiny_gguf, monkeypatch):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True, mode=0o700)  # private, as Cove makes it: the notices are the damaged files'
    (home / "data").chmod(0o700)
    (home / "data" / "cove.db").write_bytes(b"these bytes are not a database " * 300)
    (home / "data" / "settings.json").write_bytes(b"\x00 nor are these settings")
    monkeypatch.setenv("COVE_HOME", str(home))
    release = first_start_with_starter(monkeypatch, tiny_gguf)
    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile()) or True)
    seen: dict[str, object] = {}

    def started(window) -> None:
        seen["at start"] = _shown_texts(window)

        def after_ready() -> None:  # the controller has cleared its "Preparing…" note by now
            seen["after the starter"] = _shown_texts(window)
            for button in _buttons(window, "Open folder"):
                button.click()
            dismiss = _buttons(window, "Dismiss")
            seen["dismiss buttons"] = len(dismiss)
            if dismiss:
                dismiss[0].click()
            seen["after dismiss"] = _shown_texts(window)
            window.close()

        window.controller.models_changed.connect(lambda: QTimer.singleShot(0, after_ready))
        QTimer.singleShot(100, release.set)
        QTimer.singleShot(30000, window.close)  # a failing run still ends

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_window(engine_argv=[sys.executable, str(FAKE_HOST)], on_started=started)
    finally:
        signal.set_wakeup_fd(-1)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    moved = sorted((home / "data").glob("cove.db.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_bytes().startswith(b"these bytes")
    said = f"The history file was damaged; it was moved to {moved[0]} and a new one started."
    settings_copy = sorted((home / "data").glob("settings.json.corrupt-*"))
    assert len(settings_copy) == 1
    settings_said = f"The settings file could not be read; it was moved to {settings_copy[0]} and the defaults are used."
    assert said in seen["at start"] and seen["at start"].count(settings_said) == 1
    assert any("Preparing the starter model" in t for t in seen["at start"])  # shown together, not instead
    assert said in seen["after the starter"] and settings_said in seen["after the starter"]
    assert not any("Preparing the starter model" in t for t in seen["after the starter"])
    assert opened == [str(home / "data")] * 2  # Open folder shows where each damaged file now is
    assert seen["dismiss buttons"] == 2
    assert said not in seen["after dismiss"] and settings_said in seen["after dismiss"]  # one at a time


def test_passing_notes_never_remove_a_kept_notice(qtbot):
    area = NoticeArea()
    qtbot.addWidget(area)
    area.show()
    area.keep("The settings file could not be read; it was moved to /x/settings.json.corrupt-1.", Path("/x"))
    area.keep("2 replies that were cut off last time are kept, marked interrupted.")
    area.keep("2 replies that were cut off last time are kept, marked interrupted.")  # said once
    area.show_passing("Preparing the starter model…")
    area.show_passing("The engine stopped unexpectedly.")
    assert area.passing.isVisible() and area.passing.text() == "The engine stopped unexpectedly."
    area.show_passing("")
    assert not area.passing.isVisible()
    assert len(area.kept_texts()) == 2 and all(n.isVisible() for n in area.kept())
    first, second = area.kept()
    assert first.open_button is not None and second.open_button is None
    with qtbot.waitSignal(area.notice_dismissed) as gone:
        second.dismiss_button.click()
    assert gone.args == ["2 replies that were cut off last time are kept, marked interrupted."]
    assert area.kept_texts() == ["The settings file could not be read; it was moved to /x/settings.json.corrupt-1."]


def test_a_folder_the_desktop_cannot_open_is_named_instead(qtbot):
    area = NoticeArea(open_folder=lambda folder: False)
    qtbot.addWidget(area)
    area.show()
    notice = area.keep("The history file was damaged; it was moved to /data/cove.db.corrupt-1 and a new one started.", Path("/data"))
    notice.open_button.click()
    assert area.passing.isVisible() and "/data" in area.passing.text()
    assert len(area.kept()) == 1
