"""One child process that speaks JSON lines with Cove (parent side): starting it, the pipe
down and the pipe up, the reader thread, the tail of its stderr, and its end. The engine host
(app/engine/process.py) and the download child (app/download_process.py) are both one of these.

Lines go down one pipe and come up another: either pipes of their own, passed to the child as
`--in-fd N --out-fd M` (`channel="fds"`, so native code that prints to stdout cannot corrupt
them), or the child's stdin and stdout (`channel="stdio"`). A reader thread decodes each line
and hands the message to `on_message` (lines that do not decode are skipped: a child never
writes anything else); when the pipe closes it reaps the child (killing it if it lingers),
waits briefly for the last words on stderr, closes the pipe down and calls `on_exit` once with
the exit code and the stderr tail, which `describe_exit` turns into a phrase. Neither callback
may block for long: they run on the reader thread.

On POSIX the child runs in a session (and process group) of its own, so signals meant for the
parent's group (Ctrl-C, a closed terminal) never reach it; it ends when the parent closes the
pipe down or dies (the kernel closes the pipe then, even after SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, Literal, Self, TypeVar

M = TypeVar("M")

_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
STDERR_LINES = 40  # the stderr lines kept for the exit sentence
_SIGNALS = {int(s): s.name for s in signal.Signals}


class ChildGone(Exception):
    """The child is not running (it exited, or its input was closed)."""


def with_project_importable(env: dict[str, str]) -> dict[str, str]:
    """`env` with Cove's own folder first on PYTHONPATH, so `-m app...` / `-m models...`
    imports from any working directory."""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def describe_exit(returncode: int | None, stderr_tail: str = "") -> str:
    """Why a child ended, as a phrase: 'killed by signal 9 (SIGKILL), perhaps out of memory'."""
    if returncode is None:
        return "it stopped answering"
    if returncode < 0 or (sys.platform != "win32" and returncode > 128 and returncode - 128 in _SIGNALS):
        num = -returncode if returncode < 0 else returncode - 128
        name = _SIGNALS.get(num, f"signal {num}")
        if num == getattr(signal, "SIGKILL", 9):
            return f"killed by signal {num} ({name}), perhaps out of memory"
        if num == getattr(signal, "SIGSEGV", 11):
            return f"crashed with signal {num} ({name}, a memory error in native code)"
        if num == getattr(signal, "SIGABRT", 6):
            last = _last_line(stderr_tail)
            return f"aborted (signal {num}, {name})" + (f": {last}" if last else "")
        return f"stopped by signal {num} ({name})"
    last = _last_line(stderr_tail)
    return f"exited with code {returncode}" + (f": {last}" if last else "")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _spawn(argv: list[str], env: Mapping[str, str], channel: Literal["fds", "stdio"]) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start the child; (the process, the parent's end of the pipe down, the parent's end of the pipe up)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    child_fds = (down_r, up_w)
    kwargs: dict[str, Any] = {"stderr": subprocess.PIPE, "env": dict(env), "close_fds": True}
    if channel == "stdio":
        kwargs.update(stdin=down_r, stdout=up_w)
        if sys.platform == "win32":  # Ctrl-C in a console reaches the parent only
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    else:
        kwargs.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if sys.platform == "win32":  # pass_fds is POSIX-only: hand the child inheritable handles
            import msvcrt

            handles = [msvcrt.get_osfhandle(fd) for fd in child_fds]
            for h in handles:
                os.set_handle_inheritable(h, True)
            kwargs["startupinfo"] = subprocess.STARTUPINFO(lpAttributeList={"handle_list": handles})  # type: ignore[attr-defined]
            ids = handles
        else:
            kwargs["pass_fds"] = child_fds
            ids = list(child_fds)
        argv = [*argv, "--in-fd", str(ids[0]), "--out-fd", str(ids[1])]
    if sys.platform != "win32":
        # A session of its own: a signal to the parent's process group (`timeout`, a logout, a
        # closed terminal, Ctrl-C) reaches the parent only, which decides what it means; the
        # child ends when its pipe down closes.
        kwargs["start_new_session"] = True
    try:
        proc = subprocess.Popen(argv, **kwargs)
    except BaseException:
        os.close(down_w)
        os.close(up_r)
        raise
    finally:
        os.close(down_r)
        os.close(up_w)
    return proc, down_w, up_r


class ChildProcess(Generic[M]):
    """One running child. `send` and the stops are thread-safe; callbacks run on the reader thread.

    The child is started (and its stderr drained) at construction; the reader starts with
    `start_reading()`, so the owner can keep the handle and write a first line before any
    message or the exit can reach it. `on_message` returning true stops the reading: the child
    is then reaped like one that closed its pipe.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        decode: Callable[[bytes], M],
        on_message: Callable[[Self, M], object],
        on_exit: Callable[[Self, int | None, str], None],
        name: str,
        channel: Literal["fds", "stdio"] = "fds",
        reap_s: float = 5.0,
    ) -> None:
        self._decode = decode
        # Called with this object, which is of the subclass whose Self the owner's callbacks take.
        self._on_message: Callable[[Any, M], object] = on_message
        self._on_exit: Callable[[Any, int | None, str], None] = on_exit
        self._reap_s = reap_s  # how long a child whose pipe up closed may take to exit before it is killed
        self._send_lock = threading.Lock()
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.expected_exit = False  # set before a deliberate stop, so it is not reported as a crash
        self._proc, self._down, up = _spawn(argv, env, channel)
        self._up = os.fdopen(up, "rb")
        self.pid = self._proc.pid
        self._name = name
        self._stderr_thread = threading.Thread(target=self._drain_stderr, name=f"{name}-{self.pid}-stderr", daemon=True)
        self._stderr_thread.start()
        self._reader = threading.Thread(target=self._read, name=f"{name}-{self.pid}-events", daemon=True)

    def start_reading(self) -> None:
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None and self._reader.is_alive()

    @property
    def stderr_tail(self) -> str:
        return "".join(self._stderr_tail)

    def send_line(self, data: bytes) -> None:
        """Write one whole line down; ChildGone once the child or its input is gone."""
        with self._send_lock:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._down, view) :]
            except OSError:
                raise ChildGone() from None

    def close_input(self) -> None:
        """Close the pipe down: the child exits at end of input."""
        with self._send_lock:
            if self._down >= 0:
                try:
                    os.close(self._down)
                except OSError:
                    pass
                self._down = -1

    def kill(self) -> None:
        """End the child at once."""
        self.expected_exit = True
        try:
            self._proc.kill()  # does nothing once the child has been reaped
        except OSError:
            pass

    def kill_after(self, grace_s: float) -> None:
        """Kill the child `grace_s` from now if it is still running then (without waiting here)."""
        timer = threading.Timer(grace_s, self._kill_if_running)
        timer.daemon = True
        timer.start()

    def stop(self, timeout_s: float = 3.0) -> None:
        """Ask the child to exit (end of input), kill it if it does not, and wait for the reader."""
        self.expected_exit = True
        self.close_input()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._reader.join(timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        """The exit code, or None if the child is still running after `timeout_s`."""
        try:
            code: int = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return code

    def _kill_if_running(self) -> None:
        if self._proc.poll() is None:
            self.kill()

    def _drain_stderr(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        for raw in iter(lambda: stream.readline(4096), b""):
            self._stderr_tail.append(raw.decode("utf-8", "replace"))
        stream.close()

    def _read(self) -> None:
        decode, on_message = self._decode, self._on_message  # locals: this loop runs once per token
        try:
            for line in self._up:
                try:
                    msg = decode(line)
                except ValueError:  # a protocol error: a child never writes anything else; skip it
                    continue
                if on_message(self, msg):
                    break
        except (OSError, ValueError):
            pass
        finally:
            self._up.close()
            code = self.wait_exit(self._reap_s)
            if code is None:
                self._proc.kill()
                code = self.wait_exit(5.0)
            self._stderr_thread.join(1.0)  # the last words of an abort arrive on stderr
            self.close_input()
            self._on_exit(self, code, self.stderr_tail)
