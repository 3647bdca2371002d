"""A background thread that samples private memory (USS) of this process and of the engine process.

It never touches Qt: it hands each `MemorySample` to a callback on its own thread, and the
owner marshals it to the UI thread (e.g. by emitting a signal). psutil's
`memory_full_info()` can take around a millisecond, which is why this is not done on the
UI thread (research/performance.md section 4.5).

Reading another process's USS walks all of its memory mappings in the kernel: about 13 ms of
CPU for the engine with the starter model loaded, every half second, on a core the engine's
threads need; reading this process's own USS costs a few ms as well. So while a reply
streams (`set_engine_busy(True)`) neither process is read: the last figures are carried
over, and the next reading after the reply refreshes them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import psutil

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5


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
        self._lock = threading.Lock()  # guards _engine_pid / _engine_process across threads
        self._own = self._process(own_pid if own_pid is not None else os.getpid())
        self._engine_pid: int | None = None
        self._engine_process: psutil.Process | None = None
        self._engine_busy = False  # a reply is streaming: leave the engine alone
        self._last_engine_uss: int | None = None
        self._last_ui_uss: int | None = None

    def set_engine_pid(self, pid: int | None) -> None:
        """Follow the engine process with this pid from the next reading on (None: no engine)."""
        with self._lock:
            self._engine_pid = pid
            self._engine_process = self._process(pid) if pid is not None else None
            self._last_engine_uss = None

    def set_engine_busy(self, busy: bool) -> None:
        """While busy (a reply streams), readings carry both last figures over."""
        with self._lock:
            self._engine_busy = busy

    def sample_now(self) -> MemorySample:
        """Take one reading on the calling thread."""
        with self._lock:
            pid, engine, busy = self._engine_pid, self._engine_process, self._engine_busy
            last = self._last_engine_uss
        if busy and self._last_ui_uss is not None:
            ui_uss: int | None = self._last_ui_uss
        else:
            ui_uss = self._last_ui_uss = read_uss(self._own) if self._own is not None else None
        if engine is None:
            engine_uss = None
        elif busy and last is not None:
            engine_uss = last
        else:
            engine_uss = read_uss(engine)
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
