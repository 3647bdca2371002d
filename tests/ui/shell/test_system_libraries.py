"""Before Qt starts on X11, `cove` checks that the libraries Qt's xcb plugin needs are there;
a missing one is one sentence naming it and the install command, and exit status 1, instead
of Qt's abort and a core dump. The loader is injected, so these tests say the same on a
machine with or without those libraries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ui.main as ui_main
import ui.shell.system_libraries as system_libraries
from tests.support.paths import REPO_ROOT
from ui.shell.system_libraries import XCB_LIBRARIES, missing_libraries, uses_xcb, window_library_problem

ROOT = REPO_ROOT
X11 = {"DISPLAY": ":0"}


def _loader_without(*absent: str):
    loaded: list[str] = []

    def load(soname: str) -> object:
        loaded.append(soname)
        if soname in absent:
            raise OSError(f"{soname}: cannot open shared object file: No such file or directory")
        return object()

    load.loaded = loaded  # type: ignore[attr-defined]
    return load


def test_a_missing_library_is_named_with_the_command_that_installs_it() -> None:
    sentence = window_library_problem(X11, "linux", load=_loader_without("libxcb-icccm.so.4"))
    assert sentence is not None
    assert "libxcb-icccm.so.4" in sentence and "libxcb-cursor.so.0" not in sentence
    assert "`sudo apt-get install libxcb-icccm4`" in sentence
    assert "`sudo dnf install xcb-util-wm`" in sentence
    assert "cove chat" in sentence and sentence.count(". ") == 0  # one sentence


def test_every_missing_library_is_named_once() -> None:
    absent = ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    sentence = window_library_problem(X11, "linux", load=_loader_without(*absent))
    assert sentence is not None
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1`" in sentence
    assert "sudo dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms`" in sentence


def test_all_present_is_no_problem_and_each_library_was_tried() -> None:
    load = _loader_without()
    assert window_library_problem(X11, "linux", load=load) is None
    assert load.loaded == [lib.soname for lib in XCB_LIBRARIES]  # type: ignore[attr-defined]
    assert {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"} <= set(load.loaded)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        ({"DISPLAY": ":0"}, "linux", True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, "linux", True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb:nograb"}, "linux", True),
        ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux", True),  # an X session with a nested compositor
        ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux", False),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "wayland"}, "linux", False),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux", False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({}, "linux", False),
        ({"DISPLAY": ":0"}, "darwin", False),
        ({"DISPLAY": ":0"}, "win32", False),
    ],
)
def test_the_check_runs_only_where_qt_would_use_xcb(environ, platform, expected) -> None:
    assert uses_xcb(environ, platform) is expected
    load = _loader_without(*(lib.soname for lib in XCB_LIBRARIES))
    assert (window_library_problem(environ, platform, load=load) is not None) is expected


def test_missing_libraries_is_what_failed_to_load() -> None:
    assert [lib.soname for lib in missing_libraries(load=_loader_without("libxcb-keysyms.so.1"))] == ["libxcb-keysyms.so.1"]


def test_cove_says_it_and_exits_1_without_starting_qt(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    for name in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(system_libraries, "load_library", _loader_without("libxcb-cursor.so.0"))
    started: list[object] = []
    monkeypatch.setattr(ui_main, "run_window", lambda **kwargs: started.append(kwargs) or 0)
    assert ui_main.main([]) == 1
    assert started == []  # no QApplication, no window
    err = capsys.readouterr().err
    assert err.startswith("cove: Cove's window needs system libraries that are not installed (libxcb-cursor.so.0)")
    assert "sudo apt-get install libxcb-cursor0`" in err and len(err.strip().splitlines()) == 1


def test_with_the_libraries_there_cove_starts_the_window(monkeypatch) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    for name in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(system_libraries, "load_library", _loader_without())
    started: list[object] = []
    monkeypatch.setattr(ui_main, "run_window", lambda **kwargs: started.append(kwargs) or 0)
    assert ui_main.main([]) == 0 and len(started) == 1


def test_the_check_imports_no_qt(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import ui.main, ui.shell.system_libraries as libs\n"
        "def load(name):\n"
        "    raise OSError(name)\n"
        "libs.load_library = load\n"
        "code = ui.main.main([])\n"
        "print(sorted(m for m in sys.modules if m.startswith('PySide6')))\n"
        "sys.exit(code)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"}}
    env.update(DISPLAY=":0", COVE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == "[]"
    assert "Traceback" not in done.stderr and "libxcb-icccm.so.4" in done.stderr
