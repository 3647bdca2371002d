"""`cove` with no arguments opens the window, with arguments it is the command line, and with
no display it says so in one sentence instead of crashing inside Qt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}}
    return {**env, "COVE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **extra}


def test_no_display_is_one_sentence_pointing_to_cove_chat(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ui.main"], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "needs a display" in done.stderr and "cove chat" in done.stderr


def test_arguments_go_to_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ui.main", "history", "list", "--json"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]"


def test_the_window_opens_and_closes_offscreen(tmp_path: Path, tiny_gguf: Path) -> None:
    env = _env(tmp_path, QT_QPA_PLATFORM="offscreen")
    imported = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "models", "import", str(tiny_gguf)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    code = (
        "import sys; from ui.main import run_window\n"
        "titles = []\n"
        "def started(w):\n"
        "    titles.append(w.windowTitle())\n"
        "sys.exit(run_window(on_started=started, quit_after_ms=1500) or (0 if titles and titles[0].startswith('Cove') else 3))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "QThread" not in done.stderr


def test_the_window_icon_is_the_real_one_at_every_size(qapp) -> None:
    from ui.shell.app_icon import app_icon

    icon = app_icon()
    assert not icon.isNull()
    sizes = {s.width() for s in icon.availableSizes()}
    assert {16, 32, 48, 256} <= sizes
