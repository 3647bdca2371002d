"""`cove` run with a real pseudo-terminal as its standard input, output and error (pty.fork), as a
person at a terminal runs it: what it showed comes back as bytes, and each question it asks (its
prompt ending in `prompt`) is answered by typing."""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.paths import REPO_ROOT


def cove_on_a_terminal(
    home: Path, *args: str, answer: Callable[[bytes], bytes] | None = None, prompt: bytes = b"(default: deny): ", timeout: float = 120
) -> tuple[int, bytes]:
    """Run `cove ARGS` on a pty; each time the shown text has one more `prompt`, type what
    `answer(everything shown so far)` says and Enter. Returns (exit code, everything shown)."""
    import pty

    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its terminal
        try:
            os.chdir(REPO_ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "app.cli.main", *args], env)
        finally:
            os._exit(127)
    seen, asked = b"", 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child is gone (EIO once the pty's other end closed)
                break
            if not chunk:
                break
            seen += chunk
            if answer is not None and seen.count(prompt) > asked:
                asked += 1
                os.write(fd, answer(seen) + b"\r")
    finally:
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen


def read_all(fd: int, quiet_s: float = 0.5) -> bytes:
    """Everything the terminal `fd` has to read, until it has been quiet for `quiet_s`."""
    seen = b""
    while select.select([fd], [], [], quiet_s)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk
    return seen


def raw_found(shown: bytes, raw: tuple[str, ...]) -> list[str]:
    """Which of the characters `raw` reached the terminal, each as its escape (for a message)."""
    text = shown.decode("utf-8", errors="replace")
    return [ch.encode("unicode_escape").decode("ascii") for ch in raw if ch in text]
