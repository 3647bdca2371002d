"""Starting, watching and stopping one engine host process (parent side).

A HostProcess is an app/child_process.py ChildProcess on pipes of its own: requests go down a
dedicated pipe and events come up another (never stdout, which native code may print to). A
reader thread turns each line into a message and hands it to `on_message`; when the pipe
closes it waits for the exit code and calls `on_exit` once with a readable cause ("killed by
signal 9 (SIGKILL), perhaps out of memory"). Neither callback may block for long: they run on
the reader thread.

On POSIX the host runs in a session (and process group) of its own, so signals meant for
the parent's group never reach it; it ends when the parent closes the request pipe or
dies (the kernel closes the pipe then, even after SIGKILL).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from app.child_process import ChildGone, ChildProcess, describe_exit, with_project_importable
from app.engine.environment import scrub_environment
from app.engine.protocol import Message, decode, encode

__all__ = ["HostGone", "HostProcess", "describe_exit", "host_environment", "process_memory"]

HostGone = ChildGone  # the host is not running (it exited or was stopped)


def host_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host's environment: no credentials, Hugging Face offline, telemetry off."""
    env = dict(os.environ if base is None else base)
    scrub_environment(env)
    # The host runs `-m app.engine.host.main`; make the package importable from any cwd.
    return with_project_importable(env)


def process_memory(pid: int) -> dict[str, int]:
    """Private (USS) and resident memory of a process; {} when it cannot be read."""
    try:
        import psutil

        info = psutil.Process(pid).memory_full_info()
        return {"engine_uss_bytes": int(info.uss), "engine_rss_bytes": int(info.rss)}
    except Exception:  # psutil missing, process gone, or USS not permitted
        return {}


class HostProcess(ChildProcess[Message]):
    """One running host. `send` is thread-safe; callbacks run on the reader thread."""

    def __init__(
        self,
        argv: list[str],
        *,
        on_message: Callable[[HostProcess, Message], None],
        on_exit: Callable[[HostProcess, str], None],
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            argv,
            env=env if env is not None else host_environment(),
            decode=decode,
            on_message=on_message,  # called as it is, once per event: nothing added per token
            on_exit=lambda proc, code, stderr_tail: on_exit(proc, describe_exit(code, stderr_tail)),
            name="engine",
        )
        self.start_reading()

    def send(self, msg: Message) -> None:
        """Send one request; HostGone when the host is gone."""
        self.send_line(encode(msg))
