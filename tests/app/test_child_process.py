"""The one child-process harness (app/child_process.py) that the engine host and the download
child both run on: lines down and up on either channel, lines that do not decode skipped, the
reader stopped by its handler, end of input, a lingering child killed, and the stderr tail in
the exit sentence of both the engine's HostProcess and a DownloadHandle."""

from __future__ import annotations

import queue
import sys
import textwrap
from pathlib import Path

import pytest

import app.download_process as download_process
from app.child_process import ChildGone, ChildProcess, describe_exit, with_project_importable
from app.engine.process import HostProcess
from app.engine.protocol import Cancel, Message, Ready
from models.download.protocol import Failed

WAIT_S = 30.0

# Echoes each line of stdin to stdout; "bad" gets a line that does not decode first; "quit"
# ends it with code 0; stderr gets its last words.
ECHO = textwrap.dedent(
    """
    import sys
    for line in sys.stdin:
        if line.strip() == "bad":
            sys.stdout.write("not json\\n")
        if line.strip() == "quit":
            break
        sys.stdout.write(line)
        sys.stdout.flush()
    sys.stderr.write("echo: end of input\\n")
    """
)


def _decode(line: bytes) -> str:
    text = line.decode("ascii").strip()
    if text == "not json":
        raise ValueError("not a message")  # a protocol error is a ValueError
    return text


class Recorded:
    def __init__(self, stop_at: str | None = None) -> None:
        self.messages: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.exits: queue.SimpleQueue[tuple[int | None, str]] = queue.SimpleQueue()
        self._stop_at = stop_at

    def on_message(self, child: ChildProcess[str], msg: str) -> bool:
        self.messages.put(msg)
        return msg == self._stop_at

    def on_exit(self, child: ChildProcess[str], code: int | None, stderr_tail: str) -> None:
        self.exits.put((code, stderr_tail))


def _echo(rec: Recorded, script: str = ECHO) -> ChildProcess[str]:
    child: ChildProcess[str] = ChildProcess(
        [sys.executable, "-c", script],
        env=with_project_importable({"PATH": "/usr/bin:/bin"}),
        decode=_decode,
        on_message=rec.on_message,
        on_exit=rec.on_exit,
        name="test",
        channel="stdio",
    )
    child.start_reading()
    return child


def test_lines_go_down_and_come_up_and_bad_ones_are_skipped() -> None:
    rec = Recorded()
    child = _echo(rec)
    child.send_line(b"one\n")
    assert rec.messages.get(timeout=WAIT_S) == "one"
    child.send_line(b"bad\n")  # the child writes "not json" and then echoes "bad"
    assert rec.messages.get(timeout=WAIT_S) == "bad"
    child.send_line(b"quit\n")
    code, stderr_tail = rec.exits.get(timeout=WAIT_S)
    assert code == 0 and "echo: end of input" in stderr_tail
    assert rec.messages.empty()
    assert not child.alive
    with pytest.raises(ChildGone):  # its input is closed once it has ended
        child.send_line(b"late\n")


def test_end_of_input_ends_the_child() -> None:
    rec = Recorded()
    child = _echo(rec)
    child.close_input()
    assert rec.exits.get(timeout=WAIT_S) == (0, "echo: end of input\n")


def test_a_handler_that_returns_true_stops_the_reading_and_the_child_is_reaped() -> None:
    rec = Recorded(stop_at="enough")
    child = _echo(rec)
    child.send_line(b"enough\n")
    assert rec.messages.get(timeout=WAIT_S) == "enough"
    code, _ = rec.exits.get(timeout=WAIT_S)  # the reader closed its pipe: the echo ends
    assert code is not None


def test_a_child_that_ignores_end_of_input_is_killed_after_the_grace() -> None:
    rec = Recorded()
    child = _echo(rec, "import time\nwhile True: time.sleep(1)\n")
    child.close_input()
    child.kill_after(0.2)
    code, _ = rec.exits.get(timeout=WAIT_S)
    assert code is not None and code < 0
    assert describe_exit(code).startswith("killed by signal 9")


HOST_THAT_ABORTS = textwrap.dedent(
    """
    import os, sys
    out = int(sys.argv[sys.argv.index("--out-fd") + 1])
    os.write(out, b'{"type":"ready","pid":7}\\n')
    os.write(out, b'{"type":["not","a","tag"]}\\n')
    sys.stderr.write("GGML_ASSERT: the model is broken\\n")
    sys.exit(3)
    """
)


def test_the_stderr_tail_reaches_the_engine_hosts_exit_sentence() -> None:
    messages: queue.SimpleQueue[Message] = queue.SimpleQueue()
    causes: queue.SimpleQueue[str] = queue.SimpleQueue()
    proc = HostProcess(
        [sys.executable, "-c", HOST_THAT_ABORTS],
        on_message=lambda p, msg: messages.put(msg),
        on_exit=lambda p, cause: causes.put(cause),
    )
    assert causes.get(timeout=WAIT_S) == "exited with code 3: GGML_ASSERT: the model is broken"
    assert messages.get_nowait() == Ready(pid=7)
    assert messages.empty()  # the line with a bad tag was skipped
    assert "GGML_ASSERT" in proc.stderr_tail
    with pytest.raises(ChildGone):
        proc.send(Cancel("x"))


DOWNLOAD_CHILD_THAT_FAILS = textwrap.dedent(
    """
    import sys
    sys.stdin.readline()  # the job
    sys.stderr.write("MemoryError: the download child ran out\\n")
    sys.exit(3)
    """
)


def test_the_stderr_tail_reaches_the_download_failure_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core import open_core
    from app.downloads import DownloadManager
    from app.paths import resolve_paths

    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    monkeypatch.setattr(download_process, "child_command", lambda: [sys.executable, "-c", DOWNLOAD_CHILD_THAT_FAILS])
    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    try:
        handle = DownloadManager.for_core(core).start("org/m", ["m.gguf"], None, None, lambda event: None)
        last = handle.wait(WAIT_S)
        assert isinstance(last, Failed), last
        assert "exited with code 3: MemoryError: the download child ran out" in last.message
        assert handle.state == "failed"
    finally:
        core.close()
