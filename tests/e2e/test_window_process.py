"""The window process as the desktop sees it: SIGTERM (logout) or SIGHUP (its terminal
closed) mid-reply keeps the partial reply as `interrupted` and the window exits by itself
without Qt thread warnings; SIGKILL mid-reply, with another `cove` started meanwhile, keeps
every word a checkpoint saved (it loses at most the text after the last checkpoint)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
DRIVER = ROOT / "tests" / "support" / "window_driver.py"
TPS = 40


def _start(home: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "COVE_HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "FAKE_HOST_TPS": str(TPS),
        "FAKE_HOST_WORDS": "100000",
    }
    return subprocess.Popen([sys.executable, str(DRIVER)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_streaming(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("STREAMING "):
            return line.split()[1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("the window never streamed a reply: " + (proc.stderr.read() if proc.stderr else ""))


def _row(home: Path, message_id: str) -> tuple[str, str]:
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        return con.execute("SELECT status, content FROM messages WHERE id = ?", [message_id]).fetchone()
    finally:
        con.close()


def _wait_words(home: Path, message_id: str, more_than: int) -> int:
    """Until a checkpoint has saved more than `more_than` words of the reply; returns how many."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        saved = len(_row(home, message_id)[1].split())
        if saved > more_than:
            return saved
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint saved more than {more_than} words of the reply")


def _the_first_words(content: str) -> list[str]:
    """The reply's words, checked to be the fake host's first ones in order (w0 w1 w2 ...)."""
    words = content.split()
    assert words == [f"w{i}" for i in range(len(words))], content[:200]
    return words


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_mid_reply_keeps_it_interrupted_and_exits_by_itself(tmp_path: Path, tiny_gguf: Path, signum) -> None:
    home = tmp_path / "home"
    _register(home, tiny_gguf)
    proc = _start(home)
    message_id = _wait_streaming(proc)
    checkpointed = _wait_words(home, message_id, 19)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=15)  # the window quits by itself: nothing kills it
    assert proc.returncode == 0, err
    assert "EXITED 0" in out
    assert "QThread" not in err and "Traceback" not in err
    status, content = _row(home, message_id)
    assert status == "interrupted"
    assert len(_the_first_words(content)) >= checkpointed  # kept whole: at least what was checkpointed


def test_sigkill_mid_reply_with_another_cove_started_meanwhile_keeps_every_checkpointed_word(tmp_path: Path, tiny_gguf: Path) -> None:
    home = tmp_path / "home"
    _register(home, tiny_gguf)
    proc = _start(home)
    message_id = _wait_streaming(proc)
    _wait_words(home, message_id, 0)  # a checkpoint is in the database
    other = subprocess.run(  # its start-up repair must leave the live reply alone
        [sys.executable, "-m", "app.cli.main", "history", "list"],
        cwd=ROOT,
        env={**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 0 and "cut off" not in other.stderr, other.stderr
    status, content = _row(home, message_id)
    assert status == "streaming"
    # The window checkpoints on after the other start: the reply grows in the database.
    before_kill = _wait_words(home, message_id, len(content.split()))
    proc.kill()
    proc.communicate(timeout=15)
    status, content = _row(home, message_id)
    assert status == "streaming"  # the next start marks it interrupted (tested in the store)
    # Every word a checkpoint saved is kept, whole and in order: what is lost is at most the
    # text that came after the last checkpoint.
    assert len(_the_first_words(content)) >= before_kill


def _register(home: Path, model: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "models", "import", str(model)],
        cwd=ROOT,
        env={**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Make it the model the window uses (the starter is never assembled in these tests).
    settings = home / "data" / "settings.json"
    import json

    settings.write_text(json.dumps({"last_model": model.stem, "sampling": {}}))
