"""Who writes a streaming reply: this process's id and start time, recorded on the reply's
row, and whether the process a row names is still running (so start-up repair only marks
replies whose writer is gone)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import psutil

# Two start times of one process read through psutil agree to the clock tick, give or take the
# whole second by which the boot time psutil adds (/proc/stat's `btime`, whole seconds, read each
# time) moves when the wall clock is slewed across a second; a process that reused the pid started
# later than this apart.
_SAME_START_S = 2.0


@dataclass(frozen=True)
class Writer:
    pid: int
    started: float  # process start, seconds since the epoch (psutil's create_time)


@cache
def this_writer() -> Writer:
    """This process, as recorded on the rows it streams into."""
    return Writer(os.getpid(), psutil.Process().create_time())


def writer_alive(pid: int | None, started: float | None) -> bool:
    """True when the process that recorded (pid, started) is still running. A row without a
    recorded writer (written before writers were recorded) has none alive."""
    if pid is None or started is None:
        return False
    me = this_writer()
    if (pid, started) == (me.pid, me.started):
        return True  # this process: running, whatever the clock says now
    try:
        return abs(psutil.Process(int(pid)).create_time() - float(started)) < _SAME_START_S
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ValueError, OverflowError):
        # AccessDenied: a process of another user reused the pid, so it is not our writer.
        return False
