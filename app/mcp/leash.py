"""The leash: the program Cove starts in a stdio tool server's place on POSIX. It runs the server
as its child, in the session and process group the SDK gave the leash, and when the server
exits, when Cove stops it, or when Cove dies (whatever signal ended it, SIGKILL included), it
ends every process the server left behind: its process group, its session and, on Linux, every
descendant (the leash is their subreaper, so a daemon that called setsid is one of them).

Run as `python -I -S leash.py PARENT_PID NAME -- COMMAND [ARGS...]`, or in the frozen app as
`cove --cove-child app.mcp.leash ...` (app/mcp/launch.py builds the line). It imports nothing of
Cove's and only the standard library: it starts with the server's scrubbed environment. Its
own words go to stderr, which is Cove's tool log. It exits with the server's exit status.

Invariant across processes: PARENT_PID is the Cove process that started it. Linux sends the
leash SIGTERM when the thread of Cove that started it ends (PR_SET_PDEATHSIG); elsewhere the
leash notices that its parent changed within POLL_S.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

GRACE_S = 1.0  # what the processes left get between SIGTERM and SIGKILL
POLL_S = 0.5  # how often the leash looks whether Cove is still its parent
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Leash:
    """One server on its leash: `run()` starts it, waits for its end or a stop, then ends the rest."""

    def __init__(self, parent: int, name: str, command: list[str]) -> None:
        self.parent = parent
        self.name = name
        self.command = command
        self.me = os.getpid()
        self.stopped_by: int | None = None
        self.why = ""  # what stopped the server, for the log
        self.server: int | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self.server_status: int | None = None
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)  # a signal wakes the select in `_sleep`
        for sig in _STOPPING:
            signal.signal(sig, self._stop)
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)

    def run(self) -> int:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans of the server's tree become the leash's children
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != self.parent:  # Cove died before the line above took effect
            return 1
        try:
            server = subprocess.Popen(self.command, close_fds=True, preexec_fn=_die_with_the_leash)  # noqa: PLW1509 - the leash has one thread
        except (OSError, ValueError) as exc:
            self._say(f"could not start {self.command[0]!r}: {getattr(exc, 'strerror', None) or exc}")
            return 127
        self.server = server.pid
        self._popen = server
        _let_go_of_the_pipes()  # only the server holds Cove's pipes: its end is their end
        self._wait_for_the_server()
        exited = self.server_status is not None
        left = self.end_the_rest()
        pids = " ".join(map(str, sorted(left)))
        if left and exited:
            self._say(f"the server exited; stopped {len(left)} process(es) it left running: {pids}")
        elif left:
            self._say(f"stopped the server ({self.why}) and what it started, {len(left)} process(es): {pids}")
        if self.server_status is not None:
            return self.server_status
        return 128 + (self.stopped_by or int(signal.SIGTERM))

    def _wait_for_the_server(self) -> None:
        while self.stopped_by is None:
            self._reap()
            if self.server_status is not None:
                return
            if os.getppid() != self.parent:  # Cove is gone (and no PR_SET_PDEATHSIG here)
                self.stopped_by = int(signal.SIGHUP)
                self.why = "Cove is gone"
                return
            self._sleep(POLL_S)

    def end_the_rest(self) -> set[int]:
        """SIGTERM to every process of the server's tree, group and session, SIGKILL to those left
        after GRACE_S, until none is left (a process that forks meanwhile is found again)."""
        ended: set[int] = set()
        left = self._others()
        for pid in left:
            _send(pid, signal.SIGTERM)
            _send(pid, signal.SIGCONT)  # a stopped process sees its SIGTERM
        ended |= left
        deadline = time.monotonic() + GRACE_S
        while left and time.monotonic() < deadline:
            self._sleep(0.02)
            self._reap()
            left = self._others()
        for _round in range(200):
            if not left:
                break
            ended |= left
            for pid in left:
                _send(pid, signal.SIGKILL)
            self._sleep(0.01)
            self._reap()
            left = self._others()
        return ended

    def _others(self) -> set[int]:
        """The live processes of the leash's tree, group and session, other than the leash."""
        table = _process_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _group, _session, _state) in table.items():
            children.setdefault(ppid, []).append(pid)
        tree: set[int] = set()
        todo = [self.me]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        mine = {pid for pid, (_ppid, group, session, _state) in table.items() if self.me in (group, session)}
        return {pid for pid in tree | mine if pid != self.me and table[pid][3] not in "ZX"}

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.server:
                code = os.waitstatus_to_exitcode(status)
                if self._popen is not None:
                    self._popen.returncode = code  # reaped here, not by Popen
                self.server_status = code if code >= 0 else 128 - code

    def _sleep(self, seconds: float) -> None:
        try:
            ready, _, _ = select.select([self._wake_r], [], [], seconds)
        except InterruptedError:
            return
        if ready:
            os.read(self._wake_r, 512)

    def _stop(self, signum: int, _frame: object) -> None:
        if self.stopped_by is None:
            self.stopped_by = signum
            self.why = signal.Signals(signum).name

    def _say(self, sentence: str) -> None:
        try:
            print(f"[cove: tool server {self.name}] leash: {sentence}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


def _process_table() -> dict[int, tuple[int, int, int, str]]:
    """pid: (parent, process group, session, state) for every process this user can see."""
    table: dict[int, tuple[int, int, int, str]] = {}
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            table[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode("ascii", "replace"))
        return table
    # Elsewhere, ps: POSIX names pid, ppid and pgid; "sess" and "stat" are the BSDs' and macOS's.
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,pgid=,stat="], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return table
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit():
            table[int(parts[0])] = (int(parts[1]), int(parts[2]), -1, parts[3][:1])
    return table


def _send(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _let_go_of_the_pipes() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _prctl_function() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return function
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl_function()


def _prctl(option: int, value: int) -> bool:
    if _PRCTL is None:
        return False
    import ctypes

    return _PRCTL(ctypes.c_int(option), *(ctypes.c_ulong(v) for v in (value, 0, 0, 0))) == 0


def _die_with_the_leash() -> None:
    """In the server, before it runs: SIGKILL when the leash is gone (only a SIGKILL ends it early)."""
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--" or not argv[0].isdigit():
        print("leash: usage: leash.py PARENT_PID NAME -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    return Leash(int(argv[0]), argv[1], argv[3:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
