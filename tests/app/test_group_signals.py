"""Signals to the whole process group, as `timeout`, a logout and a closed terminal send them:
the engine host is not in that group, so the reply is stopped by Cove, not cut off by a
crash. `cove chat` keeps it as `interrupted` and exits 128 + the signal's number (README);
the window keeps it as `interrupted` and exits 0. The host still ends when its parent is
gone, even after SIGKILL of the parent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
DRIVER = ROOT / "tests" / "support" / "window_driver.py"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def _register(home: Path, model: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "models", "import", str(model)],
        cwd=ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    settings = home / "data" / "settings.json"
    settings.write_text(json.dumps({"last_model": model.stem, "sampling": {}}))


def _last_reply(home: Path) -> tuple[str, str]:
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        return con.execute("SELECT status, content FROM messages WHERE role = 'assistant' ORDER BY rowid DESC LIMIT 1").fetchone()
    finally:
        con.close()


def _start_chat(home: Path) -> subprocess.Popen:
    """`cove chat` with a long reply, leader of its own process group (as under `timeout` or a shell)."""
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "chat", "--new", "--temperature", "0", "--max-tokens", "100000", "Tell me a long story"],
        cwd=ROOT,
        env=_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _read_some(proc: subprocess.Popen, n: int = 40) -> bytes:
    """Wait (generously) until the reply has visibly streamed `n` bytes to stdout."""
    assert proc.stdout is not None
    got = b""
    deadline = time.monotonic() + 120
    while len(got) < n and time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        got += chunk
    if len(got) < n:
        proc.kill()
        raise AssertionError(f"the reply never streamed: {got!r} {proc.stderr.read() if proc.stderr else b''!r}")
    return got


def _engine_children(pid: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [p for p in psutil.Process(pid).children() if "app.engine.host.main" in " ".join(p.cmdline())]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no engine host was started")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_group_keeps_the_reply_interrupted(tmp_path: Path, tiny_gguf: Path, signum: int) -> None:
    home = tmp_path / "home"
    _register(home, tiny_gguf)
    proc = _start_chat(home)
    try:
        streamed = _read_some(proc)
        hosts = _engine_children(proc.pid)
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = err.decode()
    assert proc.returncode == 128 + signum, text
    assert "stopped unexpectedly" not in text and "Traceback" not in text, text
    status, content = _last_reply(home)
    assert status == "interrupted", text
    assert content and content.startswith(streamed.decode("utf-8", "replace").strip()[:20])
    for host in hosts:  # the host ends with its turn's command
        host.wait(30)


def test_the_engine_host_ends_when_its_parent_is_killed(tmp_path: Path, tiny_gguf: Path) -> None:
    home = tmp_path / "home"
    _register(home, tiny_gguf)
    proc = _start_chat(home)
    try:
        _read_some(proc)
        hosts = _engine_children(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the whole group: the host is not in it
        proc.communicate(timeout=60)
        gone, alive = psutil.wait_procs(hosts, timeout=60)
        assert not alive, "the engine host outlived its killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_window_group_keeps_the_reply_interrupted(tmp_path: Path, tiny_gguf: Path, signum: int) -> None:
    home = tmp_path / "home"
    _register(home, tiny_gguf)
    env = _env(home, QT_QPA_PLATFORM="offscreen", FAKE_HOST_TPS="40", FAKE_HOST_WORDS="100000")
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        message_id = None
        deadline = time.monotonic() + 120
        while message_id is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("STREAMING "):
                message_id = line.split()[1]
            elif not line:
                break
        assert message_id, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.5)  # a few words more
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    assert "EXITED 0" in out and "Traceback" not in err
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        status, content, error = con.execute("SELECT status, content, error FROM messages WHERE id = ?", [message_id]).fetchone()
    finally:
        con.close()
    assert status == "interrupted", (status, error)
    assert not error or "stopped unexpectedly" not in error, error
    assert content.startswith("w0 w1 ")


def test_a_host_stuck_in_a_request_still_ends_when_its_pipe_closes(tmp_path: Path) -> None:
    """A load or a prefill llama.cpp cannot interrupt: the host exits anyway once its parent is gone."""
    from app.engine.protocol import ListDevices, encode

    stuck = (
        "import sys, time, app.engine.host.main as h; h.PARENT_GONE_EXIT_S = 0.5; "
        "h.Host._dispatch = lambda self, req: time.sleep(3600); sys.exit(h.main(sys.argv[1:]))"
    )
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", stuck, "--in-fd", str(down_r), "--out-fd", str(up_w)],
        cwd=ROOT,
        env=_env(tmp_path),
        pass_fds=(down_r, up_w),
        stdout=subprocess.DEVNULL,
    )
    os.close(down_r)
    os.close(up_w)
    try:
        with os.fdopen(up_r, "rb") as events:
            assert events.readline()  # Ready: the host is up
            os.write(down_w, encode(ListDevices("1")))
            time.sleep(0.5)  # the request is being handled (forever)
            os.close(down_w)
            assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
