"""Starting, watching and stopping one engine host process (parent side).

Requests go down a dedicated pipe and events come up another (never stdout, which native
code may print to). A reader thread turns each line into a message and hands it to
`on_message`; when the pipe closes it waits for the exit code and calls `on_exit` once
with a readable cause ("killed by signal 9 (SIGKILL), perhaps out of memory"). Neither
callback may block for long: they run on the reader thread.

On POSIX the host runs in a session (and process group) of its own, so signals meant for
the parent's group never reach it; it ends when the parent closes the request pipe or
dies (the kernel closes the pipe then, even after SIGKILL).
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
from typing import Any

from app.engine.environment import scrub_environment
from app.engine.protocol import Message, ProtocolError, decode, encode

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


class HostGone(Exception):
    """The host is not running (it exited or was stopped)."""


def host_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host's environment: no credentials, Hugging Face offline, telemetry off."""
    env = dict(os.environ if base is None else base)
    scrub_environment(env)
    # The host runs `-m app.engine.host.main`; make the package importable from any cwd.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def describe_exit(returncode: int | None, stderr_tail: str = "") -> str:
    """Why a host ended, as a phrase: 'killed by signal 9 (SIGKILL), perhaps out of memory'."""
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


_SIGNALS = {int(s): s.name for s in signal.Signals}


def process_memory(pid: int) -> dict[str, int]:
    """Private (USS) and resident memory of a process; {} when it cannot be read."""
    try:
        import psutil

        info = psutil.Process(pid).memory_full_info()
        return {"engine_uss_bytes": int(info.uss), "engine_rss_bytes": int(info.rss)}
    except Exception:  # psutil missing, process gone, or USS not permitted
        return {}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


class HostProcess:
    """One running host. `send` is thread-safe; callbacks run on the reader thread."""

    def __init__(
        self,
        argv: list[str],
        *,
        on_message: Callable[[HostProcess, Message], None],
        on_exit: Callable[[HostProcess, str], None],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._on_message = on_message
        self._on_exit = on_exit
        self._send_lock = threading.Lock()
        self._stderr_tail: deque[str] = deque(maxlen=40)
        self.expected_exit = False  # set before a deliberate stop, so it is not reported as a crash
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        child_fds = (down_r, up_w)
        kwargs: dict[str, Any] = {}
        if sys.platform == "win32":  # pass_fds is POSIX-only: hand the child inheritable handles
            import msvcrt

            handles = [msvcrt.get_osfhandle(fd) for fd in child_fds]
            for h in handles:
                os.set_handle_inheritable(h, True)
            kwargs["startupinfo"] = subprocess.STARTUPINFO(lpAttributeList={"handle_list": handles})
            ids = handles
        else:
            kwargs["pass_fds"] = child_fds
            # A session of its own: a signal to the parent's process group (`timeout`, a
            # logout, a closed terminal, Ctrl-C) reaches the parent only, which stops the
            # reply and keeps it; the host ends when its request pipe closes (host.py).
            kwargs["start_new_session"] = True
            ids = list(child_fds)
        try:
            self._proc = subprocess.Popen(
                [*argv, "--in-fd", str(ids[0]), "--out-fd", str(ids[1])],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else host_environment(),
                close_fds=True,
                **kwargs,
            )
        except BaseException:
            os.close(down_w)
            os.close(up_r)
            raise
        finally:
            os.close(down_r)
            os.close(up_w)
        self._down = down_w
        self._up = os.fdopen(up_r, "rb")
        self.pid = self._proc.pid
        self._stderr_thread = threading.Thread(target=self._drain_stderr, name=f"engine-{self.pid}-stderr", daemon=True)
        self._stderr_thread.start()
        self._reader = threading.Thread(target=self._read, name=f"engine-{self.pid}-events", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None and self._reader.is_alive()

    @property
    def stderr_tail(self) -> str:
        return "".join(self._stderr_tail)

    def send(self, msg: Message) -> None:
        data = encode(msg)
        with self._send_lock:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._down, view) :]
            except OSError:
                raise HostGone() from None

    def kill(self) -> None:
        self.expected_exit = True
        try:
            self._proc.kill()
        except OSError:
            pass

    def stop(self, timeout_s: float = 3.0) -> None:
        """Ask the host to exit (end of input), then kill it if it does not."""
        self.expected_exit = True
        with self._send_lock:
            try:
                os.close(self._down)
            except OSError:
                pass
            self._down = -1
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._reader.join(timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        try:
            code: int = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return code

    def _drain_stderr(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        for raw in iter(lambda: stream.readline(4096), b""):
            self._stderr_tail.append(raw.decode("utf-8", "replace"))
        stream.close()

    def _read(self) -> None:
        try:
            for line in self._up:
                try:
                    msg = decode(line)
                except ProtocolError:
                    continue  # a host never writes anything else; ignore rather than trust it
                self._on_message(self, msg)
        except (OSError, ValueError):
            pass
        finally:
            self._up.close()
            code = self.wait_exit(5.0)
            if code is None:
                self._proc.kill()
                code = self.wait_exit(5.0)
            self._stderr_thread.join(1.0)  # the last words of an abort arrive on stderr
            if self._down >= 0:
                with self._send_lock:
                    try:
                        os.close(self._down)
                    except OSError:
                        pass
                    self._down = -1
            self._on_exit(self, describe_exit(code, self.stderr_tail))
