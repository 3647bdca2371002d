"""Whether the process a reply's row names is still running (app/store/writer.py): this process
always is; another is judged by its start time, which psutil reads as clock ticks plus the boot
time in whole seconds, so a boot time that moved by a second (the wall clock slewed) is the same
process, and a pid reused by a process started seconds later is not."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from app.store.writer import this_writer, writer_alive


def test_this_process_is_alive_even_when_the_boot_time_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    me = this_writer()
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: me.started + 30.0)
    assert writer_alive(me.pid, me.started)


def test_another_process_is_alive_across_a_second_of_boot_time_and_not_when_the_pid_was_reused() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = psutil.Process(child.pid).create_time()
        assert writer_alive(child.pid, started)
        assert writer_alive(child.pid, started - 1.0) and writer_alive(child.pid, started + 1.0)  # btime read a second apart
        assert not writer_alive(child.pid, started - 5.0)  # another process that had the pid before
    finally:
        child.kill()
        child.wait()
    assert not writer_alive(child.pid, started)
    assert not writer_alive(None, started) and not writer_alive(child.pid, None)
