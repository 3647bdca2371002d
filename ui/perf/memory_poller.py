"""A background thread that samples private memory (USS) of this process and of the engine process.

It never touches Qt: it hands each `MemorySample` to a callback on its own thread, and the
owner marshals it to the UI thread (e.g. by emitting a signal), since psutil's
`memory_full_info()` is too slow for the UI thread.

Reading a process's USS walks every page it has resident, in the kernel, so it costs more the
larger the model. USS is read again only when it can have changed (`UssReading`): when the
process's resident size (statm, cheap) moved by RSS_STEP, after a reply or a
load (`mark_stale`), or once every MAX_AGE_S. While a reply streams (`set_engine_busy(True)`)
neither process is read at all: the last figures are carried over, and the next reading
after the reply refreshes them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5
RSS_STEP = 1 << 20  # a change of resident size this large means USS may have changed: read it
MAX_AGE_S = 60.0  # and read it at least this often (pages shared with another process can become private)


@dataclass(frozen=True)
class MemorySample:
    """One reading; crosses from the poller thread to the UI thread. None = unknown or gone."""

    ui_uss: int | None
    engine_uss: int | None
    engine_pid: int | None


def read_uss(process: psutil.Process) -> int | None:
    """Unique set size in bytes; None if the process is gone or may not be inspected."""
    try:
        info = process.memory_full_info()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied, OSError):
        return None
    uss = getattr(info, "uss", None)
    return int(uss) if uss is not None else None


def read_rss(process: psutil.Process) -> int | None:
    """Resident set size in bytes from statm (cheap); None if the process is gone."""
    try:
        return int(process.memory_info().rss)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied, OSError):
        return None


class UssReading:
    """The last USS of one process, read again only when it may have changed (module docstring)."""

    def __init__(self, process: psutil.Process | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.process = process
        self._clock = clock
        self._uss: int | None = None
        self._rss: int | None = None
        self._read_at = float("-inf")
        # mark_stale() may run on another thread during read(): a count, not a flag, so a
        # mark made while a reading is under way still causes the next one.
        self._marks = 0
        self._marks_read = -1

    def mark_stale(self) -> None:
        """The next `read()` reads USS whatever the resident size says."""
        self._marks += 1

    def read(self) -> int | None:
        """USS in bytes, from a new reading or the last one; None if the process is gone."""
        if self.process is None:
            return None
        rss = read_rss(self.process)
        if rss is None:
            self._uss = None
            return None
        now, marks = self._clock(), self._marks
        if (
            marks != self._marks_read
            or self._uss is None
            or self._rss is None
            or abs(rss - self._rss) >= RSS_STEP
            or now - self._read_at >= MAX_AGE_S
        ):
            self._uss, self._rss, self._read_at, self._marks_read = read_uss(self.process), rss, now, marks
        return self._uss


class MemoryPoller(threading.Thread):
    """Every `interval` seconds, reads both USS figures and calls `callback(sample)`.

    `start()` begins polling; `stop()` ends it and joins. `set_engine_pid()` may be called
    from any thread; the next reading uses the new pid.
    """

    def __init__(
        self,
        callback: Callable[[MemorySample], None],
        interval: float = DEFAULT_INTERVAL_S,
        own_pid: int | None = None,
    ) -> None:
        super().__init__(name="cove-memory-poller", daemon=True)
        self._callback = callback
        self._interval = interval
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # guards _engine_pid / _engine across threads
        self._own = UssReading(self._process(own_pid if own_pid is not None else os.getpid()))
        self._engine_pid: int | None = None
        self._engine = UssReading(None)
        self._engine_busy = False  # a reply is streaming: leave the engine alone
        self._last_engine_uss: int | None = None
        self._last_ui_uss: int | None = None

    def set_engine_pid(self, pid: int | None) -> None:
        """Follow the engine process with this pid from the next reading on (None: no engine)."""
        with self._lock:
            self._engine_pid = pid
            self._engine = UssReading(self._process(pid) if pid is not None else None)
            self._last_engine_uss = None

    def set_engine_busy(self, busy: bool) -> None:
        """While busy (a reply streams), readings carry both last figures over; the first
        reading after it reads both processes again (the reply changed their memory)."""
        with self._lock:
            self._engine_busy = busy
            if not busy:
                self._engine.mark_stale()
                self._own.mark_stale()

    def sample_now(self) -> MemorySample:
        """Take one reading on the calling thread."""
        with self._lock:
            pid, engine, busy = self._engine_pid, self._engine, self._engine_busy
            last = self._last_engine_uss
        if busy and self._last_ui_uss is not None:
            ui_uss: int | None = self._last_ui_uss
        else:
            ui_uss = self._last_ui_uss = self._own.read()
        if engine.process is None:
            engine_uss = None
        elif busy and last is not None:
            engine_uss = last
        else:
            engine_uss = engine.read()
        with self._lock:
            if pid == self._engine_pid:
                self._last_engine_uss = engine_uss
        return MemorySample(ui_uss=ui_uss, engine_uss=engine_uss, engine_pid=pid)

    def stop(self, timeout: float | None = 2.0) -> None:
        """Ask the thread to finish and wait for it (no-op if it never started)."""
        self._stopping.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    def run(self) -> None:
        while not self._stopping.is_set():
            sample = self.sample_now()
            if self._stopping.is_set():
                break
            try:
                self._callback(sample)
            except Exception:  # a failing receiver must not end polling silently
                log.exception("memory poller callback failed")
            self._stopping.wait(self._interval)

    @staticmethod
    def _process(pid: int) -> psutil.Process | None:
        try:
            return psutil.Process(pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError, ValueError):
            return None
